//! Processes beside a container: how claude-shim starts a helper so that it
//! outlives `create` and holds nothing of the engine's or the runtime's (a
//! fork, not an exec; new session, double fork, stdio on /dev/null, every
//! other descriptor closed), how the helper
//! says it is ready, and how a recorded pid is checked to still be that
//! helper before it is signalled (pid plus start time, through a pidfd so a
//! recycled pid cannot be hit between the check and the signal).

use std::fs;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

/// Field 22 of /proc/<pid>/stat: when the process started, in clock ticks
/// after boot. A pid and its start time name one process for the machine's uptime.
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // comm (field 2) may hold spaces and parentheses; the fields after it do not.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// A pidfd for `pid`, if it is still the process that started at `start`.
pub fn open_verified(pid: i32, start: u64) -> Option<OwnedFd> {
    if pid <= 0 {
        return None;
    }
    let fd = pidfd_open(pid).ok()?;
    // Checked after opening: from here on the pidfd names this process even if the pid is reused.
    (start_time(pid) == Some(start)).then_some(fd)
}

/// The processes whose parent is the calling thread (of a single-threaded
/// process, all its children), from the kernel.
pub fn children() -> Vec<i32> {
    fs::read_to_string("/proc/thread-self/children")
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

pub fn pidfd_open(pid: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

pub fn pidfd_signal(fd: &OwnedFd, sig: libc::c_int) -> std::io::Result<()> {
    // SAFETY: a valid pidfd, a signal number, no siginfo, no flags.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Waits until the process behind a pidfd has exited; true if it did in time.
pub fn wait_exit(fd: &OwnedFd, within: Duration) -> bool {
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
    let ms = within.as_millis().min(i32::MAX as u128) as i32;
    matches!(poll(&mut fds, PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)), Ok(n) if n > 0)
}

/// SIGTERM, a grace period, then SIGKILL.
pub fn terminate(fd: &OwnedFd, grace: Duration) {
    if pidfd_signal(fd, libc::SIGTERM).is_err() {
        return;
    }
    if !wait_exit(fd, grace) {
        let _ = pidfd_signal(fd, libc::SIGKILL);
        let _ = wait_exit(fd, Duration::from_secs(2));
    }
}

/// The descriptor number a helper finds its ready pipe on.
pub const READY_FD: RawFd = 3;

/// What a helper reported on its ready pipe.
pub struct Ready {
    pub words: Vec<String>,
}

/// A ready line's words if it says "ok ...", its complaint otherwise.
fn ready_words(line: String) -> Result<Vec<String>> {
    let words: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
    match words.first().map(String::as_str) {
        Some("ok") => Ok(words),
        Some("error") => bail!("{}", line.trim_start_matches("error").trim()),
        _ if line.is_empty() => bail!("it exited before it was ready"),
        _ => bail!("it said {line:?} instead of ready"),
    }
}

/// Runs `body` as a helper in a forked child of this process, without an
/// exec: an exec of this 13 MB static binary costs about a millisecond of
/// CPU (relocation, and glibc's cache probing through cpuid, which traps in
/// a VM) on every sandbox's start. The child finds what an exec'd helper
/// would: the ready pipe at 3, `fds` at 4, 5, ..., stdin, stdout and stderr
/// on /dev/null, no other descriptor (no lock or socket of the runtime's
/// stays open in it) and default signals. With `detach` it runs in a new
/// session as a grandchild, nobody's waited-for child here, and outlives us;
/// otherwise its pid is returned and the caller reaps it. Refused in a
/// process with more than one thread: a forked child of one may find a lock
/// held forever.
pub fn fork_helper(
    fds: &[&OwnedFd],
    within: Duration,
    detach: bool,
    body: impl FnOnce() -> Result<()>,
) -> Result<(Ready, Option<i32>)> {
    let threads = fs::read_dir("/proc/self/task").map(|d| d.count()).unwrap_or(0);
    if threads != 1 {
        bail!("fork a helper from a process with {threads} threads (one expected)");
    }
    if fds.len() > 16 {
        bail!("hand {} descriptors to a helper (16 at most)", fds.len());
    }
    let (ready_r, ready_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).context("create a pipe")?;
    let mut sources: Vec<RawFd> = vec![ready_w.as_raw_fd()];
    sources.extend(fds.iter().map(|f| f.as_raw_fd()));
    // SAFETY: this process has a single thread (checked above), so the child
    // may run ordinary code; it leaves through _exit only.
    match unsafe { nix::unistd::fork() }.context("fork")? {
        nix::unistd::ForkResult::Child => {
            // SAFETY: in the child, which owns its copies of every descriptor.
            let code = unsafe {
                match place_descriptors(&sources, detach) {
                    Err(_) => 1,
                    Ok(()) => match body() {
                        Ok(()) => 0,
                        Err(e) => {
                            report_ready(&format!("error {e:#}"));
                            1
                        }
                    },
                }
            };
            // SAFETY: ends the child without running the parent's destructors twice.
            unsafe { libc::_exit(code) }
        }
        nix::unistd::ForkResult::Parent { child } => {
            drop(ready_w);
            let child = if detach {
                // The intermediate child exits as soon as it has forked.
                let _ = nix::sys::wait::waitpid(child, None);
                None
            } else {
                Some(child.as_raw())
            };
            let words = ready_words(read_ready_line(ready_r, within)?)?;
            Ok((Ready { words }, child))
        }
    }
}

/// In a forked helper: detaches if asked, puts /dev/null on 0-2 and
/// `sources` at 3, 4, ..., and closes every other descriptor.
///
/// # Safety
/// To be called in a freshly forked child only.
unsafe fn place_descriptors(sources: &[RawFd], detach: bool) -> std::io::Result<()> {
    if detach {
        detach_in_child()?;
    } else {
        reset_signals();
    }
    // As Rust's runtime sets it up in an exec'd helper: a ready line written
    // after the runtime died (killed mid-create) must give EPIPE, not end
    // the helper before it has stopped what it started (pasta).
    libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
    if null < 0 {
        return Err(std::io::Error::last_os_error());
    }
    for target in 0..3 {
        if libc::dup2(null, target) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    // Moved out of the way first, so no source is overwritten before it is placed.
    let mut high = [0 as RawFd; 17];
    for (i, src) in sources.iter().enumerate() {
        let fd = libc::fcntl(*src, libc::F_DUPFD_CLOEXEC, 100);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        high[i] = fd;
    }
    for (i, fd) in high.iter().take(sources.len()).enumerate() {
        if libc::dup2(*fd, READY_FD + i as RawFd) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    libc::close_range((READY_FD as u32) + sources.len() as u32, u32::MAX, 0);
    Ok(())
}

/// Runs in the forked child: a new session, default signals, then fork once
/// more so the helper is not our child and not a session leader.
///
/// # Safety
/// Only async-signal-safe calls; to be used between fork and exec.
pub unsafe fn detach_in_child() -> std::io::Result<()> {
    reset_signals();
    if libc::setsid() < 0 {
        return Err(std::io::Error::last_os_error());
    }
    match libc::fork() {
        -1 => Err(std::io::Error::last_os_error()),
        0 => Ok(()),
        _ => libc::_exit(0),
    }
}

/// Unblocks every signal and restores default actions (a foreground
/// `run` blocks them all). Async-signal-safe.
pub fn reset_signals() {
    // SAFETY: sigset and signal calls on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
        for sig in 1..32 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
    }
}

fn read_ready_line(fd: OwnedFd, within: Duration) -> Result<String> {
    let deadline = Instant::now() + within;
    let mut file = fs::File::from(fd);
    let mut buf = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            bail!("it was not ready within {} s", within.as_secs());
        }
        let mut fds = [PollFd::new(file.as_fd(), PollFlags::POLLIN)];
        let ms = PollTimeout::try_from(left.as_millis().min(60_000) as i32).unwrap_or(PollTimeout::MAX);
        match poll(&mut fds, ms) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(anyhow!("wait for the helper: {e}")),
        }
        let mut chunk = [0u8; 512];
        match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if buf.contains(&b'\n') || buf.len() > 4096 {
                    break;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(anyhow!("read the helper's ready line: {e}")),
        }
    }
    let text = String::from_utf8_lossy(&buf);
    Ok(text.lines().next().unwrap_or_default().trim().to_owned())
}

/// The helper's side: report on the ready pipe (descriptor 3), once.
pub fn report_ready(words: &str) {
    // SAFETY: descriptor 3 is the ready pipe the runtime handed over.
    let mut f = unsafe { fs::File::from_raw_fd(READY_FD) };
    let _ = writeln!(f, "{words}");
}

/// The helper's side, once it serves: gives back the pages its start-up
/// used and its steady state does not. A helper is a fork of the whole
/// runtime; the code and read-only data it touched to get here (and their
/// fault-around neighbours) stay mapped, and freed heap stays resident, for
/// as long as the sandbox runs: most of an idle helper's resident set.
///
/// Only this binary's load segments that are not writable are dropped: no
/// one writes them, so MADV_DONTNEED only removes page-table entries, and
/// what runs later is faulted back in from the page cache. The writable
/// segment, which holds the relocated read-only data, is left alone:
/// dropping it would lose what was written there. The program headers say
/// which is which, so no /proc file is read.
pub fn shed_start_up_pages() {
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        _data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: the loader hands a valid entry; the first is this program.
        let info = unsafe { &*info };
        // SAFETY: sysconf with a constant name.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        for i in 0..info.dlpi_phnum as usize {
            // SAFETY: dlpi_phdr holds dlpi_phnum program headers.
            let ph = unsafe { &*info.dlpi_phdr.add(i) };
            if ph.p_type != libc::PT_LOAD || ph.p_flags & libc::PF_W != 0 {
                continue;
            }
            let from = info.dlpi_addr as usize + ph.p_vaddr as usize;
            // Whole pages inside the segment only, so a page it shares with
            // a writable neighbour is never touched.
            let start = from.div_ceil(page) * page;
            let end = (from + ph.p_memsz as usize) / page * page;
            if end > start {
                // SAFETY: a read-only, never-written load segment of this
                // program: MADV_DONTNEED only drops its page-table entries.
                unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
            }
        }
        1
    }
    // SAFETY: `each` only reads what the loader passes and stops after the
    // first entry (the program itself).
    unsafe { libc::dl_iterate_phdr(Some(each), std::ptr::null_mut()) };
    // SAFETY: glibc's allocator, which takes its own locks.
    unsafe { libc::malloc_trim(0) };
}

/// A helper's life: until the container's init (`init`, a pidfd) exits or a
/// blocked signal arrives on `sigfd`; says which.
pub fn wait_for_end(init: &OwnedFd, sigfd: &nix::sys::signalfd::SignalFd) -> String {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    loop {
        let mut fds = [
            PollFd::new(init.as_fd(), PollFlags::POLLIN),
            PollFd::new(sigfd.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return format!("poll failed: {e}"),
        }
        if fds[0].any().unwrap_or(false) {
            return "the container's init exited".into();
        }
        if fds[1].any().unwrap_or(false) {
            return match sigfd.read_signal() {
                Ok(Some(s)) => format!("signal {}", s.ssi_signo),
                _ => "a signal".into(),
            };
        }
    }
}

/// Gives up root (a helper that only makes connections needs nothing of it).
pub fn drop_to_nobody() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    let nobody = 65534;
    // SAFETY: plain credential system calls.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0
            || libc::setresgid(nobody, nobody, nobody) != 0
            || libc::setresuid(nobody, nobody, nobody) != 0
        {
            return Err(std::io::Error::last_os_error()).context("drop privileges to nobody");
        }
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    }
    Ok(())
}

/// SIGTERM, SIGINT and SIGHUP blocked and read from a signalfd: how a
/// helper learns it is to stop. Called before the helper starts a thread.
pub fn end_signals() -> Result<nix::sys::signalfd::SignalFd> {
    use nix::sys::signal::{SigSet, Signal};
    let mut mask = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        mask.add(s);
    }
    mask.thread_block().context("block signals")?;
    nix::sys::signalfd::SignalFd::new(&mask).context("create a signalfd")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resident kB of this binary's executable mapping.
    fn text_rss() -> u64 {
        let here = text_rss as *const () as usize;
        let smaps = fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ') {
                if let Some((a, b)) = range.split_once('-') {
                    if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                        inside = (a..b).contains(&here);
                        continue;
                    }
                }
            }
            if inside {
                if let Some(kb) = line.strip_prefix("Rss:") {
                    return kb.trim().trim_end_matches(" kB").parse().unwrap();
                }
            }
        }
        panic!("no mapping holds this test's code");
    }

    #[test]
    fn shedding_drops_the_code_pages_and_keeps_the_program_working() {
        let before = text_rss();
        shed_start_up_pages();
        let after = text_rss();
        assert!(after < before / 2, "text Rss {before} kB before, {after} kB after");
        // The relocated data (vtables, formatting tables) is intact.
        let words: Vec<String> = (0..3).map(|i| format!("{i:>3}")).collect();
        assert_eq!(words.join(","), "  0,  1,  2");
    }

    #[test]
    fn start_time_identifies_this_process() {
        let me = std::process::id() as i32;
        let t = start_time(me).unwrap();
        assert!(open_verified(me, t).is_some());
        assert!(open_verified(me, t + 1).is_none());
        assert!(open_verified(0, t).is_none());
    }
}
