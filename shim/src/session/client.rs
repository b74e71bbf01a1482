//! `claude-shim-shell CMD` in a session: the call is handed to the session
//! sandbox's spawner over the session socket (named by CLAUDE_SHIM_SESSION,
//! checked to be a session directory of the state root that only this user
//! can enter), with this process's stdin, stdout and stderr; the signals this
//! process is sent go to the command; its status becomes this process's.
//! Around it, what a per-call sandbox did on the host: the cwd file comes
//! back (claude::shell_tmp) and what the call left that the host would run
//! is moved aside (sandbox::quarantine). A session that is gone fails the
//! call: the command never runs anywhere else.

use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use claude_shim_bundle::policy::values::Access;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use crate::claude::shell_tmp::CallTmp;
use crate::hostfs::Dir;
use crate::sandbox;
use crate::sandbox::quarantine::Watch;

use super::wire;

/// One Bash tool call, as `claude --per-command` described it to the entry.
pub struct Call<'a> {
    /// The runtime's state root (where the session's directories are).
    pub root: &'a Path,
    /// CLAUDE_SHIM_SESSION.
    pub socket: &'a Path,
    pub project: &'a Path,
    /// Claude Code's temp directory, if it named one.
    pub shared: Option<&'a Path>,
    pub policy: Option<&'a str>,
    pub command: &'a str,
}

/// The session's id, if `socket` is `<root>/.claude-shim/<id>.session/sock`.
fn session_of(root: &Path, socket: &Path) -> Option<String> {
    if socket.file_name()? != "sock" {
        return None;
    }
    let dir = socket.parent()?;
    if dir.parent()? != root.join(".claude-shim") {
        return None;
    }
    let id = dir.file_name()?.to_str()?.strip_suffix(".session")?;
    let (pid, hex) = id.strip_prefix("sandbox-")?.split_once('-')?;
    let ok = pid.parse::<u32>().is_ok() && hex.len() == 8 && u32::from_str_radix(hex, 16).is_ok();
    ok.then(|| id.to_owned())
}

/// Connects to the session socket through a handle on its directory, which
/// must be this user's and closed to everyone else.
fn connect(root: &Path, socket: &Path) -> Result<(String, UnixStream)> {
    let Some(id) = session_of(root, socket) else {
        bail!(
            "use CLAUDE_SHIM_SESSION {}: it is not a session socket in the state root {}",
            socket.display(),
            root.display()
        );
    };
    let ours = Dir::open(&root.join(".claude-shim"))?;
    let dir = ours.sub(Path::new(&format!("{id}.session")))?.open_fd()?;
    let st = nix::sys::stat::fstat(dir.as_raw_fd()).context("stat the session directory")?;
    if st.st_uid != nix::unistd::geteuid().as_raw() || st.st_mode & 0o077 != 0 {
        bail!(
            "use session directory {}: it is not this user's alone",
            socket.parent().unwrap_or(socket).display()
        );
    }
    let path = PathBuf::from(format!("/proc/self/fd/{}/sock", dir.as_raw_fd()));
    let sock = UnixStream::connect(&path).with_context(|| {
        format!(
            "reach the session sandbox at {} (it has ended; the command was not run)",
            socket.display()
        )
    })?;
    Ok((id, sock))
}

/// The termination signals this process takes over, as a signalfd; one
/// its caller left ignored stays ignored.
fn take_signals() -> Result<SignalFd> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler};
    let mut set = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP, Signal::SIGQUIT] {
        let probe = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
        // SAFETY: reads the disposition by setting the default and putting
        // the old one back at once; no handler code is installed.
        let old = unsafe { sigaction(s, &probe) }.with_context(|| format!("read the disposition of {s}"))?;
        // SAFETY: as above.
        unsafe { sigaction(s, &old) }.with_context(|| format!("restore the disposition of {s}"))?;
        if old.handler() != SigHandler::SigIgn {
            set.add(s);
        }
    }
    set.thread_block().context("block signals")?;
    SignalFd::with_flags(&set, SfdFlags::SFD_CLOEXEC).context("create a signalfd")
}

pub fn run(c: &Call<'_>) -> Result<i32> {
    let signals = take_signals()?;
    let (id, sock) = connect(c.root, c.socket)?;
    let policy = sandbox::load_policy(c.policy)?;
    let cwd = std::env::current_dir().context("read the working directory")?;
    let cwd = std::fs::canonicalize(&cwd).with_context(|| format!("open {}", cwd.display()))?;
    let cwd = cwd
        .to_str()
        .context("the working directory's path is not UTF-8")?
        .to_owned();
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/".into());
    let vars: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let env = claude_shim_bundle::compile::environment(&policy, &vars, &home);
    let shell = if Path::new("/bin/bash").exists() {
        "/bin/bash"
    } else {
        "/bin/sh"
    };
    let req = wire::Request {
        argv: vec![shell.to_owned(), "-c".to_owned(), c.command.to_owned()],
        cwd,
        env: env.into_iter().collect(),
    };
    let ours = c.root.join(".claude-shim");
    let host = sandbox::host::StdHost::new(Some(ours.clone()));
    // As a per-call sandbox: what the host would run, before and after.
    let watch = if policy.filesystem.workdir == Access::Ro {
        None
    } else {
        let call_id = format!("{id}-{}", std::process::id());
        Some(Watch::now(c.project, &host, policy.filesystem.after_effects, &call_id)?)
    };
    wire::send_request(&sock, &req, [0, 1, 2]).context("hand the command to the session sandbox")?;
    let status = wait(&sock, &signals);
    if let Some(shared) = c.shared {
        match CallTmp::session(c.root, shared, &format!("{id}.tmp"), c.command, false) {
            Ok(t) => t.finish_call(),
            Err(e) => tracing::warn!("{e:#}"),
        }
    }
    if let Some(w) = watch {
        let out = w.finish(&host, &[], &sandbox::lease::Neighbours::alone());
        out.print();
        if !out.closed() {
            bail!(
                "clear {} of what the command left that the host would run: what is named above is still there or was not searched",
                out.workdir.display()
            );
        }
    }
    match status? {
        Some(code) => Ok(code),
        None => bail!("run the command in the session sandbox: the sandbox ended before the command did"),
    }
}

/// Forwards signals until the status arrives; None if the connection
/// closed without one.
fn wait(sock: &UnixStream, signals: &SignalFd) -> Result<Option<i32>> {
    loop {
        let mut fds = [
            PollFd::new(sock.as_fd(), PollFlags::POLLIN),
            PollFd::new(signals.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e).context("wait for the command"),
        }
        if fds[1].revents().is_some_and(|r| !r.is_empty()) {
            if let Ok(Some(info)) = signals.read_signal() {
                let sig = u8::try_from(info.ssi_signo).unwrap_or(0);
                let _ = nix::sys::socket::send(sock.as_raw_fd(), &[sig], nix::sys::socket::MsgFlags::MSG_NOSIGNAL);
            }
        }
        if fds[0].revents().is_some_and(|r| !r.is_empty()) {
            return wire::read_status(sock);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_session_directory_of_the_root_is_taken() {
        let root = Path::new("/run/claude-shim");
        let good = root.join(".claude-shim/sandbox-42-0000beef.session/sock");
        assert_eq!(session_of(root, &good).as_deref(), Some("sandbox-42-0000beef"));
        for bad in [
            "/run/claude-shim/.claude-shim/sandbox-42-0000beef.session/other",
            "/run/claude-shim/.claude-shim/sandbox-42-0000beef.tmp/sock",
            "/run/claude-shim/.claude-shim/x/sandbox-42-0000beef.session/sock",
            "/tmp/.claude-shim/sandbox-42-0000beef.session/sock",
            "/run/claude-shim/.claude-shim/sandbox-x-0000beef.session/sock",
            "/run/claude-shim/.claude-shim/sandbox-42-beef.session/sock",
            "/run/claude-shim/.claude-shim/../sandbox-42-0000beef.session/sock",
        ] {
            assert_eq!(session_of(root, Path::new(bad)), None, "{bad}");
        }
    }
}
