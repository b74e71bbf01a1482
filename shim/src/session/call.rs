//! One call in a session sandbox, served by a child of the spawner: it
//! receives the command and the caller's stdio, runs the command in a
//! process group of its own, forwards the signals the caller was sent to
//! that group, and when the command's process ends kills everything the
//! call started before it reports the status.
//!
//! Why a subreaper and not a child cgroup: the sandbox's cgroup file system
//! is read-only inside and its capabilities are dropped, so nothing inside
//! can make or populate a cgroup, and a fresh PID namespace needs
//! CAP_SYS_ADMIN too. The server is a child subreaper (PR_SET_CHILD_SUBREAPER):
//! whatever the command starts, however it detaches (setsid, a double
//! fork), stays below the server, since an orphan is handed to its nearest
//! subreaper ancestor; so the server's children, read from
//! /proc/thread-self/children, killed and reaped until none is left, are
//! every process of the call. A command that kills its server hands its
//! processes to the spawner, which kills them (spawner.rs).

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, killpg, SigSet, SigmaskHow, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;

use super::wire;
use crate::network::process::{children, pidfd_open};

/// How long a command has to end after a forwarded signal before the
/// call's processes are killed (the `sandbox` verb's grace).
const GRACE: Duration = Duration::from_secs(2);

/// Kills every process below this one and reaps them, until none is left.
fn kill_all() {
    loop {
        for pid in children() {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        // Blocks until one of them (or an orphan handed over meanwhile,
        // whose parent was one of them) ends; ECHILD once there is none.
        match waitpid(None, Some(WaitPidFlag::__WALL)) {
            Err(Errno::EINTR) | Ok(_) => continue,
            Err(_) => return,
        }
    }
}

/// Writes one line to the call's stderr (the caller's own).
fn say(stderr: &OwnedFd, line: &str) {
    let _ = nix::unistd::write(stderr, format!("claude-shim: {line}\n").as_bytes());
}

/// Serves the call on `conn`; the exit code of the server process.
pub fn serve(conn: UnixStream) -> i32 {
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return 1;
    }
    // The spawner blocks SIGCHLD for its signalfd; the command must start
    // with nothing blocked, as it would from a shell.
    if nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None).is_err() {
        return 1;
    }
    let Ok((req, [stdin, stdout, stderr])) = wire::receive_request(&conn) else {
        return 1;
    };
    let Some((program, args)) = req.argv.split_first() else {
        return 1;
    };
    let err_copy = stderr.try_clone();
    let mut cmd = std::process::Command::new(program);
    cmd.args(args)
        .current_dir(&req.cwd)
        .env_clear()
        .envs(req.env.iter().map(|(k, v)| (k, v)))
        .stdin(stdin)
        .stdout(stdout)
        .stderr(stderr);
    // SAFETY: setpgid is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setpgid(Pid::from_raw(0), Pid::from_raw(0))?;
            Ok(())
        });
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            if let Ok(err) = &err_copy {
                say(err, &format!("failed to execute {program} in {}: {e}", req.cwd));
            }
            let _ = wire::send_status(&conn, 127);
            return 0;
        }
    };
    drop(err_copy);
    let pid = child.id() as i32;
    let code = match watch(&conn, pid) {
        Watched::Ended => match child.wait() {
            Ok(st) => st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0)),
            Err(_) => 1,
        },
        Watched::CallerGone => {
            kill_all();
            return 0;
        }
    };
    kill_all();
    let _ = wire::send_status(&conn, code);
    0
}

enum Watched {
    /// The command's process ended (not yet reaped).
    Ended,
    /// The caller closed the connection: it was killed.
    CallerGone,
}

/// Waits for the command's process `pid` to end, forwarding each signal
/// the caller reports to its process group, and killing the group if it
/// has not ended `GRACE` after the first.
fn watch(conn: &UnixStream, pid: i32) -> Watched {
    let Ok(pidfd) = pidfd_open(pid) else {
        // It ended (and is a zombie) before it could be watched.
        return Watched::Ended;
    };
    let group = Pid::from_raw(pid);
    let mut deadline: Option<Instant> = None;
    loop {
        let timeout = match deadline {
            None => PollTimeout::NONE,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now()).as_millis();
                PollTimeout::try_from(left.min(60_000) as i32).unwrap_or(PollTimeout::ZERO)
            }
        };
        let mut fds = [
            PollFd::new(conn.as_fd(), PollFlags::POLLIN),
            PollFd::new(pidfd.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, timeout) {
            Ok(0) => {
                let _ = killpg(group, Signal::SIGKILL);
                deadline = None;
                continue;
            }
            Ok(_) => {}
            Err(Errno::EINTR) => continue,
            Err(_) => return Watched::Ended,
        }
        if fds[1].revents().is_some_and(|r| !r.is_empty()) {
            return Watched::Ended;
        }
        if fds[0].revents().is_some_and(|r| !r.is_empty()) {
            let mut b = [0u8; 1];
            match nix::unistd::read(conn.as_raw_fd(), &mut b) {
                Err(Errno::EINTR) => {}
                Ok(0) | Err(_) => return Watched::CallerGone,
                Ok(_) => {
                    if let Ok(sig) = Signal::try_from(i32::from(b[0])) {
                        let _ = killpg(group, sig);
                        deadline.get_or_insert_with(|| Instant::now() + GRACE);
                    }
                }
            }
        }
    }
}
