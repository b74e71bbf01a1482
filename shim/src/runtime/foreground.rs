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
        // Bound through a handle on the directory: a long state root would
        // not fit in a socket address (108 bytes).
        let handle = fs::File::open(dir).with_context(|| format!("open {}", dir.display()))?;
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let listener = UnixListener::bind(format!("/proc/self/fd/{}/{name}", handle.as_raw_fd()))
            .with_context(|| format!("bind console socket {}", path.display()))?;
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
                    let master = unsafe { OwnedFd::from_raw_fd(fd) };
                    clear_onlcr(&master)?;
                    return Ok(master);
                }
            }
        }
        bail!("receive the pty master: no descriptor in the message")
    }
}

/// The container's output reaches the caller's own terminal, which turns
/// `\n` into `\r\n` already; with the pty doing it too, every line ended
/// `\r\n` in a file or a pipe. runc clears ONLCR on the master it relays.
fn clear_onlcr(master: &OwnedFd) -> Result<()> {
    use nix::sys::termios::{tcgetattr, tcsetattr, OutputFlags, SetArg};
    let mut t = tcgetattr(master).context("read the pty's terminal settings")?;
    t.output_flags.remove(OutputFlags::ONLCR);
    tcsetattr(master, SetArg::TCSANOW, &t).context("clear ONLCR on the pty")
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
    /// Switches `fd` to raw mode, first passing to `master` what the terminal
    /// already completed in canonical mode (see `forward_cooked`).
    fn enter(fd: BorrowedFd<'_>, master: BorrowedFd<'_>) -> Option<Self> {
        let saved = termios::tcgetattr(fd).ok()?;
        if saved.local_flags.contains(termios::LocalFlags::ICANON) {
            forward_cooked(fd, master);
        }
        let mut raw = saved.clone();
        termios::cfmakeraw(&mut raw);
        // Output processing stays on, as in runc: the container's pty has
        // ONLCR cleared (`clear_onlcr`), so this terminal ends its lines.
        raw.output_flags |= termios::OutputFlags::OPOST;
        termios::tcsetattr(fd, SetArg::TCSANOW, &raw).ok()?;
        Some(Self {
            fd: fd.as_raw_fd(),
            saved,
        })
    }
}

/// Reads the lines a canonical-mode terminal already holds and writes them to
/// `master`. An end-of-file the terminal holds (Ctrl-D typed ahead, or `script`
/// closing its input) is kept in the line buffer as a NUL byte that only
/// canonical reads skip: left there, it would reach the container as a stray
/// NUL once the terminal is raw. It is passed on as the container terminal's
/// own EOF character instead, which is what a Ctrl-D typed later turns into.
fn forward_cooked(from: BorrowedFd<'_>, master: BorrowedFd<'_>) {
    let mut buf = [0u8; 4096];
    // Bounded: a hung-up terminal may read as end-of-file forever.
    for _ in 0..64 {
        // In canonical mode the terminal polls readable only for a whole line
        // or an end-of-file, so a half-typed line stays for the raw relay.
        let mut fds = [PollFd::new(from, PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::ZERO) {
            Ok(1) if fds[0].revents().is_some_and(|r| r.contains(PollFlags::POLLIN)) => {}
            _ => return,
        }
        match nix::unistd::read(from.as_raw_fd(), &mut buf) {
            Ok(0) => {
                let eof = termios::tcgetattr(master)
                    .map(|t| t.control_chars[termios::SpecialCharacterIndices::VEOF as usize])
                    .unwrap_or(4);
                write_all(master.as_raw_fd(), &[eof]);
                return;
            }
            Ok(n) => write_all(master.as_raw_fd(), &buf[..n]),
            Err(_) => return,
        }
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
    // A blocked signal is queued even when ignored; one the caller left
    // ignored stays unblocked, so the kernel keeps discarding it.
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        if caller_ignores(s) {
            set.remove(s);
        }
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

/// How a foreground wait treats signals.
pub struct Forwarding<'a> {
    /// Maps each signal to the one forwarded (None drops it).
    pub map: &'a mut dyn FnMut(Signal) -> Option<Signal>,
    /// After a terminating signal was forwarded, SIGKILL the process if it is
    /// still alive this much later (pid 1 of a namespace ignores signals it has
    /// no handler for, so Ctrl-C alone may not end it).
    pub grace: Option<std::time::Duration>,
    /// A signal that arrived before the wait began, forwarded first.
    pub pending: Option<Signal>,
}

fn is_termination(sig: Signal) -> bool {
    matches!(sig, Signal::SIGINT | Signal::SIGTERM | Signal::SIGHUP | Signal::SIGQUIT)
}

/// A rewrite of what the relay shows of the container's terminal (the
/// chunk read, and whether it is the last): `claude` puts the command that
/// resumes the agent's session in Claude Code's own hint (claude::resume).
pub type OutputFilter = Box<dyn FnMut(&[u8], bool) -> Vec<u8> + Send>;

static OUTPUT_FILTER: std::sync::Mutex<Option<OutputFilter>> = std::sync::Mutex::new(None);

/// Sets the rewrite the next `wait` applies to a terminal's output.
pub fn filter_output(f: OutputFilter) {
    if let Ok(mut g) = OUTPUT_FILTER.lock() {
        *g = Some(f);
    }
}

/// Waits for `pid`, forwarding signals as `fwd` says, relaying `master`
/// (a pty master) to our stdin/stdout when given.
pub fn wait(pid: Pid, signals: &SignalFd, master: Option<OwnedFd>, fwd: Forwarding<'_>) -> Result<i32> {
    let Forwarding {
        map: policy,
        grace,
        pending,
    } = fwd;
    let mut kill_at: Option<std::time::Instant> = None;
    let mut forward = |sig: Signal, kill_at: &mut Option<std::time::Instant>| {
        if let Some(s) = policy(sig) {
            let _ = kill(pid, s);
            if let (Some(g), true, None) = (grace, is_termination(s), *kill_at) {
                *kill_at = Some(std::time::Instant::now() + g);
            }
        }
    };
    if let Some(sig) = pending {
        forward(sig, &mut kill_at);
    }
    let stdin = std::io::stdin();
    let _raw = match &master {
        Some(m) if nix::unistd::isatty(stdin.as_raw_fd()).unwrap_or(false) => {
            copy_winsize(stdin.as_raw_fd(), m.as_raw_fd());
            RawTerminal::enter(stdin.as_fd(), m.as_fd())
        }
        _ => None,
    };
    let mut stdin_open = master.is_some();
    let mut master_open = master.is_some();
    let mut filter = OUTPUT_FILTER.lock().ok().and_then(|mut g| g.take());
    // An exit before the signals were blocked left no SIGCHLD behind, only a zombie.
    let mut status = reap(pid)?;
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        if let Some(code) = status {
            if !master_open {
                if let Some(f) = filter.as_mut() {
                    write_all(libc::STDOUT_FILENO, &f(&[], true));
                }
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
        } else if let Some(at) = kill_at {
            let left = at.saturating_duration_since(std::time::Instant::now()).as_millis();
            PollTimeout::try_from(left.min(60_000) as i32).unwrap_or(PollTimeout::ZERO)
        } else {
            PollTimeout::NONE
        };
        match poll(&mut fds, timeout) {
            Ok(0) if status.is_none() => {
                if kill_at.is_some_and(|at| std::time::Instant::now() >= at) {
                    tracing::warn!("process {pid} outlived the grace period after a termination signal; killing it");
                    let _ = kill(pid, Signal::SIGKILL);
                    kill_at = None;
                }
                continue;
            }
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
                    other => forward(other, &mut kill_at),
                }
            }
        }
        if let Some(m) = &master {
            if master_ready {
                match nix::unistd::read(m.as_raw_fd(), &mut buf) {
                    Ok(0) | Err(Errno::EIO) => master_open = false,
                    Ok(n) => match filter.as_mut() {
                        Some(f) => write_all(libc::STDOUT_FILENO, &f(&buf[..n], false)),
                        None => write_all(libc::STDOUT_FILENO, &buf[..n]),
                    },
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
    }
}

static CAUGHT: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Termination signals the caller left ignored (`defer_termination`), which
/// `block_signals` leaves unblocked.
static IGNORED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn caller_ignores(sig: Signal) -> bool {
    IGNORED.load(std::sync::atomic::Ordering::SeqCst) & (1 << sig as u64) != 0
}

extern "C" fn remember(sig: libc::c_int) {
    CAUGHT.store(sig, std::sync::atomic::Ordering::SeqCst);
}

/// Until the foreground wait takes over, SIGINT/SIGTERM/SIGHUP are only
/// remembered, so a Ctrl-C during create cannot kill claude-shim half-way and
/// leave a container behind. Handlers (unlike ignored or blocked signals) do
/// not survive the container's execve. A signal the caller left ignored
/// (`nohup`, a shell's background job) stays ignored, as a shell keeps it:
/// the caller asked that it not end the command.
pub fn defer_termination() -> Result<()> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler};
    let action = SigAction::new(SigHandler::Handler(remember), SaFlags::SA_RESTART, SigSet::empty());
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: the handler only stores to an atomic.
        let old = unsafe { sigaction(sig, &action) }.with_context(|| format!("handle {sig}"))?;
        if old.handler() == SigHandler::SigIgn {
            IGNORED.fetch_or(1 << sig as u64, std::sync::atomic::Ordering::SeqCst);
            // SAFETY: restores the disposition the caller gave.
            unsafe { sigaction(sig, &old) }.with_context(|| format!("keep {sig} ignored"))?;
        }
    }
    Ok(())
}

/// The termination signal that arrived while deferred, if any.
pub fn deferred_signal() -> Option<Signal> {
    Signal::try_from(CAUGHT.load(std::sync::atomic::Ordering::SeqCst)).ok()
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
