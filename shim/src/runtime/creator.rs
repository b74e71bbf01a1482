//! The link between the runtime that creates a container and its init, so a
//! runtime killed before it finished never leaves an init waiting for a
//! `start` that cannot come.
//!
//! A pipe made before libcontainer forks: the runtime holds its write end,
//! the init (in the executor's `validate`, the last runtime code before it
//! waits for `start`) closes its own copy of the write end, arms the read end
//! with O_ASYNC, owned by itself, and handles SIGIO by exiting. When the last
//! write end closes (the runtime's, however it ends) the kernel sends the
//! init SIGIO. (Not F_SETSIG = SIGKILL: the kernel drops a SIGKILL queued
//! with poll information for the init of a pid namespace, which ignores
//! every signal it has no handler for.) Once `create` has succeeded it hands the container over by
//! clearing O_ASYNC on the read end (the flag belongs to the open file, shared
//! with the init): the init then outlives it, as an engine expects. A
//! foreground `run` or `sandbox` never hands over: its container dies with it.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use anyhow::{Context, Result};
use nix::fcntl::OFlag;

/// The runtime's two ends (it keeps the read end too: the open file, and
/// with it the init's registration, lives as long as the runtime).
pub struct Link {
    read: OwnedFd,
    /// Held open: its close is the signal.
    write: OwnedFd,
}

impl Link {
    pub fn new() -> Result<Self> {
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC).context("create the creator pipe")?;
        Ok(Self { read, write })
    }

    /// The descriptor numbers, as the init (a fork of this process) has them.
    pub fn ends(&self) -> (RawFd, RawFd) {
        (self.read.as_raw_fd(), self.write.as_raw_fd())
    }

    /// The container now outlives this process.
    pub fn hand_over(self) -> Result<()> {
        let fd = self.read.as_raw_fd();
        // SAFETY: fcntl on a descriptor we own, integer arguments only.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        // SAFETY: as above.
        if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_ASYNC) } < 0 {
            return Err(std::io::Error::last_os_error()).context("hand the container over");
        }
        Ok(())
    }
}

extern "C" fn creator_gone(_: libc::c_int) {
    // SAFETY: _exit is async-signal-safe.
    unsafe { libc::_exit(1) };
}

/// In the init: exit when the runtime's write end closes, and at once if it
/// already has. The handler goes with the init's execve.
pub fn arm(read: RawFd, write: RawFd) -> std::io::Result<()> {
    use nix::sys::signal::{sigaction, sigprocmask, SaFlags, SigAction, SigHandler, SigSet, SigmaskHow, Signal};
    let action = SigAction::new(SigHandler::Handler(creator_gone), SaFlags::empty(), SigSet::empty());
    // SAFETY: the handler only calls _exit.
    unsafe { sigaction(Signal::SIGIO, &action) }?;
    let mut io = SigSet::empty();
    io.add(Signal::SIGIO);
    sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&io), None)?;
    let check = |r: libc::c_int| {
        if r < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(())
        }
    };
    // SAFETY: fcntl and close on descriptors inherited from the runtime,
    // integer arguments only; the init uses neither for anything else.
    unsafe {
        check(libc::close(write))?;
        check(libc::fcntl(read, libc::F_SETOWN, libc::getpid()))?;
        let flags = libc::fcntl(read, libc::F_GETFL);
        check(flags)?;
        check(libc::fcntl(read, libc::F_SETFL, flags | libc::O_ASYNC))?;
    }
    // Armed first, then checked: a runtime gone before the arming left the
    // pipe at end of file (nothing is ever written to it).
    let mut pfd = libc::pollfd {
        fd: read,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no wait.
    let n = unsafe { libc::poll(&mut pfd, 1, 0) };
    if n > 0 && pfd.revents != 0 {
        // SAFETY: ending this process; nothing of it is shared.
        unsafe { libc::_exit(1) };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::wait::{waitpid, WaitStatus};
    use nix::unistd::{fork, ForkResult};

    /// A forked child stands for the init; this process for the runtime.
    fn child_after(link: Link, hand_over: bool) -> WaitStatus {
        let (r, w) = link.ends();
        // SAFETY: the child only makes async-signal-safe calls before _exit.
        match unsafe { fork() }.unwrap() {
            ForkResult::Child => {
                if arm(r, w).is_err() {
                    unsafe { libc::_exit(3) };
                }
                unsafe { libc::sleep(2) };
                unsafe { libc::_exit(0) };
            }
            ForkResult::Parent { child } => {
                std::thread::sleep(std::time::Duration::from_millis(200));
                if hand_over {
                    link.hand_over().unwrap();
                } else {
                    drop(link);
                }
                waitpid(child, None).unwrap()
            }
        }
    }

    /// One test: a fork from a parallel test would hold the other's write end.
    #[test]
    fn the_init_dies_with_its_runtime_unless_handed_over() {
        let status = child_after(Link::new().unwrap(), false);
        assert!(matches!(status, WaitStatus::Exited(_, 1)), "{status:?}");
        let status = child_after(Link::new().unwrap(), true);
        assert!(matches!(status, WaitStatus::Exited(_, 0)), "{status:?}");
    }
}
