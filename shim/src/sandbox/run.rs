//! One sandbox run, in the order it happens: the workspace opened (before
//! compiling: compiling decides what exists), the policy compiled, the
//! workspace prepared, the bundle written, the container created and waited
//! for, its refusals reported, the container deleted, the workspace settled
//! and released, the bundle removed. `sandbox`, `claude` (the whole agent)
//! and each per-call sandbox of `claude --per-command` run through here.

use std::borrow::Cow;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use claude_shim_bundle::policy::values::Workspace as WorkspaceKind;
use claude_shim_bundle::{Compiled, Invocation, Policy};

use crate::commands::run::{run_bundle, RunOptions};
use crate::runtime::{foreground, Runtime};
use crate::sandbox;
use crate::sandbox::workspace::live::Live;
use crate::sandbox::workspace::review::Review;
use crate::sandbox::workspace::Workspace;

/// How long a command has to exit after Ctrl-C or SIGTERM before it is killed.
const GRACE: Duration = Duration::from_secs(2);

/// One run: its container id, and a line for the user printed once the
/// sandbox is about to start (not before an early failure, whose error is
/// then the only line).
pub struct Run<'a> {
    pub id: &'a str,
    pub announce: Option<&'a str>,
    pub policy: &'a Policy,
    pub inv: &'a Invocation,
}

/// Compiles the run's policy, lets `edit` adjust the compiled spec, runs it
/// to the end and removes everything made for it. Returns the exit code.
/// The caller has called `foreground::defer_termination`.
pub fn run(rt: &Runtime, r: &Run<'_>, edit: &mut dyn FnMut(&mut Compiled) -> Result<()>) -> Result<i32> {
    let policy = with_admin_workspace(r.policy)?;
    let r = &Run { policy: &policy, ..*r };
    let ours = rt.root.join(".claude-shim");
    std::fs::create_dir_all(&ours).with_context(|| format!("create state directory {}", ours.display()))?;
    let bundle = ours.join(format!("{}.bundle", r.id));
    let mut workspace = open_workspace(r, &ours)?;
    let result = (|| {
        let mut compiled = sandbox::compile_policy(r.policy, r.inv, Some(&ours))?;
        edit(&mut compiled)?;
        sandbox::share_skeleton(&mut compiled, &ours)?;
        crate::timing::mark("policy compiled");
        workspace.prepare(&mut compiled)?;
        sandbox::write(&bundle, &compiled, false, true)?;
        crate::timing::mark("bundle written");
        if let Some(line) = r.announce {
            eprintln!("{}", crate::terminal::escaped(line));
        }
        let opts = RunOptions {
            id: r.id,
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
    let created = rt.exists(r.id);
    if created {
        sandbox::denials::report(&rt.meta_dir(r.id), r.id);
        crate::timing::mark("denials reported");
        if let Err(e) = rt.delete(r.id, true) {
            tracing::warn!("{e:#}");
        }
        crate::timing::mark("deleted");
    }
    let settled = workspace.settle(created);
    workspace.release();
    remove_bundle(&bundle);
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
    settled?;
    // A termination signal that arrived while the sandbox was being set up
    // ends the run as it would have ended the command.
    match foreground::deferred_signal() {
        Some(sig) if code == 0 => Ok(128 + sig as i32),
        _ => Ok(code),
    }
}

/// The workspace the run's policy asks for, opened before compiling.
fn open_workspace(r: &Run<'_>, ours: &Path) -> Result<Box<dyn Workspace>> {
    Ok(match r.policy.filesystem.workspace {
        WorkspaceKind::Live => Box::new(Live::open(r.policy, r.inv, ours, r.id)?),
        WorkspaceKind::Review => Box::new(Review::open(r.inv, r.id)?),
    })
}

/// `policy`, with the review workspace where the admin policy
/// (/etc/claude-shim/policy.toml) asks for it: a run cannot loosen it.
pub fn with_admin_workspace(policy: &Policy) -> Result<Cow<'_, Policy>> {
    if policy.filesystem.workspace == WorkspaceKind::Review {
        return Ok(Cow::Borrowed(policy));
    }
    match crate::admin::load()? {
        Some(a) if a.policy.filesystem.workspace == WorkspaceKind::Review => {
            let mut p = policy.clone();
            p.filesystem.workspace = WorkspaceKind::Review;
            tracing::debug!(
                "the admin policy {} keeps every run's writes for review",
                a.path.display()
            );
            Ok(Cow::Owned(p))
        }
        _ => Ok(Cow::Borrowed(policy)),
    }
}

/// A run that failed before writing its bundle left nothing to remove.
fn remove_bundle(bundle: &Path) {
    match std::fs::remove_dir_all(bundle) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            tracing::warn!("remove bundle {}: {e}", bundle.display())
        }
        _ => {}
    }
    crate::timing::mark("bundle removed");
}
