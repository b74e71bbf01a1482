//! Foreground processes (`run`, `exec` without --detach, `sandbox`): claude-shim
//! stays the parent, forwards signals, relays a terminal when the process has
//! one, and returns the process's exit status the way a shell reports it.

use std::fs;
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
use nix::sys::termios::{self, SetArg, Termios};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

/// A listening socket for libcontainer to send a pty master to.
pub struct ConsoleSocket {
    listener: UnixListener,
    pub path: PathBuf,
}

impl ConsoleSocket {
    pub fn bind(dir: &Path) -> Result<Self> {
        let path = dir.join(format!("console-{}.sock", std::process::id()));
        let _ = fs::remove_file(&path);
        let listener = UnixListener::bind(&path).with_context(|| format!("bind console socket {}", path.display()))?;
        Ok(Self { listener, path })
    }

    /// The pty master sent by the container process.
    pub fn receive(&self) -> Result<OwnedFd> {
        let (stream, _) = self.listener.accept().context("accept on the console socket")?;
        let mut buf = [0u8; 4096];
        let mut iov = [IoSliceMut::new(&mut buf)];
        let mut space = nix::cmsg_space!([RawFd; 1]);
        let msg = recvmsg::<()>(
            stream.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .context("receive the pty master")?;
        for cmsg in msg.cmsgs().context("read the console message")? {
            if let ControlMessageOwned::ScmRights(fds) = cmsg {
                if let Some(&fd) = fds.first() {
                    // SAFETY: the kernel just installed this descriptor for us.
                    return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
                }
            }
        }
        bail!("receive the pty master: no descriptor in the message")
    }
}

impl Drop for ConsoleSocket {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// The host terminal in raw mode for as long as this lives.
struct RawTerminal {
    fd: RawFd,
    saved: Termios,
}

impl RawTerminal {
    fn enter(fd: BorrowedFd<'_>) -> Option<Self> {
        let saved = termios::tcgetattr(fd).ok()?;
        let mut raw = saved.clone();
        termios::cfmakeraw(&mut raw);
        termios::tcsetattr(fd, SetArg::TCSANOW, &raw).ok()?;
        Some(Self {
            fd: fd.as_raw_fd(),
            saved,
        })
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        // SAFETY: stdin outlives this guard.
        let fd = unsafe { BorrowedFd::borrow_raw(self.fd) };
        let _ = termios::tcsetattr(fd, SetArg::TCSANOW, &self.saved);
    }
}

nix::ioctl_read_bad!(get_winsize, libc::TIOCGWINSZ, libc::winsize);
nix::ioctl_write_ptr_bad!(set_winsize, libc::TIOCSWINSZ, libc::winsize);

fn copy_winsize(from: RawFd, to: RawFd) {
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: both descriptors are open; ws is a valid winsize.
    unsafe {
        if get_winsize(from, &mut ws).is_ok() {
            let _ = set_winsize(to, &ws);
        }
    }
}

/// The signals a foreground runtime takes over; each is forwarded to the process.
pub fn block_signals() -> Result<SignalFd> {
    let mut set = SigSet::all();
    // Synchronous signals cannot be usefully blocked.
    for s in [
        Signal::SIGSEGV,
        Signal::SIGBUS,
        Signal::SIGILL,
        Signal::SIGFPE,
        Signal::SIGKILL,
        Signal::SIGSTOP,
    ] {
        set.remove(s);
    }
    set.thread_block().context("block signals")?;
    SignalFd::with_flags(&set, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK).context("create a signalfd")
}

/// A shell's view of a wait status.
pub fn exit_code(status: WaitStatus) -> Option<i32> {
    match status {
        WaitStatus::Exited(_, code) => Some(code),
        WaitStatus::Signaled(_, sig, _) => Some(128 + sig as i32),
        _ => None,
    }
}

/// Waits for `pid`, forwarding each signal as `policy` maps it (None drops it), relaying `master`
/// (a pty master) to our stdin/stdout when given.
pub fn wait(
    pid: Pid,
    signals: &SignalFd,
    master: Option<OwnedFd>,
    policy: &mut dyn FnMut(Signal) -> Option<Signal>,
) -> Result<i32> {
    let stdin = std::io::stdin();
    let _raw = match &master {
        Some(m) if nix::unistd::isatty(stdin.as_raw_fd()).unwrap_or(false) => {
            copy_winsize(stdin.as_raw_fd(), m.as_raw_fd());
            RawTerminal::enter(stdin.as_fd())
        }
        _ => None,
    };
    let mut stdin_open = master.is_some();
    let mut master_open = master.is_some();
    // An exit before the signals were blocked left no SIGCHLD behind, only a zombie.
    let mut status = reap(pid)?;
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        if let Some(code) = status {
            if !master_open {
                return Ok(code);
            }
        }
        let mut fds = vec![PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
        let (mut stdin_idx, mut master_idx) = (None, None);
        if let Some(m) = &master {
            if master_open {
                master_idx = Some(fds.len());
                fds.push(PollFd::new(m.as_fd(), PollFlags::POLLIN));
            }
            if stdin_open && status.is_none() {
                stdin_idx = Some(fds.len());
                fds.push(PollFd::new(stdin.as_fd(), PollFlags::POLLIN));
            }
        }
        // After the process is gone, drain what the pty still holds, briefly.
        let timeout = if status.is_some() {
            PollTimeout::from(100u16)
        } else {
            PollTimeout::NONE
        };
        match poll(&mut fds, timeout) {
            Ok(0) => {
                master_open = false;
                continue;
            }
            Ok(_) => {}
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(anyhow!("poll: {e}")),
        }
        let ready = |i: Option<usize>| i.is_some_and(|i| fds[i].revents().is_some_and(|r| !r.is_empty()));
        let sig_ready = fds[0].revents().is_some_and(|r| r.contains(PollFlags::POLLIN));
        let (master_ready, stdin_ready) = (ready(master_idx), ready(stdin_idx));
        drop(fds);
        if sig_ready {
            while let Ok(Some(info)) = signals.read_signal() {
                let Ok(sig) = Signal::try_from(info.ssi_signo as i32) else {
                    continue;
                };
                match sig {
                    Signal::SIGCHLD => {
                        if let Some(code) = reap(pid)? {
                            status = Some(code);
                        }
                    }
                    Signal::SIGWINCH => {
                        if let Some(m) = &master {
                            copy_winsize(stdin.as_raw_fd(), m.as_raw_fd());
                        }
                    }
                    other => {
                        if let Some(s) = policy(other) {
                            let _ = kill(pid, s);
                        }
                    }
                }
            }
        }
        if let Some(m) = &master {
            if master_ready {
                match nix::unistd::read(m.as_raw_fd(), &mut buf) {
                    Ok(0) | Err(Errno::EIO) => master_open = false,
                    Ok(n) => write_all(libc::STDOUT_FILENO, &buf[..n]),
                    Err(Errno::EINTR | Errno::EAGAIN) => {}
                    Err(_) => master_open = false,
                }
            }
            if stdin_ready {
                match nix::unistd::read(stdin.as_raw_fd(), &mut buf) {
                    Ok(0) => stdin_open = false,
                    Ok(n) => write_all(m.as_raw_fd(), &buf[..n]),
                    Err(Errno::EINTR | Errno::EAGAIN) => {}
                    Err(_) => stdin_open = false,
                }
            }
        }
        if status.is_none() && master.is_none() {
            // Catch an exit that raced with blocking the signals.
            if let Some(code) = reap(pid)? {
                status = Some(code);
            }
        }
    }
}

fn write_all(fd: RawFd, mut data: &[u8]) {
    while !data.is_empty() {
        // SAFETY: fd is open for the duration of the call.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        match nix::sys::uio::writev(fd, &[IoSlice::new(data)]) {
            Ok(n) => data = &data[n..],
            Err(Errno::EINTR | Errno::EAGAIN) => continue,
            Err(_) => return,
        }
    }
}

/// Reaps children without blocking; the exit code once `pid` has ended.
pub fn reap(pid: Pid) -> Result<Option<i32>> {
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => return Ok(None),
            Ok(st) => {
                if st.pid() == Some(pid) {
                    if let Some(code) = exit_code(st) {
                        return Ok(Some(code));
                    }
                }
            }
            Err(Errno::ECHILD) => return Ok(None),
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(anyhow!("wait for process {pid}: {e}")),
        }
    }
}
