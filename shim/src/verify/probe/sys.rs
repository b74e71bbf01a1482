//! The probe's kernel calls: raw syscalls by number (for the ones libc and nix
//! have no wrapper for: clone3, the new mount API, io_uring...) and a
//! disposable child for every call that could change the calling process if
//! it unexpectedly succeeded (unshare, setns, personality, clone). The probe
//! itself stays as the sandbox made it.

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, ForkResult, Pid};

use crate::verify::syscalls::Ret;

/// A syscall by number with six integer arguments.
pub fn raw(nr: i64, a: [u64; 6]) -> Ret {
    // SAFETY: every argument is an integer or an address the kernel checks
    // (the probes pass unmapped addresses on purpose, which fault in the
    // kernel with EFAULT); nothing is dereferenced in user space and no call
    // in the catalog shares or replaces this process's memory.
    let r = unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) };
    if r < 0 {
        Err(Errno::last())
    } else {
        Ok(r)
    }
}

/// A syscall through the i386 entry point (`int 0x80`) with the i386 number
/// `nr` and five arguments (ebx, ecx, edx, esi, edi; ebp, the sixth, is the
/// frame pointer and not an operand Rust lets asm use). A kernel without
/// IA32 emulation answers with SIGSEGV, which the caller's child reports.
#[cfg(target_arch = "x86_64")]
pub fn raw_i386(nr: i64, a: [u64; 6]) -> Ret {
    let ret: u64;
    // SAFETY: as for `raw`: integers and unmapped addresses only. rbx is
    // reserved by LLVM, so the first argument is swapped in and out around
    // the trap; the kernel preserves every register but eax on this path,
    // and r8-r11 are declared clobbered for kernels that did not.
    unsafe {
        std::arch::asm!(
            "xchg {b}, rbx",
            "int 0x80",
            "xchg {b}, rbx",
            b = inout(reg) a[0] => _,
            inlateout("rax") nr as u64 => ret,
            in("rcx") a[1],
            in("rdx") a[2],
            in("rsi") a[3],
            in("rdi") a[4],
            out("r8") _,
            out("r9") _,
            out("r10") _,
            out("r11") _,
        );
    }
    // The i386 return value is 32 bits: -4095..-1 is an errno.
    let r = ret as u32 as i32;
    if (-4095..0).contains(&r) {
        Err(Errno::from_raw(-r))
    } else {
        Ok(i64::from(r))
    }
}

/// Like `raw`, for a process-creating call (clone, fork): if a child comes
/// into being it exits at once, and the caller reaps it.
pub fn raw_spawning(call: impl Fn() -> Ret) -> Ret {
    let pid = call()?;
    if pid == 0 {
        // The new child: it runs on a copy of this stack (no CLONE_VM, no new
        // stack) and must not return into the probe.
        // SAFETY: _exit only ends the process.
        unsafe { libc::_exit(0) };
    }
    let _ = waitpid(Pid::from_raw(pid as i32), Some(WaitPidFlag::__WALL));
    Ok(pid)
}

/// How a disposable child ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    Exited(i32),
    Signaled(Signal),
}

/// The seconds any child may take: every probe is a handful of syscalls, so a
/// child still running after that is stuck and is killed by its alarm.
const CHILD_SECONDS: u32 = 10;

/// Runs `f` in a forked child and returns the bytes it produced and how it
/// ended. The probe is single-threaded whenever it forks, so the child may
/// allocate. A child that stops (one traced by the probe after
/// PTRACE_TRACEME) is killed.
pub fn in_child(f: impl FnOnce() -> Vec<u8>) -> Result<(Vec<u8>, End), Errno> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    // SAFETY: the probe has no other thread at this point (the thread probe
    // runs in a child of its own), so the child inherits consistent state.
    match unsafe { fork() }? {
        ForkResult::Child => {
            drop(r);
            nix::unistd::alarm::set(CHILD_SECONDS);
            let out = f();
            let _ = write_all(&w, &out);
            // SAFETY: _exit ends the child without running the parent's atexit handlers.
            unsafe { libc::_exit(0) }
        }
        ForkResult::Parent { child } => {
            drop(w);
            let mut out = Vec::new();
            let _ = std::fs::File::from(r).read_to_end(&mut out);
            let end = reap(child)?;
            Ok((out, end))
        }
    }
}

fn write_all(fd: &OwnedFd, mut buf: &[u8]) -> Result<(), Errno> {
    while !buf.is_empty() {
        match nix::unistd::write(fd, buf) {
            Ok(n) => buf = &buf[n..],
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn reap(child: Pid) -> Result<End, Errno> {
    loop {
        match waitpid(child, Some(WaitPidFlag::__WALL)) {
            Ok(WaitStatus::Exited(_, code)) => return Ok(End::Exited(code)),
            Ok(WaitStatus::Signaled(_, sig, _)) => return Ok(End::Signaled(sig)),
            Ok(WaitStatus::Stopped(..)) | Ok(WaitStatus::PtraceEvent(..)) | Ok(WaitStatus::PtraceSyscall(_)) => {
                let _ = kill(child, Signal::SIGKILL);
            }
            Ok(_) => {}
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Runs one call in a disposable child and returns its result.
pub fn ret_in_child(f: impl FnOnce() -> Ret) -> Result<Ret, End> {
    let (out, end) = match in_child(|| encode(f())) {
        Ok(x) => x,
        Err(e) => return Ok(Err(e)),
    };
    decode(&out).ok_or(end)
}

fn encode(r: Ret) -> Vec<u8> {
    let v: i64 = match r {
        Ok(v) => v,
        Err(e) => -(e as i64),
    };
    v.to_le_bytes().to_vec()
}

fn decode(b: &[u8]) -> Option<Ret> {
    let v = i64::from_le_bytes(b.get(..8)?.try_into().ok()?);
    Some(if v < 0 { Err(Errno::from_raw(-v as i32)) } else { Ok(v) })
}

/// Drops every capability of the calling process (effective, permitted,
/// inheritable; the bounding set is left alone), as capset(2) allows any
/// process to.
pub fn drop_capabilities() -> Result<(), Errno> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    let mut header = Header {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: both pointers reference live, correctly laid out structures
    // (capset(2), version 3 takes two data elements).
    let r = unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut Header, data.as_ptr()) };
    if r < 0 {
        return Err(Errno::last());
    }
    // The ambient set is cleared with prctl (it may not exceed the others anyway).
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) };
    Ok(())
}

/// ioctl(fd, TIOCSTI, NULL): the kernel checks the permission (legacy_tiocsti,
/// the caller's controlling terminal, CAP_SYS_ADMIN) before it reads the
/// character, so a permitted call fails with EFAULT and injects nothing.
pub fn tiocsti_null(fd: i32) -> Ret {
    // SAFETY: a NULL argument is never dereferenced in user space; the kernel
    // faults on it.
    let r = unsafe { libc::ioctl(fd, libc::TIOCSTI, std::ptr::null::<u8>()) };
    if r < 0 {
        Err(Errno::last())
    } else {
        Ok(r as i64)
    }
}

/// A file descriptor from a raw syscall result, closed when dropped.
pub fn owned(fd: i64) -> OwnedFd {
    // SAFETY: `fd` was just returned by the kernel and nothing else owns it.
    unsafe { OwnedFd::from_raw_fd(fd as i32) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_survive_the_pipe() {
        assert_eq!(ret_in_child(|| Ok(42)), Ok(Ok(42)));
        assert_eq!(ret_in_child(|| Err(Errno::EPERM)), Ok(Err(Errno::EPERM)));
    }

    #[test]
    fn a_crashing_child_reports_its_signal() {
        let r = ret_in_child(|| {
            // SAFETY: raising a signal in the disposable child.
            unsafe { libc::raise(libc::SIGKILL) };
            Ok(0)
        });
        assert_eq!(r, Err(End::Signaled(Signal::SIGKILL)));
    }

    #[test]
    fn an_unexpected_fork_child_exits_at_once() {
        let r = ret_in_child(|| raw_spawning(|| raw(libc::SYS_clone, [libc::SIGCHLD as u64, 0, 0, 0, 0, 0])));
        assert!(matches!(r, Ok(Ok(pid)) if pid > 0), "{r:?}");
    }

    #[test]
    fn bad_pointers_fault_in_the_kernel() {
        assert_eq!(raw(libc::SYS_mount, [1, 1, 1, 0, 1, 0]), Err(Errno::EFAULT));
    }
}
