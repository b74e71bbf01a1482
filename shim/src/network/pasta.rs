//! Starting pasta for public mode, below the watch that runs it: its flags,
//! its start, and what it says while it starts. pasta is handed no path to
//! write: Debian's AppArmor profile for passt (/etc/apparmor.d/usr.bin.passt,
//! enforcing by default) lets it create files only under /tmp and $HOME, and
//! pasta opens its pid and log files with O_CREAT. A file in the state
//! directory is refused outright; even `/proc/self/fd/N` naming a pipe gets
//! its create check denied and audited at each start (the open itself goes
//! through: the name exists), as the VM lane saw. So its pid comes from the
//! kernel (the watch is its subreaper), its start-up errors through a stderr
//! pipe, and its later messages go to the system log, pasta's own default.
//! Its namespaces are descriptors (`/proc/self/fd/N`, opened without
//! O_CREAT; nsfs is not mediated by path). Nothing lands where the sandbox
//! could reach it.

use std::ffi::OsString;
use std::fs::File;
use std::io::{ErrorKind, Read};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use anyhow::{anyhow, bail, Context, Result};
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use super::plan::Plan;
use super::{netns, process};

/// Where pasta finds the namespaces we hand it.
const NET_FD: i32 = 3;
const USER_FD: i32 = 4;

/// A running pasta: its pid (it forked into the background and is now the
/// watch's child) and what it said while it started.
pub struct Pasta {
    pub pid: i32,
    pub said: Vec<String>,
}

/// pasta's flags: nothing of the host is exposed. No port forwarding either
/// way (`-t/-u/-T/-U none`: the defaults forward every port bound on the
/// host's loopback), and the gateway address is not mapped to the host
/// (`--no-map-gw`). As root this pasta version drops to nobody and then
/// cannot join the namespace, so it stays root (`--runas 0`, NOTES.md).
fn args(join_user: bool) -> Vec<OsString> {
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
    // pasta opens the namespace after dropping capabilities, when it may no
    // longer open /proc/<init>/ns/*; it reopens the descriptors we hand it.
    if join_user {
        args.extend(["--userns".into(), format!("/proc/self/fd/{USER_FD}").into()]);
    }
    args.extend(["--netns".into(), format!("/proc/self/fd/{NET_FD}").into()]);
    args
}

fn nonblocking_pipe() -> Result<(File, OwnedFd)> {
    let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).context("create a pipe")?;
    fcntl(r.as_raw_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).context("make a pipe non-blocking")?;
    Ok((File::from(r), w))
}

/// Appends what is in the pipe now, without waiting.
fn drain(r: &mut File, into: &mut Vec<u8>) {
    let mut buf = [0u8; 4096];
    loop {
        match r.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => into.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// The pasta daemon, once its foreground part has exited: the one child this
/// watch has then (its subreaper, and single-threaded, so the children of
/// its one thread are all of them). Read from the kernel, not from a file:
/// it stays right whatever happens to the state directory meanwhile (a
/// `delete --force` after a killed create removes it).
fn daemon_pid() -> Result<i32> {
    match process::children().as_slice() {
        [one] => Ok(*one),
        [] => bail!("pasta left no process in the background"),
        many => bail!(
            "find pasta's process: {} children, one expected ({})",
            many.len(),
            many.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(" ")
        ),
    }
}

/// Starts pasta on the container's namespace and returns once its
/// foreground part has exited, that is once the namespace is configured.
pub fn start(plan: &Plan, ns: &netns::NsFds) -> Result<Pasta> {
    let pasta = plan
        .pasta
        .as_ref()
        .ok_or_else(|| anyhow!("public mode without a pasta path"))?;
    let (mut err_r, err_w) = nonblocking_pipe()?;
    // Its daemon is reparented here when its foreground part exits.
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error()).context("become pasta's subreaper");
    }
    let net = ns.net.as_raw_fd();
    let user = ns.user.as_ref().map(AsRawFd::as_raw_fd).unwrap_or(-1);
    let mut cmd = Command::new(pasta);
    cmd.args(args(plan.join_user))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        // Its daemon points its stdio at /dev/null: what comes here is from its start.
        .stderr(err_w);
    // SAFETY: only fcntl/dup2/close_range and signal resets between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            process::reset_signals();
            // Copied above both targets first, so that no dup2 overwrites a source.
            let n = libc::fcntl(net, libc::F_DUPFD_CLOEXEC, 100);
            let u = if user >= 0 {
                libc::fcntl(user, libc::F_DUPFD_CLOEXEC, 100)
            } else {
                -1
            };
            if n < 0 || libc::dup2(n, NET_FD) < 0 || (u >= 0 && libc::dup2(u, USER_FD) < 0) {
                return Err(std::io::Error::last_os_error());
            }
            libc::close_range(if u >= 0 { USER_FD + 1 } else { NET_FD + 1 } as u32, u32::MAX, 0);
            Ok(())
        });
    }
    let mut child = cmd.spawn().with_context(|| format!("execute {}", pasta.display()))?;
    // Dropped with `cmd`'s stderr: only pasta holds the write end now.
    drop(cmd);
    // Drained while pasta starts, so that it never blocks on a full pipe;
    // never read to its end, which a stray holder of the write end could delay.
    let mut said = Vec::new();
    let status = loop {
        drain(&mut err_r, &mut said);
        if let Some(status) = child.try_wait().context("wait for pasta")? {
            break status;
        }
        let mut fds = [PollFd::new(err_r.as_fd(), PollFlags::POLLIN)];
        let _ = poll(&mut fds, PollTimeout::from(5u16));
    };
    drain(&mut err_r, &mut said);
    let said = messages(&String::from_utf8_lossy(&said));
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
    Ok(Pasta {
        pid: daemon_pid()?,
        said,
    })
}

/// pasta's lines as a user reads them: once each, without its complaint
/// that there is no syslog (it tries the system log before stderr).
pub fn messages(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        let no_syslog = l.starts_with("Failed to send ") && l.ends_with(" bytes to syslog");
        if !l.is_empty() && !no_syslog && !out.iter().any(|o| o == l) {
            out.push(l.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What pasta 0.0~git20230309 (Debian's) printed here on stderr when
    /// `--netns` named no namespace and there was no /dev/log.
    #[test]
    fn messages_drop_the_missing_syslog() {
        let text = "Failed to send 42 bytes to syslog\nCouldn't switch to pasta namespaces\n";
        assert_eq!(messages(text), ["Couldn't switch to pasta namespaces"]);
    }

    #[test]
    fn messages_keep_each_line_once() {
        assert_eq!(messages("a: b\n\na: b\nc\n"), ["a: b", "c"]);
    }

    #[test]
    fn pasta_gets_no_path_to_write_and_its_namespaces_as_descriptors() {
        let a: Vec<String> = args(true).iter().map(|s| s.to_string_lossy().into_owned()).collect();
        let after = |flag: &str| a.iter().position(|x| x == flag).map(|i| a[i + 1].clone());
        assert_eq!(after("--netns").as_deref(), Some("/proc/self/fd/3"));
        assert_eq!(after("--userns").as_deref(), Some("/proc/self/fd/4"));
        for flag in ["-l", "--log-file", "-P", "--pid", "-p", "--pcap"] {
            assert!(!a.iter().any(|x| x == flag), "{flag} in {a:?}");
        }
    }
}
