//! The `__network watch` helper: one per container with networking helpers.
//! It starts the mode's egress helper (pasta for public, the proxy for
//! allowlist) and the forwarder of the published ports, if any, reports
//! their pids to `create`, then watches: when the container's init exits it
//! stops them (pasta would otherwise hold the namespace forever: it keeps
//! its own reference), and when one dies while the container runs it says
//! so in <state>/network.log. Either way the sandbox is left without
//! egress, never with more of it.

use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use serde_json::json;

use super::args::HelperOpts;
use super::log::Log;
use super::plan::Plan;
use super::policy::Mode;
use super::{netns, pasta, process, publish};

/// A helper forked from this watch (which has no thread yet) rather than
/// exec'd: it inherits the namespace descriptors at 4 and 5, then `extra`,
/// and drops its privileges itself. Its pid, as this watch's child.
fn fork(what: &str, ns: &netns::NsFds, extra: &[OwnedFd], body: impl FnOnce() -> Result<()>) -> Result<i32> {
    let mut fds = ns.for_helper();
    fds.extend(extra.iter());
    let (_, pid) = process::fork_helper(&fds, Duration::from_secs(10), false, body)
        .with_context(|| format!("start the {what}"))?;
    pid.ok_or_else(|| anyhow!("start the {what}: no child"))
}

/// One helper as started: its name, pid and a pidfd. Each is this watch's
/// child (the proxy and the forwarder forked, pasta's daemon reparented
/// here: pasta::start), reaped with its status.
struct Helper {
    name: &'static str,
    pid: i32,
    fd: OwnedFd,
}

/// Starts the helpers the plan asks for, the mode's first (pasta's start
/// finds its daemon as this watch's only child); on a failure, stops those
/// already started.
fn start(opts: &HelperOpts, log: &Log) -> Result<(OwnedFd, Vec<Helper>)> {
    let init = process::open_verified(opts.init_pid, opts.init_start)
        .ok_or_else(|| anyhow!("find the init of container {} (pid {})", opts.id, opts.init_pid))?;
    let plan = Plan::load(&opts.state_dir)?;
    let ns = netns::NsFds::inherited(plan.join_user);
    let first = publish::first_fd(plan.join_user);
    // SAFETY: `attach` handed the published ports' sockets over at these numbers.
    let published: Vec<OwnedFd> = (0..plan.publish.len())
        .map(|i| unsafe { OwnedFd::from_raw_fd(first + i as i32) })
        .collect();
    let mut started: Vec<(&'static str, i32)> = Vec::new();
    let result = (|| -> Result<()> {
        match plan.mode {
            Mode::Public => {
                let p = pasta::start(&plan, &ns).context("start pasta")?;
                for line in &p.said {
                    log.write(json!({"event": "pasta says", "message": line}));
                }
                started.push(("pasta", p.pid));
            }
            Mode::Allowlist => started.push(("proxy", fork("proxy", &ns, &[], || super::proxy::run(opts))?)),
            Mode::None => {}
        }
        if !published.is_empty() {
            let pid = fork("forwarder of the published ports", &ns, &published, || {
                publish::run(opts)
            })?;
            started.push(("publish", pid));
        }
        if started.is_empty() {
            bail!(
                "network mode {} with nothing published needs no helper",
                plan.mode.as_str()
            );
        }
        Ok(())
    })();
    // Only the forwarder serves them; a dead forwarder then refuses connections.
    drop(published);
    let mut helpers = Vec::new();
    let mut failure = result.err();
    for (name, pid) in started {
        match process::pidfd_open(pid) {
            Ok(fd) => helpers.push(Helper { name, pid, fd }),
            Err(e) => {
                failure.get_or_insert_with(|| anyhow!("{name} (pid {pid}) is gone right after its start: {e}"));
            }
        }
    }
    if let Some(e) = failure {
        for h in &helpers {
            process::terminate(&h.fd, Duration::from_secs(2));
            let _ = reap(h.pid);
        }
        return Err(e);
    }
    Ok((init, helpers))
}

pub fn run(opts: &HelperOpts) -> Result<()> {
    let log = Log::open(&opts.state_dir.join("network.log"), &opts.id)?;
    let (init, mut helpers) = match start(opts, &log) {
        Ok(s) => s,
        Err(e) => {
            let msg = format!("{e:#}");
            log.write(json!({"event": "failed", "error": msg}));
            process::report_ready(&format!("error {msg}"));
            return Ok(());
        }
    };
    let sigfd = process::end_signals()?;
    let mut ready = format!("ok {}", std::process::id());
    for h in &helpers {
        log.write(json!({"event": "started", "helper": h.name, "pid": h.pid, "watch": std::process::id()}));
        ready.push_str(&format!(" {} {}", h.name, h.pid));
    }
    process::report_ready(&ready);
    process::shed_start_up_pages();

    loop {
        let mut fds = vec![
            PollFd::new(init.as_fd(), PollFlags::POLLIN),
            PollFd::new(sigfd.as_fd(), PollFlags::POLLIN),
        ];
        fds.extend(helpers.iter().map(|h| PollFd::new(h.fd.as_fd(), PollFlags::POLLIN)));
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e).context("poll"),
        }
        let is_ready = |i: usize| fds[i].any().unwrap_or(false);
        let (init_ended, signalled) = (is_ready(0), is_ready(1));
        let exited: Vec<bool> = (0..helpers.len()).map(|i| is_ready(2 + i)).collect();
        drop(fds);
        if init_ended || signalled {
            let why = if init_ended {
                "the container's init exited".to_owned()
            } else {
                match sigfd.read_signal() {
                    Ok(Some(s)) => format!("signal {}", s.ssi_signo),
                    _ => "a signal".to_owned(),
                }
            };
            for h in &helpers {
                process::terminate(&h.fd, Duration::from_secs(2));
                let _ = reap(h.pid);
                log.write(json!({"event": "stopped", "helper": h.name, "pid": h.pid, "reason": why}));
            }
            return Ok(());
        }
        // A helper that ends while the init runs (the proxy also ends when
        // the init does, which is not a failure and is handled above).
        let mut i = 0;
        helpers.retain(|h| {
            let gone = exited[i];
            i += 1;
            if gone {
                let status = reap(h.pid);
                let detail = match h.name {
                    "publish" => "the published ports' forwarder exited: they refuse connections".to_owned(),
                    n => format!("{n} exited while the container runs: the sandbox has no egress"),
                };
                log.write(
                    json!({"event": "helper exited", "helper": h.name, "pid": h.pid, "status": status,
                    "detail": detail}),
                );
            }
            !gone
        });
        if helpers.is_empty() {
            return Ok(());
        }
    }
}

/// The exit status of a helper, our child.
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
