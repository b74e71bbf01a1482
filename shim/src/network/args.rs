//! The command line of `claude-shim __network ROLE`, the helpers `create`
//! starts: what `attach` passes them and what they parse.

use std::path::PathBuf;

/// `claude-shim __network ROLE`: the helpers, started by `create` only.
#[derive(clap::Args, Debug)]
pub struct HelperArgs {
    #[command(subcommand)]
    pub role: HelperRole,
}

#[derive(clap::Subcommand, Debug)]
pub enum HelperRole {
    /// Start the mode's egress helper and stop it when the container's init exits
    Watch(HelperOpts),
    /// createContainer hook: send the container's namespaces to the runtime (unprivileged runtimes)
    Hook {
        #[arg(long)]
        state_dir: PathBuf,
    },
}

#[derive(clap::Args, Debug, Clone)]
pub struct HelperOpts {
    #[arg(long)]
    pub id: String,
    /// The container's directory under <root>/.claude-shim
    #[arg(long)]
    pub state_dir: PathBuf,
    #[arg(long)]
    pub init_pid: i32,
    /// The init's start time (/proc/<pid>/stat field 22), so a reused pid is not taken for it
    #[arg(long)]
    pub init_start: u64,
}
