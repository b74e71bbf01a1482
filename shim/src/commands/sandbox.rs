//! `sandbox` (one command in a sandbox compiled from a policy, everything
//! removed afterwards) and `bundle` (the same sandbox written out as an OCI
//! bundle that claude-shim or runc can run).

use std::os::fd::AsRawFd;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::commands::run::{generated_id, run_bundle, RunOptions};
use crate::runtime::{foreground, Runtime};
use crate::sandbox;
use crate::sandbox::lease::Lease;
use crate::sandbox::quarantine::Watch;

/// How long a command has to exit after Ctrl-C or SIGTERM before it is killed.
const GRACE: Duration = Duration::from_secs(2);

fn is_tty(fd: i32) -> bool {
    nix::unistd::isatty(fd).unwrap_or(false)
}

pub fn sandbox(rt: &Runtime, args: &crate::cli::Sandbox) -> Result<i32> {
    // A Ctrl-C from here on is handled, not fatal: nothing may be left behind.
    foreground::defer_termination()?;
    let policy = sandbox::load_policy(args.policy.as_deref())?;
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
/// it to the end and removes everything made for it. Returns the exit code.
/// The caller has called `foreground::defer_termination`.
pub fn run_policy(
    rt: &Runtime,
    policy: &claude_shim_bundle::Policy,
    inv: &claude_shim_bundle::Invocation,
    edit: &mut dyn FnMut(&mut claude_shim_bundle::Compiled) -> Result<()>,
) -> Result<i32> {
    run_policy_as(rt, &generated_id("sandbox"), None, policy, inv, edit)
}

/// `run_policy` with the container id chosen by the caller, and a line for
/// the user printed once the sandbox is about to start (not before an
/// early failure, whose error is then the only line).
pub fn run_policy_as(
    rt: &Runtime,
    id: &str,
    announce: Option<&str>,
    policy: &claude_shim_bundle::Policy,
    inv: &claude_shim_bundle::Invocation,
    edit: &mut dyn FnMut(&mut claude_shim_bundle::Compiled) -> Result<()>,
) -> Result<i32> {
    let id = id.to_owned();
    let ours = rt.root.join(".claude-shim");
    std::fs::create_dir_all(&ours).with_context(|| format!("create state directory {}", ours.display()))?;
    let bundle = ours.join(format!("{id}.bundle"));
    // Taken before compiling: another sandbox on this directory must not
    // remove a placeholder this one is about to mount.
    let mut lease = Lease::acquire(&ours, &inv.workdir)?;
    let mut watch = None;
    let result = (|| {
        let mut compiled = sandbox::compile_policy(policy, inv, Some(&ours))?;
        edit(&mut compiled)?;
        watch = Watch::start(&inv.workdir, &compiled, policy.filesystem.after_effects, &id)?;
        sandbox::share_skeleton(&mut compiled, &ours)?;
        crate::timing::mark("policy compiled");
        lease.create(&compiled.placeholders)?;
        lease.share()?;
        sandbox::write(&bundle, &compiled, false, true)?;
        crate::timing::mark("bundle written");
        if let Some(line) = announce {
            eprintln!("{}", crate::terminal::escaped(line));
        }
        let opts = RunOptions {
            id: &id,
            bundle: &bundle,
            pid_file: None,
            console_socket: None,
            preserve_fds: 0,
            no_pivot: false,
            detach: false,
            // Deleted below, once its proxy log has been read.
            keep: true,
            stdio: None,
        };
        run_bundle(rt, opts, &crate::admin::apply, &mut Some, Some(GRACE))
    })();
    if rt.exists(&id) {
        sandbox::denials::report(&rt.meta_dir(&id), &id);
        crate::timing::mark("denials reported");
        if let Err(e) = rt.delete(&id, true) {
            tracing::warn!("{e:#}");
        }
        crate::timing::mark("deleted");
    }
    // What the run left that the host would run, before the placeholders
    // go: they are told apart by the lease's record.
    if let Some(w) = watch {
        let host = sandbox::host::StdHost {
            index_dir: Some(ours.clone()),
        };
        w.finish(&host, &lease.placeholders()).print();
        crate::timing::mark("after-effects looked for");
    }
    lease.release();
    crate::timing::mark("placeholders released");
    // A run that failed before writing its bundle left nothing to remove.
    match std::fs::remove_dir_all(&bundle) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            tracing::warn!("remove bundle {}: {e}", bundle.display())
        }
        _ => {}
    }
    crate::timing::mark("bundle removed");
    // What earlier sandboxes (or other runs) left when they were killed; on
    // the way out, so it costs the command's start nothing.
    let collected = crate::commands::gc::collect(rt);
    for r in &collected.removed {
        tracing::debug!("gc: removed {r}");
    }
    for f in &collected.failed {
        tracing::warn!("gc: {f}");
    }
    let code = result?;
    // A termination signal that arrived while the sandbox was being set up
    // ends the run as it would have ended the command.
    match foreground::deferred_signal() {
        Some(sig) if code == 0 => Ok(128 + sig as i32),
        _ => Ok(code),
    }
}

pub fn bundle(args: &crate::cli::BundleArgs) -> Result<i32> {
    let policy = sandbox::load_policy(args.policy.as_deref())?;
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
