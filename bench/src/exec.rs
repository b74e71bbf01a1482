//! Running a case's command: the runtime's command with its hooks (the
//! network namespace, bwrap's seccomp filter on fd 3), failing with the
//! runtime's own error; and the fresh namespace with pasta attached that the
//! network cases run in.

use std::fs;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use anyhow::{bail, Context, Result};

use crate::case::Ctx;
use crate::net::{NetNs, Pasta};
use crate::proc::{Finished, Hooks};
use crate::runtimes::{Launch, Runtime};

pub(crate) fn run_ok(ctx: &Ctx, rt: &Runtime, cmd: Command, hooks: &Hooks, id: &str) -> Result<Finished> {
    let f = ctx.runner.run(cmd, hooks, ctx.timeout)?;
    if !f.status.success() {
        rt.cleanup(id, hooks.netns.as_ref());
        bail!("{}: {}", rt.name, f.why());
    }
    Ok(f)
}

pub(crate) fn hooks_for(rt: &Runtime, launch: &Launch, netns: Option<&NetNs>) -> Result<Hooks> {
    let mut h = rt.hooks();
    if let Some(ns) = netns {
        h.netns = Some(ns.fd.clone());
    }
    if let Launch::Argv { bpf: Some(p), .. } = launch {
        let f = fs::File::open(p).with_context(|| format!("open {}", p.display()))?;
        h.fd3 = Some(Arc::new(OwnedFd::from(f)));
    }
    Ok(h)
}

pub(crate) fn exec(ctx: &Ctx, rt: &Runtime, launch: &Launch, id: &str, netns: Option<&NetNs>) -> Result<Finished> {
    let hooks = hooks_for(rt, launch, netns)?;
    run_ok(ctx, rt, rt.run_command(launch, id, &ctx.bwrap_flags), &hooks, id)
}

/// Runs `f` in a fresh namespace with pasta attached; returns f's result and pasta's pid.
pub(crate) fn with_pasta<T>(
    ctx: &Ctx,
    ns_path: &Path,
    tcp_in: Option<u16>,
    f: impl FnOnce(&NetNs) -> Result<T>,
) -> Result<(T, i32)> {
    let pasta_bin = ctx.pasta.as_deref().context("find pasta (apt-get install passt)")?;
    let ns = NetNs::create(ns_path)?;
    let pid_file = ns_path.with_extension("pasta.pid");
    let pasta = match Pasta::attach(&ctx.runner, pasta_bin, &ns.path, &pid_file, tcp_in) {
        Ok(p) => p,
        Err(e) => {
            ns.destroy();
            return Err(e);
        }
    };
    let r = f(&ns);
    pasta.stop();
    ns.destroy();
    r.map(|v| (v, pasta.pid))
}
