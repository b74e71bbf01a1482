//! `run`: create, start and (unless --detach) wait, relay and delete.
//! `run BUNDLE/` is the standalone form: a path (it holds a `/`, which no
//! container id can) runs that bundle under a generated id.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use nix::sys::signal::Signal;

use crate::runtime::foreground::{self, ConsoleSocket};
use crate::runtime::{CreateRequest, Runtime};

pub fn generated_id(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("{prefix}-{}-{nanos:08x}", std::process::id())
}

/// Whether the bundle's process asks for a terminal (read before create, to
/// know whether claude-shim must hold the console socket itself).
pub fn wants_terminal(bundle: &Path) -> bool {
    crate::bounded::read(&bundle.join("config.json"), crate::bounded::SPEC_LIMIT)
        .ok()
        .and_then(|raw| serde_json::from_slice::<serde_json::Value>(&raw).ok())
        .and_then(|v| v["process"]["terminal"].as_bool())
        .unwrap_or(false)
}

pub fn run(rt: &Runtime, args: &crate::cli::Run) -> Result<i32> {
    let (id, bundle) = if args.target.contains('/') {
        (generated_id("run"), PathBuf::from(&args.target))
    } else {
        (
            args.target.clone(),
            args.bundle.clone().unwrap_or_else(|| PathBuf::from(".")),
        )
    };
    let opts = RunOptions {
        id: &id,
        bundle: &bundle,
        pid_file: args.pid_file.as_deref(),
        console_socket: args.console_socket.as_deref(),
        preserve_fds: args.preserve_fds,
        no_pivot: args.no_pivot,
        detach: args.detach,
        keep: args.keep,
        stdio: None,
    };
    run_bundle(rt, opts, &crate::admin::apply, &mut Some, None)
}

pub struct RunOptions<'a> {
    pub id: &'a str,
    pub bundle: &'a Path,
    pub pid_file: Option<&'a Path>,
    pub console_socket: Option<&'a Path>,
    pub preserve_fds: i32,
    pub no_pivot: bool,
    pub detach: bool,
    pub keep: bool,
    /// stdin, stdout, stderr for the container; None shares ours.
    pub stdio: Option<[std::os::fd::OwnedFd; 3]>,
}

/// The shared body of `run` and `sandbox`.
pub fn run_bundle(
    rt: &Runtime,
    o: RunOptions<'_>,
    adapt: crate::runtime::Adapt<'_>,
    on_signal: &mut dyn FnMut(Signal) -> Option<Signal>,
    grace: Option<std::time::Duration>,
) -> Result<i32> {
    let own_console = !o.detach && o.console_socket.is_none() && wants_terminal(o.bundle);
    let console = if own_console {
        let dir = rt.root.join(".claude-shim");
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        Some(ConsoleSocket::bind(&dir)?)
    } else {
        None
    };
    let req = CreateRequest {
        id: o.id,
        bundle: o.bundle,
        pid_file: o.pid_file,
        console_socket: console.as_ref().map(|c| c.path.as_path()).or(o.console_socket),
        preserve_fds: o.preserve_fds,
        no_pivot: o.no_pivot,
        stdio: o.stdio,
    };
    let container = rt.create(req, adapt)?;
    crate::timing::mark("created");
    let pid = container.pid().context("read the init pid of the new container")?;
    let signals = if o.detach {
        None
    } else {
        Some(foreground::block_signals()?)
    };
    let master = match &console {
        Some(c) => match c.receive() {
            Ok(m) => Some(m),
            Err(e) => {
                let _ = rt.delete(o.id, true);
                return Err(e);
            }
        },
        None => None,
    };
    drop(console);
    if let Err(e) = rt.start(o.id) {
        let _ = rt.delete(o.id, true);
        return Err(e);
    }
    crate::timing::mark("started");
    let Some(signals) = signals else {
        rt.hand_over()?;
        return Ok(0);
    };
    let fwd = foreground::Forwarding {
        map: on_signal,
        grace,
        pending: foreground::deferred_signal(),
    };
    let code = foreground::wait(pid, &signals, master, fwd);
    crate::timing::mark("process exited");
    if let Some(n) = rt.oom_kills(o.id) {
        tracing::warn!(
            "container {}: the kernel's OOM killer ended {n} of its processes (memory limit reached)",
            o.id
        );
    }
    if !o.keep {
        if let Err(e) = rt.delete(o.id, true) {
            tracing::warn!("{e:#}");
        }
        crate::timing::mark("deleted");
    }
    code
}
