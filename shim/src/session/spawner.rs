//! The spawner: `claude-shim __spawner`, the init of a session sandbox (it
//! runs inside every namespace, cgroup, seccomp filter and capability drop
//! of the sandbox, from the runtime's binary bound in read-only). Its stdin
//! is the listening session socket, whose path only the host sees; its
//! stdout the write end of a pipe the session holds, to end the sandbox
//! when the session ends however it ends. Each connection is one call,
//! served by a forked child (`call`); a process of a call that outlives its
//! server (a command killed it) is a child of this process it did not fork,
//! and is killed.

use std::collections::BTreeSet;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};

use anyhow::{Context, Result};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, ForkResult, Pid};

/// Moves `fd` out of the way (close-on-exec, above the stdio numbers) and
/// puts /dev/null in its place.
fn take(fd: i32) -> Result<OwnedFd> {
    // SAFETY: fcntl on a descriptor of this process, integer arguments only.
    let moved = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    if moved < 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("move descriptor {fd}"));
    }
    // SAFETY: just made, owned by nothing else.
    let moved = unsafe { OwnedFd::from_raw_fd(moved) };
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .context("open /dev/null")?;
    // SAFETY: dup2 onto a stdio number this process no longer uses.
    if unsafe { libc::dup2(null.as_raw_fd(), fd) } < 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("replace descriptor {fd}"));
    }
    Ok(moved)
}

pub fn main() -> Result<i32> {
    // Not dumpable: the calls run as the same user, and could otherwise
    // take the listening socket out of this process (pidfd_getfd, ptrace)
    // or read its memory.
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error()).context("make the spawner undumpable");
    }
    let listener = UnixListener::from(take(0)?);
    listener.set_nonblocking(true).context("set up the session socket")?;
    let life = take(1)?;
    take(2)?;
    let mut chld = SigSet::empty();
    chld.add(Signal::SIGCHLD);
    chld.thread_block().context("block SIGCHLD")?;
    let sigfd =
        SignalFd::with_flags(&chld, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK).context("create a signalfd")?;
    let mut servers: BTreeSet<i32> = BTreeSet::new();
    loop {
        let mut fds = [
            PollFd::new(listener.as_fd(), PollFlags::POLLIN),
            PollFd::new(sigfd.as_fd(), PollFlags::POLLIN),
            // Error or hang-up once the session closed its read end.
            PollFd::new(life.as_fd(), PollFlags::empty()),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e).context("wait for a call"),
        }
        let ready = |i: usize| fds[i].revents().is_some_and(|r| !r.is_empty());
        if ready(2) {
            // The session is gone: this init's exit ends every process of
            // the sandbox (its pid namespace).
            return Ok(0);
        }
        let (accept, reap) = (ready(0), ready(1));
        if reap {
            while let Ok(Some(_)) = sigfd.read_signal() {}
            reap_and_sweep(&mut servers);
        }
        if accept {
            match listener.accept() {
                Ok((conn, _)) if !from_outside(&conn) => drop(conn),
                Ok((conn, _)) => {
                    if let Some(pid) = serve(&listener, conn, &life)? {
                        servers.insert(pid);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e).context("accept a call"),
            }
        }
    }
}

/// Whether the peer runs outside the sandbox: the kernel gives a peer's
/// pid as this process's PID namespace sees it, and 0 for a process it
/// cannot see (the host's `claude-shim-shell`). A process of the sandbox
/// that reached the socket (it never should: the path is the host's, the
/// listening descriptor this undumpable process's) is refused here.
fn from_outside(conn: &UnixStream) -> bool {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    getsockopt(conn, PeerCredentials).is_ok_and(|c| c.pid() == 0)
}

/// Forks the server of one call; its pid (None in the child, which never returns).
fn serve(listener: &UnixListener, conn: UnixStream, life: &OwnedFd) -> Result<Option<i32>> {
    // SAFETY: this process is single-threaded; the child only runs the call.
    match unsafe { fork() }.context("fork the server of a call")? {
        ForkResult::Parent { child } => Ok(Some(child.as_raw())),
        ForkResult::Child => {
            // SAFETY: closing this child's copies; the parent keeps its own.
            unsafe {
                libc::close(listener.as_raw_fd());
                libc::close(life.as_raw_fd());
            }
            let code = super::call::serve(conn);
            // SAFETY: ends the forked child without running the parent's exit path.
            unsafe { libc::_exit(code) }
        }
    }
}

/// Reaps whatever ended; then kills each child this process did not fork
/// (the processes of a call whose server was killed: orphans come here).
fn reap_and_sweep(servers: &mut BTreeSet<i32>) {
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL)) {
            Ok(WaitStatus::StillAlive) | Err(_) => break,
            Ok(st) => {
                if let Some(pid) = st.pid() {
                    servers.remove(&pid.as_raw());
                }
            }
        }
    }
    for pid in crate::network::process::children() {
        if !servers.contains(&pid) {
            // Its end is reaped on the SIGCHLD it brings, with its orphans swept.
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}
