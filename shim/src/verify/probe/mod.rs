//! The probe: `claude-shim __probe --expect-json JSON` (or `--expect FILE`),
//! run as the sandbox's own process. It computes the plan from the
//! expectations, performs each check with direct syscalls (the rootfs may hold
//! nothing but busybox, or nothing at all), prints one `Outcome` per line on
//! stdout, and exits 0; the host judges the whole (`report`).

pub mod escape;
pub mod fds;
pub mod fs;
pub mod net;
pub mod proxy;
pub mod seccomp;
pub mod status;
pub mod sys;

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use anyhow::{bail, Context, Result};
use nix::errno::Errno;

use self::status::ProcStatus;
use super::expect::{errno_name, Expectations};
use super::outcome::{Finding, Outcome};
use super::plan::{plan, Check, Kind};
use super::syscalls;

/// `__probe`'s arguments (cli.rs holds the clap struct).
pub struct Args<'a> {
    pub expect: Option<&'a Path>,
    pub expect_json: Option<&'a str>,
    pub print_status: bool,
}

pub fn main(args: &Args<'_>) -> Result<i32> {
    if args.print_status {
        escape::print_status()?;
        return Ok(0);
    }
    fds::snapshot();
    let raw = match (args.expect, args.expect_json) {
        (Some(path), None) => {
            std::fs::read_to_string(path).with_context(|| format!("read expectations {}", path.display()))?
        }
        (None, Some(json)) => json.to_owned(),
        _ => bail!("run the probe: give exactly one of --expect FILE and --expect-json JSON"),
    };
    let exp = Expectations::from_json(&raw)?;
    let mut stdout = std::io::stdout().lock();
    for check in plan(&exp) {
        let found = run(&check);
        let outcome = Outcome {
            check: check.id,
            group: check.group.name().to_owned(),
            expected: check.expected,
            observed: found.observed,
            pass: found.pass,
            reason: found.reason,
        };
        // One line at a time: if a later check kills the probe, the host
        // still has every earlier result.
        writeln!(stdout, "{}", serde_json::to_string(&outcome)?).context("write a result")?;
        stdout.flush().context("write a result")?;
    }
    Ok(0)
}

pub fn run(check: &Check) -> Finding {
    match &check.kind {
        Kind::EnvEquals { name, value } => env_equals(name, value),
        Kind::EnvAbsent { name } => env_absent(name),
        Kind::EnvAllowed { names } => env_allowed(names),
        Kind::UserIds { uid, gid } => user_ids(*uid, *gid),
        Kind::Status { field, want } => match ProcStatus::read_self() {
            Ok(s) => match s.get(*field) {
                Some(v) => Finding::judge(v == *want, field.show(v)),
                None => Finding::fail(format!("no {} in /proc/self/status", field.key())),
            },
            Err(e) => Finding::fail(format!("cannot read /proc/self/status: {e}")),
        },
        Kind::NamespaceDiffers { kind, host_inode } => namespace_differs(kind, *host_inode),
        Kind::Hostname { name } => match nix::unistd::gethostname() {
            Ok(h) => {
                let h = h.to_string_lossy().into_owned();
                Finding::judge(&h == name, h)
            }
            Err(e) => Finding::fail(format!("gethostname: {}", errno_name(e))),
        },
        Kind::PidIsInit => {
            let pid = std::process::id();
            Finding::judge(pid == 1, format!("pid {pid}"))
        }
        Kind::HostPidsInvisible { pids } => host_pids_invisible(pids),
        Kind::Session { caller_sid } => session(*caller_sid),
        Kind::Tiocsti { fd, host_pts_dev } => tiocsti(*fd, *host_pts_dev),
        Kind::Hidden { path } => fs::hidden(path),
        Kind::ReadOnly { path, refused_with } => fs::read_only(path, refused_with),
        Kind::Writable { path } => fs::writable(path),
        Kind::Pinned { path } => fs::pinned(path),
        Kind::UnixSocket { path } => fs::unix_socket(path),
        Kind::EmptyHome { path, kept } => fs::empty_home(path, kept),
        Kind::AbstractSocket { name } => fs::abstract_socket(name),
        Kind::NestedUserns { protected_file } => escape::nested_userns(protected_file),
        Kind::CgroupReleaseAgent => escape::cgroup_release_agent(),
        Kind::ExecGainsNothing => escape::exec_gains_nothing(),
        Kind::InheritedFds => fds::inherited(),
        Kind::Syscall { probe, expect } => match syscalls::find(probe) {
            Some(p) => seccomp::run(p, expect),
            None => Finding::fail(format!("this probe has no syscall probe {probe:?}")),
        },
        Kind::Network { mode } => net::interfaces(mode),
        Kind::NetlinkAddress => net::netlink_address(),
        Kind::NftablesDelete => net::nftables_delete(),
        Kind::Direct { addr, refused_with } => net::direct(addr, refused_with),
        Kind::Proxy { listener, request } => proxy::proxy(listener, request),
    }
}

fn env_equals(name: &str, value: &str) -> Finding {
    match std::env::var_os(name) {
        Some(v) if v == value => Finding::pass(format!("{name}={value}")),
        // Never show a value that is not the expected one: it may be a secret.
        Some(v) => Finding::fail(format!("{name} holds another value ({} bytes)", v.len())),
        None => Finding::fail(format!("{name} is not set")),
    }
}

fn env_absent(name: &str) -> Finding {
    match std::env::var_os(name) {
        None => Finding::pass("absent"),
        Some(v) => Finding::fail(format!("set ({} bytes)", v.len())),
    }
}

fn env_allowed(allowed: &[String]) -> Finding {
    let mut extra: Vec<String> = std::env::vars_os()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .filter(|k| !allowed.contains(k))
        .collect();
    extra.sort();
    let n = std::env::vars_os().count();
    if extra.is_empty() {
        Finding::pass(format!("{n} variables, all allowed"))
    } else {
        Finding::fail(format!("not allowed: {}", extra.join(", ")))
    }
}

fn user_ids(uid: u32, gid: u32) -> Finding {
    use nix::unistd::{getegid, geteuid, getgid, getuid};
    let (r, e, g, eg) = (
        getuid().as_raw(),
        geteuid().as_raw(),
        getgid().as_raw(),
        getegid().as_raw(),
    );
    Finding::judge(
        r == uid && e == uid && g == gid && eg == gid,
        format!("uid {r} euid {e} gid {g} egid {eg}"),
    )
}

fn namespace_differs(kind: &str, host_inode: u64) -> Finding {
    let path = Path::new("/proc/self/ns").join(kind);
    match super::namespace_inode(&path) {
        Some(inode) if inode != host_inode => Finding::pass(format!("{kind}:[{inode}]")),
        Some(inode) => Finding::fail(format!("{kind}:[{inode}], the host's")),
        None => Finding::fail(format!("cannot read {}", path.display())),
    }
}

fn host_pids_invisible(pids: &[i32]) -> Finding {
    let mut visible = Vec::new();
    for &pid in pids {
        match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
            Err(Errno::ESRCH) => {}
            Ok(()) => visible.push(format!("{pid} (signalable)")),
            Err(e) => visible.push(format!("{pid} ({})", errno_name(e))),
        }
    }
    let list: Vec<String> = pids.iter().map(i32::to_string).collect();
    if visible.is_empty() {
        Finding::pass(format!("ESRCH for {}", list.join(", ")))
    } else {
        Finding::fail(format!("visible: {}", visible.join(", ")))
    }
}

/// In a pid namespace, getsid gives 0 when the session leader lives outside
/// it: the sandbox then shares a session with a host process.
fn session(caller_sid: i32) -> Finding {
    match nix::unistd::getsid(None) {
        Ok(sid) if sid.as_raw() == 0 => Finding::fail("session led by a process outside the sandbox"),
        Ok(sid) if sid.as_raw() == caller_sid => Finding::fail(format!("session {sid}, the caller's")),
        Ok(sid) => Finding::pass(format!("session {sid}")),
        Err(e) => Finding::fail(format!("getsid: {}", errno_name(e))),
    }
}

/// A pty of the sandbox's own devpts instance (newinstance), not the host's:
/// input pushed into it only reaches processes inside the sandbox.
fn own_pty(fd: i32, host_pts_dev: Option<u64>) -> bool {
    let Ok(pts) = std::fs::metadata("/dev/pts") else {
        return false;
    };
    let Ok(meta) = std::fs::metadata(format!("/proc/self/fd/{fd}")) else {
        return false;
    };
    meta.dev() == pts.dev() && Some(pts.dev()) != host_pts_dev
}

fn tiocsti(fd: i32, host_pts_dev: Option<u64>) -> Finding {
    // SAFETY: isatty only inspects the descriptor.
    if unsafe { libc::isatty(fd) } != 1 {
        let what = std::fs::read_link(format!("/proc/self/fd/{fd}"))
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "closed".to_owned());
        return Finding::not_applicable(format!("not a terminal: {what}"), format!("no terminal on fd {fd}"));
    }
    match sys::tiocsti_null(fd) {
        Err(e @ (Errno::EPERM | Errno::EIO)) => Finding::pass(format!("refused: {}", errno_name(e))),
        Err(Errno::EFAULT) if own_pty(fd, host_pts_dev) => Finding::pass("permitted on the sandbox's own pty"),
        Err(Errno::EFAULT) => Finding::fail("permitted: input can be pushed into a terminal outside the sandbox"),
        Err(e) => Finding::fail(format!("unexpected: {}", errno_name(e))),
        Ok(_) => Finding::fail("permitted (the call took a NULL character)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_values_are_never_shown() {
        // SAFETY: tests of this module are the only ones touching this variable.
        unsafe { std::env::set_var("CLAUDE_SHIM_PROBE_UNIT_TOKEN", "hunter2") };
        let f = env_absent("CLAUDE_SHIM_PROBE_UNIT_TOKEN");
        assert_eq!(f.pass, Some(false));
        assert!(!f.observed.contains("hunter2"));
        let f = env_equals("CLAUDE_SHIM_PROBE_UNIT_TOKEN", "1");
        assert_eq!(f.pass, Some(false));
        assert!(!f.observed.contains("hunter2"));
        assert_eq!(env_equals("CLAUDE_SHIM_PROBE_UNIT_TOKEN", "hunter2").pass, Some(true));
        let f = env_allowed(&["PATH".to_owned()]);
        assert!(f.observed.contains("CLAUDE_SHIM_PROBE_UNIT_TOKEN") && !f.observed.contains("hunter2"));
    }

    /// In a child without capabilities, in a session of its own whose
    /// controlling terminal is a new pty of the host's devpts, or in one
    /// without a terminal.
    fn tiocsti_in_session(controlling: bool) -> Option<bool> {
        let host_pts = std::fs::metadata("/dev/pts").unwrap().dev();
        let r = sys::ret_in_child(|| {
            let pty = nix::pty::openpty(None, None).map_err(|_| Errno::EIO)?;
            nix::unistd::setsid()?;
            // As in the sandbox: CAP_SYS_ADMIN would permit TIOCSTI anywhere.
            sys::drop_capabilities()?;
            if controlling {
                // SAFETY: ioctl on a descriptor this child owns, integer argument.
                if unsafe { libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&pty.slave), libc::TIOCSCTTY, 0) } != 0 {
                    return Err(Errno::last());
                }
            }
            let fd = std::os::fd::AsRawFd::as_raw_fd(&pty.slave);
            let r = match tiocsti(fd, Some(host_pts)).pass {
                Some(true) => 1,
                Some(false) => 0,
                None => 2,
            };
            // Closing the master would hang up this session (SIGHUP) before
            // the result is out; the child's exit closes it.
            std::mem::forget(pty);
            Ok(r)
        });
        match r {
            Ok(Ok(1)) => Some(true),
            Ok(Ok(0)) => Some(false),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tiocsti_on_a_controlling_terminal_outside_fails() {
        assert_eq!(tiocsti_in_session(true), Some(false));
        assert_eq!(tiocsti_in_session(false), Some(true));
    }

    #[test]
    fn the_host_is_not_a_sandbox() {
        // On the host, everything the probe looks at is the host's own.
        let own = super::super::namespace_inode(Path::new("/proc/self/ns/pid")).unwrap();
        assert_eq!(namespace_differs("pid", own).pass, Some(false));
        assert_eq!(namespace_differs("pid", own + 1).pass, Some(true));
        let me = std::process::id() as i32;
        assert_eq!(host_pids_invisible(&[me]).pass, Some(false));
        let sid = nix::unistd::getsid(None).unwrap().as_raw();
        assert_eq!(session(sid).pass, Some(false));
    }
}
