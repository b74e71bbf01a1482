//! The `__network watch` helper: one per container with networking. It starts
//! the mode's egress helper (pasta for public, the proxy for allowlist),
//! reports both pids to `create`, then watches: when the container's init
//! exits it stops the helper (pasta would otherwise hold the namespace
//! forever: it keeps its own reference), and when the helper dies while the
//! container runs it says so in <state>/network.log. Either way the sandbox
//! is left without egress, never with more of it.

use std::ffi::OsString;
use std::fs;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
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
use super::{netns, process};

/// pasta's flags: nothing of the host is exposed. No port forwarding either
/// way (`-t/-u/-T/-U none`: the defaults forward every port bound on the
/// host's loopback), and the gateway address is not mapped to the host
/// (`--no-map-gw`). As root this pasta version drops to nobody and then
/// cannot join the namespace, so it stays root (`--runas 0`, NOTES.md).
fn pasta_args(plan: &Plan, opts: &HelperOpts) -> Vec<OsString> {
    let mut args: Vec<OsString> = [
        "--config-net",
        "-q",
        "-t",
        "none",
        "-u",
        "none",
        "-T",
        "none",
        "-U",
        "none",
        "--no-map-gw",
        // The tap is eth0, as in every other container, whatever the host's interface is called.
        "-I",
        "eth0",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    if nix::unistd::geteuid().is_root() {
        args.extend(["--runas", "0"].map(OsString::from));
    }
    args.push("-l".into());
    args.push(opts.state_dir.join("pasta.log").into());
    args.push("-P".into());
    args.push(opts.state_dir.join("pasta.pid").into());
    // pasta opens the namespace after dropping capabilities, when it may no
    // longer open /proc/<init>/ns/*; it reopens the descriptors we hand it.
    if plan.join_user {
        args.extend(["--userns", "/proc/self/fd/4"].map(OsString::from));
    }
    args.extend(["--netns", "/proc/self/fd/3"].map(OsString::from));
    args
}

/// Starts pasta on the container's namespace; returns its pid (it forks into
/// the background once the namespace is configured).
fn start_pasta(plan: &Plan, opts: &HelperOpts, ns: &netns::NsFds) -> Result<i32> {
    let pasta = plan
        .pasta
        .as_ref()
        .ok_or_else(|| anyhow!("public mode without a pasta path"))?;
    let pid_file = opts.state_dir.join("pasta.pid");
    // Made empty here and read back through this descriptor: pasta writes
    // its pid into this inode, which stays readable if a `delete --force`
    // (after a killed create) removes the state directory while pasta starts.
    let mut pid_in = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&pid_file)
        .with_context(|| format!("create {}", pid_file.display()))?;
    let net = std::os::fd::AsRawFd::as_raw_fd(&ns.net);
    let user = ns.user.as_ref().map(std::os::fd::AsRawFd::as_raw_fd).unwrap_or(-1);
    let mut cmd = Command::new(pasta);
    cmd.args(pasta_args(plan, opts))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: only dup2/close_range and signal resets between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            process::reset_signals();
            let n = libc::fcntl(net, libc::F_DUPFD_CLOEXEC, 100);
            let u = if user >= 0 {
                libc::fcntl(user, libc::F_DUPFD_CLOEXEC, 100)
            } else {
                -1
            };
            if n < 0 || libc::dup2(n, 3) < 0 || (u >= 0 && libc::dup2(u, 4) < 0) {
                return Err(std::io::Error::last_os_error());
            }
            libc::close_range(if u >= 0 { 5 } else { 4 }, u32::MAX, 0);
            Ok(())
        });
    }
    let status = cmd.status().with_context(|| format!("execute {}", pasta.display()))?;
    let log = fs::read_to_string(opts.state_dir.join("pasta.log")).unwrap_or_default();
    // The first line only names the version.
    let said: Vec<&str> = log.lines().skip(1).map(str::trim).filter(|l| !l.is_empty()).collect();
    if !status.success() {
        bail!(
            "{} exited with {}{}",
            pasta.display(),
            status,
            if said.is_empty() {
                String::new()
            } else {
                format!(": {}", said.join("; "))
            }
        );
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut pid_in, &mut text).with_context(|| format!("read {}", pid_file.display()))?;
    text.trim()
        .parse()
        .map_err(|_| anyhow!("read {}: {:?} is not a pid", pid_file.display(), text.trim()))
}

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

pub fn run(opts: &HelperOpts) -> Result<()> {
    let log = Log::open(&opts.state_dir.join("network.log"), &opts.id)?;
    let started = (|| -> Result<(OwnedFd, &'static str, i32, Option<i32>)> {
        let init = process::open_verified(opts.init_pid, opts.init_start)
            .ok_or_else(|| anyhow!("find the init of container {} (pid {})", opts.id, opts.init_pid))?;
        let plan = Plan::load(&opts.state_dir)?;
        let ns = netns::NsFds::inherited(plan.join_user);
        match plan.mode {
            Mode::Public => Ok((
                init,
                "pasta",
                start_pasta(&plan, opts, &ns).context("start pasta")?,
                None,
            )),
            Mode::Allowlist => {
                let pid = start_proxy(opts, &ns)?;
                Ok((init, "proxy", pid, Some(pid)))
            }
            Mode::None => bail!("mode none needs no helper"),
        }
    })();
    let (init, name, pid, child) = match started {
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
            let status = reap(child);
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
            let _ = reap(child);
            log.write(json!({"event": "stopped", "helper": name, "pid": pid, "reason": why}));
            return Ok(());
        }
    }
}

/// The exit status of a helper that is our child; pasta (which forks into the
/// background) is not, and only its pidfd tells that it ended.
fn reap(child: Option<i32>) -> String {
    match child {
        Some(pid) => {
            let mut raw = 0;
            // SAFETY: waits for our own child; `raw` is a plain int out-parameter.
            if unsafe { libc::waitpid(pid, &mut raw, 0) } < 0 {
                format!("unknown ({})", std::io::Error::last_os_error())
            } else {
                // std's wording, as when the proxy was a std::process::Child.
                std::process::ExitStatus::from_raw(raw).to_string()
            }
        }
        None => "unknown (not a child)".into(),
    }
}
