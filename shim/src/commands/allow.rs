//! `allow` and `deny`: from the host, change the allowlist of a running
//! sandbox at once through its proxy's control socket (network::control),
//! for the rest of the run; `--save` also writes the change into the policy
//! file the run started from.

use anyhow::{bail, Context, Result};

use crate::network::control;
use crate::network::policy::change::Op;
use crate::runtime::Runtime;
use crate::sandbox::{lookup, policy_file};

pub fn change(rt: &Runtime, op: Op, args: &crate::cli::ChangeArgs) -> Result<i32> {
    let what = format!("{} {}", op.as_str(), args.entry);
    let cwd = std::env::current_dir().context("read the working directory")?;
    let cwd = std::fs::canonicalize(&cwd).unwrap_or(cwd);
    let all = lookup::running(rt);
    let run = lookup::pick(&all, args.run.as_deref(), &cwd, &what, |r| {
        r.mode.as_deref() == Some("allowlist")
    })?;
    match run.mode.as_deref() {
        Some("allowlist") => {}
        Some(mode) => bail!(
            "{what} in {}: it runs in network mode {mode}, which has no allowlist (only allowlist mode has a proxy to change)",
            run.id
        ),
        None => bail!("{what} in {}: it was not started with a network mode of claude-shim's", run.id),
    }
    // Refused before anything changes: the change would not outlive the run.
    if args.save && run.policy_file.is_none() {
        bail!(
            "{what} --save: {} runs the embedded policy {}, which has no file to write; start it with --policy FILE",
            run.id,
            run.policy_name.as_deref().unwrap_or("agent")
        );
    }
    let req = control::Request {
        op,
        entry: args.entry.clone(),
    };
    let reply = control::send(&run.meta_dir, &req).with_context(|| format!("{what} in {}", run.id))?;
    println!("claude-shim: {}: {}", run.id, crate::terminal::escaped(&reply.said));
    match &run.policy_file {
        Some(file) if args.save => {
            policy_file::save(file, run.workdir.as_deref(), op, &args.entry)
                .with_context(|| format!("save {what} in {}", file.display()))?;
            println!("claude-shim: saved in {}", file.display());
        }
        _ => println!("claude-shim: for this run only (--save also writes it into its policy file)"),
    }
    Ok(0)
}
