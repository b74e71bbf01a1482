//! `sandbox` (one command in a sandbox compiled from a policy, everything
//! removed afterwards) and `bundle` (the same sandbox written out as an OCI
//! bundle that claude-shim or runc can run).

use std::os::fd::AsRawFd;

use anyhow::Result;
use claude_shim_bundle::policy::values::Workspace;

use crate::commands::run::generated_id;
use crate::runtime::{foreground, Runtime};
use crate::sandbox;
use crate::sandbox::run::Run;

fn is_tty(fd: i32) -> bool {
    nix::unistd::isatty(fd).unwrap_or(false)
}

pub fn sandbox(rt: &Runtime, args: &crate::cli::Sandbox) -> Result<i32> {
    // A Ctrl-C from here on is handled, not fatal: nothing may be left behind.
    foreground::defer_termination()?;
    let mut policy = sandbox::load_policy(args.policy.as_deref())?;
    sandbox::add_published(&mut policy, &args.publish)?;
    if args.review {
        policy.filesystem.workspace = Workspace::Review;
    }
    let inv = sandbox::invocation(
        args.workdir.as_deref(),
        args.rootfs.as_deref(),
        &args.command,
        caller_has_terminal(),
    )?;
    run_policy(rt, &policy, &inv, &mut |_| Ok(()))
}

/// Both stdin and stdout are terminals: the sandbox gets a pseudo-terminal.
pub fn caller_has_terminal() -> bool {
    is_tty(std::io::stdin().as_raw_fd()) && is_tty(std::io::stdout().as_raw_fd())
}

/// Compiles `policy` for `inv`, lets `edit` adjust the compiled spec, runs
/// it to the end and removes everything made for it (`sandbox::run`).
/// Returns the exit code. The caller has called `foreground::defer_termination`.
pub fn run_policy(
    rt: &Runtime,
    policy: &claude_shim_bundle::Policy,
    inv: &claude_shim_bundle::Invocation,
    edit: &mut dyn FnMut(&mut claude_shim_bundle::Compiled) -> Result<()>,
) -> Result<i32> {
    let id = generated_id("sandbox");
    let run = Run {
        id: &id,
        announce: None,
        policy,
        inv,
    };
    sandbox::run::run(rt, &run, edit)
}

pub fn bundle(args: &crate::cli::BundleArgs) -> Result<i32> {
    let policy = sandbox::load_policy(args.policy.as_deref())?;
    if policy.filesystem.workspace == Workspace::Review {
        anyhow::bail!(
            "write a bundle of {}: workspace = \"review\" keeps its layer in claude-shim's state, made for each run; run it with claude-shim sandbox",
            policy.name()
        );
    }
    let command = if args.command.is_empty() {
        vec!["sh".to_owned()]
    } else {
        args.command.clone()
    };
    let inv = sandbox::invocation(args.workdir.as_deref(), args.rootfs.as_deref(), &command, false)?;
    let compiled = sandbox::compile_policy(&policy, &inv, None)?;
    sandbox::write(&args.out, &compiled, args.force, false)?;
    // The bundle mounts these read-only; they must exist when it runs.
    for p in sandbox::create_placeholders(&inv.workdir, &compiled.placeholders)? {
        eprintln!(
            "claude-shim: created placeholder {} (protected, mounted read-only)",
            p.path.display()
        );
    }
    println!("{}", args.out.display());
    Ok(0)
}
