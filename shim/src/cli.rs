//! The command line: runc's global flags and verbs (so engines drive claude-shim
//! unchanged), then claude-shim's own verbs. Argument structs only; the work is
//! in `commands/`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(
    name = "claude-shim",
    about = "An OCI runtime on libcontainer that runs AI coding agents in a sandbox that can be proven",
    disable_version_flag = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalOpts,

    /// Print the version
    #[arg(short = 'v', long = "version")]
    pub version: bool,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// runc's global flags.
#[derive(Args, Debug, Clone)]
pub struct GlobalOpts {
    /// Root directory for container state (default /run/claude-shim, or $XDG_RUNTIME_DIR/claude-shim when unprivileged)
    #[arg(long, global = true)]
    pub root: Option<PathBuf>,
    /// Write logs to this file instead of stderr
    #[arg(long, global = true)]
    pub log: Option<PathBuf>,
    /// Log format
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Log debug messages
    #[arg(long, global = true)]
    pub debug: bool,
    /// Manage cgroups through systemd (refused where systemd is not running)
    #[arg(long, global = true)]
    pub systemd_cgroup: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    // OCI verbs, as runc spells them.
    /// Create a container from a bundle (it waits for `start`)
    Create(liboci_cli::Create),
    /// Start a created container
    Start(liboci_cli::Start),
    /// Print the state of a container as JSON
    State(liboci_cli::State),
    /// Send a signal to a container's init (or to all its processes)
    Kill(Kill),
    /// Delete a container and everything it holds
    Delete(liboci_cli::Delete),

    // runc's other verbs.
    /// Create and start a container; `run BUNDLE/` runs a bundle under a generated id
    Run(Run),
    /// Run a process in a running container
    Exec(liboci_cli::Exec),
    /// List the processes of a container
    Ps(liboci_cli::Ps),
    /// List containers
    List(List),
    /// Freeze every process of a container
    Pause(liboci_cli::Pause),
    /// Thaw a paused container
    Resume(liboci_cli::Resume),
    /// Update a container's resource limits
    Update(Update),
    /// Print the OCI features JSON of this runtime
    Features(liboci_cli::Features),
    /// Display container events such as OOM notifications and cgroup statistics
    Events(Events),
    /// Write a default config.json
    Spec(liboci_cli::Spec),

    // claude-shim's own verbs.
    /// Run one command in a sandbox compiled from a policy (default: the embedded agent policy)
    Sandbox(Sandbox),
    /// Write the sandbox of a policy as an OCI bundle (runnable by claude-shim or runc)
    Bundle(BundleArgs),
    /// Prove a policy's sandbox from inside: a probe checks every defence
    Verify(Verify),
    /// Run Claude Code sandboxed: the whole agent (default), or each of its Bash commands (--per-command)
    Claude(Claude),
    /// Remove what killed runtimes left under the state root; live and handed-over containers stay
    Gc,
    /// Policy tools: `policy import [FILE]` translates Claude Code's or srt's sandbox settings
    Policy(PolicyArgs),
    /// What sandboxes left that the host would run, moved aside at their exit: `list`, `restore RUN`
    Quarantine(QuarantineArgs),
    /// The hosts a sandbox's proxy refused, while it runs (`--follow`: as they happen) or after it ended
    Denials(DenialsArgs),
    /// Admit a host in a running sandbox at once (its proxy reloads the list): HOST[:PORT], *.DOMAIN, *:PORT
    Allow(ChangeArgs),
    /// Refuse a host in a running sandbox at once (undoes an `allow`; a wider entry gets a deny entry)
    Deny(ChangeArgs),
    /// Check this machine for what claude-shim needs: one line per check, with what to do
    Doctor(Doctor),
    /// What a review run changed, each path flagged where the host would run it (`--diff`, `--json`, `--list`)
    Changes(ChangesArgs),
    /// Bring a review run's changes into the project: every unflagged one, or the paths named
    Apply(ApplyArgs),
    /// Remove a review run and everything it kept
    Discard(DiscardArgs),

    // Internal verbs.
    /// The probe of `verify`, run inside a sandbox (internal)
    #[command(name = "__probe", hide = true)]
    Probe(Probe),
    /// One Bash command of Claude Code in a sandbox: the CLAUDE_CODE_SHELL_PREFIX
    /// of `claude --per-command` (also run as `claude-shim-shell CMD`) (internal)
    #[command(name = "__shell", hide = true)]
    Shell(Shell),
    /// The init of `claude --per-command`'s session sandbox: runs each Bash call handed to it (internal)
    #[command(name = "__spawner", hide = true)]
    Spawner,
    /// ssh's ProxyCommand inside an allowlist sandbox: HOST PORT through its SOCKS proxy (internal)
    #[command(name = "__connect", hide = true)]
    Connect(Connect),
    /// The man pages, one per verb, written to DIR (hack/install) (internal)
    #[command(name = "__man", hide = true)]
    Man { dir: PathBuf },
    /// The completion script of a shell, on stdout (hack/install) (internal)
    #[command(name = "__completion", hide = true)]
    Completion {
        #[arg(value_enum)]
        shell: CompletionShell,
    },
    // Internal: helpers `create` starts beside a container.
    #[command(name = "__network", hide = true)]
    Network(crate::network::HelperArgs),
}

#[derive(Args, Debug)]
pub struct Doctor {
    /// Also start a container through each engine found, from IMAGE (already
    /// in the engine's store; slow); an engine without claude-shim registered fails
    #[arg(long, value_name = "IMAGE")]
    pub engines: Option<String>,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Args, Debug)]
pub struct Sandbox {
    /// Policy file, or `agent` / `offline` for the embedded ones (default: agent)
    #[arg(long)]
    pub policy: Option<String>,
    /// The writable working directory (default: the current one)
    #[arg(long)]
    pub workdir: Option<PathBuf>,
    /// A root filesystem to use instead of the host's (read-only either way)
    #[arg(long)]
    pub rootfs: Option<PathBuf>,
    /// Make a TCP port the sandbox listens on reachable from the host at
    /// 127.0.0.1:HOSTPORT (repeatable; inbound only, in every network mode)
    #[arg(long, value_name = "[HOSTPORT:]PORT")]
    pub publish: Vec<String>,
    /// Keep every write to the working directory for review (claude-shim changes, apply): the project is not written
    #[arg(long)]
    pub review: bool,
    /// The command and its arguments
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

#[derive(Args, Debug)]
pub struct Claude {
    /// Policy file, or `agent` / `offline` for the embedded ones (default: agent)
    #[arg(long)]
    pub policy: Option<String>,
    /// Run claude on the host and each of its Bash commands in a sandbox rooted at the project
    #[arg(long)]
    pub per_command: bool,
    /// Make a TCP port the agent serves on reachable from the host at
    /// 127.0.0.1:HOSTPORT (repeatable; whole agent only)
    #[arg(long, value_name = "[HOSTPORT:]PORT")]
    pub publish: Vec<String>,
    /// Keep every write to the project for review (claude-shim changes, apply): the project is not written
    #[arg(long)]
    pub review: bool,
    /// Arguments for claude
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

#[derive(Args, Debug)]
pub struct PolicyArgs {
    #[command(subcommand)]
    pub command: PolicyCommand,
}

#[derive(Subcommand, Debug)]
pub enum PolicyCommand {
    /// Print a TOML policy translated from a Claude Code settings.json or an srt settings file
    /// (default: the user's Claude Code settings files, in Claude Code's order of precedence)
    Import {
        /// The settings file
        file: Option<PathBuf>,
    },
}

#[derive(Args, Debug)]
pub struct DenialsArgs {
    /// Keep printing new refusals until the sandbox ends
    #[arg(short, long)]
    pub follow: bool,
    /// The run (default: the running sandbox of this project, else its last run that kept a network log)
    #[arg(value_name = "RUN")]
    pub id: Option<String>,
}

/// `allow`/`deny [--run ID] [--save] ENTRY`.
#[derive(Args, Debug)]
pub struct ChangeArgs {
    /// The running sandbox (default: the only running sandbox of this project)
    #[arg(long, value_name = "ID")]
    pub run: Option<String>,
    /// Also write the change into the policy file the run started from (not an embedded policy)
    #[arg(long)]
    pub save: bool,
    /// HOST, HOST:PORT, *.DOMAIN[:PORT] or *:PORT, as in the policy's lists
    #[arg(value_name = "HOST[:PORT]")]
    pub entry: String,
}

#[derive(Args, Debug)]
pub struct QuarantineArgs {
    #[command(subcommand)]
    pub command: Option<QuarantineCommand>,
}

#[derive(Subcommand, Debug)]
pub enum QuarantineCommand {
    /// List every run that moved something aside, with where each entry was (the default)
    List,
    /// Put a run's entries back where they were (an entry whose place is taken stays)
    Restore {
        /// The run, as `list` names it
        run: String,
    },
}

#[derive(Args, Debug)]
pub struct ChangesArgs {
    /// The review run (default: the latest of the current project)
    pub run: Option<String>,
    /// Also print each change as a unified diff
    #[arg(long)]
    pub diff: bool,
    /// Print the changes as a JSON array
    #[arg(long)]
    pub json: bool,
    /// List every kept review run instead
    #[arg(long)]
    pub list: bool,
}

#[derive(Args, Debug)]
pub struct ApplyArgs {
    /// The review run (default: the latest of the current project)
    pub run: Option<String>,
    /// Paths to apply, relative to the project (default: every change the host would not run)
    pub paths: Vec<PathBuf>,
    /// Say what would be applied, and write nothing
    #[arg(long)]
    pub check: bool,
}

#[derive(Args, Debug)]
pub struct DiscardArgs {
    /// The review run (default: the latest of the current project)
    pub run: Option<String>,
}

#[derive(Args, Debug)]
pub struct Shell {
    /// The whole command string, as Claude Code passes it
    #[arg(allow_hyphen_values = true)]
    pub command: Vec<String>,
}

#[derive(Args, Debug)]
pub struct Verify {
    /// Policy file, or `agent` / `offline` for the embedded ones (default: agent)
    #[arg(long)]
    pub policy: Option<String>,
    /// The working directory the sandbox gets (default: the current one)
    #[arg(long)]
    pub workdir: Option<PathBuf>,
    /// A root filesystem to use instead of the host's
    #[arg(long)]
    pub rootfs: Option<PathBuf>,
    /// Also run the same bundle under this runc-compatible runtime (repeatable), side by side
    #[arg(long)]
    pub runtime: Vec<PathBuf>,
    /// Print the results as JSON
    #[arg(long)]
    pub json: bool,
    /// Allowlist mode: the allowed HOST[:PORT] to request through the proxy
    /// (default: the first name on the allowlist, port 443); `none` skips it
    #[arg(long, value_name = "HOST[:PORT]|none")]
    pub reach: Option<String>,
    /// Also run the probe, with the same expectations, under each sandbox of this
    /// JSON list ([{"name", "argv"} or {"name", "runtime", "runtime_args", "bundle"}]),
    /// side by side: the comparison of hack/bench's containment table
    #[arg(long, value_name = "FILE")]
    pub peers: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct BundleArgs {
    /// Policy file, or `agent` / `offline` for the embedded ones (default: agent)
    #[arg(long)]
    pub policy: Option<String>,
    /// The writable working directory (default: the current one)
    #[arg(long)]
    pub workdir: Option<PathBuf>,
    /// A root filesystem to use instead of the host's
    #[arg(long)]
    pub rootfs: Option<PathBuf>,
    /// Where to write the bundle
    #[arg(long)]
    pub out: PathBuf,
    /// Replace a non-empty --out
    #[arg(long)]
    pub force: bool,
    /// The command (default: sh)
    #[arg(last = true)]
    pub command: Vec<String>,
}

/// `kill CONTAINER [SIGNAL]`, with runc's default signal.
#[derive(Args, Debug)]
pub struct Kill {
    /// Send the signal to every process of the container
    #[arg(short, long)]
    pub all: bool,
    /// Container id
    pub container_id: String,
    /// Signal name (KILL, SIGKILL) or number (9)
    #[arg(default_value = "SIGTERM", allow_hyphen_values = true)]
    pub signal: String,
}

/// `run [--bundle B] ID`, or the standalone `run BUNDLE/`.
#[derive(Args, Debug)]
pub struct Run {
    /// Bundle directory holding config.json
    #[arg(short, long)]
    pub bundle: Option<PathBuf>,
    /// Unix socket that receives the pty master of a terminal process
    #[arg(long)]
    pub console_socket: Option<PathBuf>,
    /// File to write the container's init pid to
    #[arg(long)]
    pub pid_file: Option<PathBuf>,
    /// Do not use pivot_root to enter the rootfs
    #[arg(long)]
    pub no_pivot: bool,
    /// Accepted for runc compatibility
    #[arg(long, hide = true)]
    pub no_new_keyring: bool,
    /// Accepted for runc compatibility
    #[arg(long, hide = true)]
    pub no_subreaper: bool,
    /// Pass N file descriptors after stdio to the container
    #[arg(long, default_value_t = 0)]
    pub preserve_fds: i32,
    /// Keep the container's state after it exits
    #[arg(long)]
    pub keep: bool,
    /// Start the container and return at once
    #[arg(short, long)]
    pub detach: bool,
    /// Container id, or a path to a bundle directory (a path always holds a `/`)
    pub target: String,
}

/// `__connect HOST PORT`: run by ssh inside a sandbox.
#[derive(Args, Debug)]
pub struct Connect {
    pub host: String,
    pub port: u16,
}

/// `__probe --expect-json JSON` (or `--expect FILE`): check the sandbox from inside.
#[derive(Args, Debug)]
pub struct Probe {
    /// Read the expectations from this file
    #[arg(long, conflicts_with = "expect_json")]
    pub expect: Option<PathBuf>,
    /// The expectations as JSON
    #[arg(long)]
    pub expect_json: Option<String>,
    /// Print this process's capabilities as JSON (the probe's own re-exec)
    #[arg(long, conflicts_with_all = ["expect", "expect_json"])]
    pub print_status: bool,
}

#[derive(Args, Debug)]
pub struct List {
    /// table or json
    #[arg(short, long, default_value = "table")]
    pub format: String,
    /// Print only the container ids
    #[arg(short, long)]
    pub quiet: bool,
}

/// runc's `events` flags.
#[derive(Args, Debug)]
pub struct Events {
    /// Set the stats collection interval (a Go duration: 5s, 100ms)
    #[arg(long, default_value = "5s")]
    pub interval: String,
    /// Display the container's stats then exit
    #[arg(long)]
    pub stats: bool,
    /// The container's id
    pub container_id: String,
}

/// runc's `update` flags. liboci-cli's own took sizes as bare numbers and no
/// negative quota; runc reads sizes with units (`50M`) and `-1` as no limit.
#[derive(Args, Debug)]
pub struct Update {
    /// Read the new resource limits from the given JSON file (- for stdin); the other flags are then ignored
    #[arg(short, long)]
    pub resources: Option<PathBuf>,
    /// Set a new I/O weight
    #[arg(long)]
    pub blkio_weight: Option<u64>,
    /// CPU CFS period for hard capping (microseconds)
    #[arg(long)]
    pub cpu_period: Option<u64>,
    /// CPU usage limit within a period (microseconds; -1 for none)
    #[arg(long, allow_negative_numbers = true)]
    pub cpu_quota: Option<i64>,
    /// CPU realtime period (microseconds)
    #[arg(long)]
    pub cpu_rt_period: Option<u64>,
    /// CPU realtime hard cap (microseconds)
    #[arg(long, allow_negative_numbers = true)]
    pub cpu_rt_runtime: Option<i64>,
    /// CPU shares (relative weight against other containers)
    #[arg(long)]
    pub cpu_share: Option<u64>,
    /// CPUs to use (0-3,7)
    #[arg(long)]
    pub cpuset_cpus: Option<String>,
    /// Memory nodes to use (same format as --cpuset-cpus)
    #[arg(long)]
    pub cpuset_mems: Option<String>,
    /// Memory limit (bytes, or with a unit: 50M, 1g; -1 for none)
    #[arg(long, allow_negative_numbers = true, value_parser = bytes)]
    pub memory: Option<i64>,
    /// Memory reservation, the soft limit (bytes or with a unit; -1 for none)
    #[arg(long, allow_negative_numbers = true, value_parser = bytes)]
    pub memory_reservation: Option<i64>,
    /// Memory plus swap limit (bytes or with a unit; -1 for unlimited swap)
    #[arg(long, allow_negative_numbers = true, value_parser = bytes)]
    pub memory_swap: Option<i64>,
    /// Most processes the container may hold (-1 for none)
    #[arg(long, allow_negative_numbers = true)]
    pub pids_limit: Option<i64>,
    /// Container identifier
    #[arg(value_parser = clap::builder::NonEmptyStringValueParser::new(), required = true)]
    pub container_id: String,
}

fn bytes(s: &str) -> anyhow::Result<i64> {
    crate::units::parse_bytes(s)
}
