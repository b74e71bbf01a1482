//! The `__network watch` helper: one per container with networking. It starts
//! the mode's egress helper (pasta for public, the proxy for allowlist),
//! reports both pids to `create`, then watches: when the container's init
//! exits it stops the helper (pasta would otherwise hold the namespace
//! forever: it keeps its own reference), and when the helper dies while the
//! container runs it says so in <state>/network.log. Either way the sandbox
//! is left without egress, never with more of it.

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::SignalFd;
use serde_json::json;

use super::args::HelperOpts;
use super::log::Log;
use super::plan::Plan;
use super::policy::Mode;
use super::{netns, pasta, process};

/// The proxy, forked from this watch (which has no thread yet) rather than
/// exec'd: it inherits the namespace descriptors at 4 and 5 and drops its
/// privileges itself (proxy::run).
fn start_proxy(opts: &HelperOpts, ns: &netns::NsFds) -> Result<i32> {
    let (_, pid) = process::fork_helper(&ns.for_helper(), Duration::from_secs(10), false, || {
        super::proxy::run(opts)
    })
    .context("start the proxy")?;
    pid.ok_or_else(|| anyhow!("start the proxy: no child"))
}

/// The helper as started: the container's init it watches, the helper's
/// name and pid. Either helper is this watch's child (the proxy forked,
/// pasta's daemon reparented here: pasta::start), reaped with its status.
struct Started {
    init: OwnedFd,
    name: &'static str,
    pid: i32,
}

pub fn run(opts: &HelperOpts) -> Result<()> {
    let log = Log::open(&opts.state_dir.join("network.log"), &opts.id)?;
    let started = (|| -> Result<Started> {
        let init = process::open_verified(opts.init_pid, opts.init_start)
            .ok_or_else(|| anyhow!("find the init of container {} (pid {})", opts.id, opts.init_pid))?;
        let plan = Plan::load(&opts.state_dir)?;
        let ns = netns::NsFds::inherited(plan.join_user);
        match plan.mode {
            Mode::Public => {
                let p = pasta::start(&plan, &ns).context("start pasta")?;
                for line in &p.said {
                    log.write(json!({"event": "pasta says", "message": line}));
                }
                Ok(Started {
                    init,
                    name: "pasta",
                    pid: p.pid,
                })
            }
            Mode::Allowlist => {
                let pid = start_proxy(opts, &ns)?;
                Ok(Started {
                    init,
                    name: "proxy",
                    pid,
                })
            }
            Mode::None => bail!("mode none needs no helper"),
        }
    })();
    let Started { init, name, pid } = match started {
        Ok(s) => s,
        Err(e) => {
            let msg = format!("{e:#}");
            log.write(json!({"event": "failed", "error": msg}));
            process::report_ready(&format!("error {msg}"));
            return Ok(());
        }
    };
    let helper = match process::pidfd_open(pid) {
        Ok(fd) => fd,
        Err(e) => {
            let msg = format!("{name} (pid {pid}) is gone right after its start: {e}");
            log.write(json!({"event": "failed", "error": msg}));
            process::report_ready(&format!("error {msg}"));
            return Ok(());
        }
    };
    let mut mask = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        mask.add(s);
    }
    mask.thread_block().context("block signals")?;
    let sigfd = SignalFd::new(&mask).context("create a signalfd")?;
    log.write(json!({"event": "started", "helper": name, "pid": pid, "watch": std::process::id()}));
    process::report_ready(&format!("ok {} {name} {pid}", std::process::id()));
    process::shed_start_up_pages();

    loop {
        let mut fds = [
            PollFd::new(init.as_fd(), PollFlags::POLLIN),
            PollFd::new(helper.as_fd(), PollFlags::POLLIN),
            PollFd::new(sigfd.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e).context("poll"),
        }
        let ready = |i: usize| fds[i].any().unwrap_or(false);
        // The proxy also ends when the init does: then it is not a failure.
        if ready(1) && !ready(0) {
            let status = reap(pid);
            log.write(
                json!({"event": "helper exited", "helper": name, "pid": pid, "status": status,
                "detail": format!("{name} exited while the container runs: the sandbox has no egress")}),
            );
            return Ok(());
        }
        if ready(0) || ready(2) {
            let why = if ready(0) {
                "the container's init exited".to_owned()
            } else {
                match sigfd.read_signal() {
                    Ok(Some(s)) => format!("signal {}", s.ssi_signo),
                    _ => "a signal".to_owned(),
                }
            };
            process::terminate(&helper, Duration::from_secs(2));
            let _ = reap(pid);
            log.write(json!({"event": "stopped", "helper": name, "pid": pid, "reason": why}));
            return Ok(());
        }
    }
}

/// The exit status of the helper, our child.
fn reap(pid: i32) -> String {
    let mut raw = 0;
    // SAFETY: waits for our own child; `raw` is a plain int out-parameter.
    if unsafe { libc::waitpid(pid, &mut raw, 0) } < 0 {
        format!("unknown ({})", std::io::Error::last_os_error())
    } else {
        // std's wording, as when the proxy was a std::process::Child.
        std::process::ExitStatus::from_raw(raw).to_string()
    }
}
