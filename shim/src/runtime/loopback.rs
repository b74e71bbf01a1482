//! Brings up the loopback interface of a network namespace the runtime created,
//! between `create` and `start`. runc and crun do this for every new network
//! namespace (its `lo` starts down), and engines rely on it: `podman
//! --network=none` and `ctr run` without a CNI leave networking to the runtime,
//! and a workload that talks to 127.0.0.1 must work as it does under runc.
//! libcontainer 0.7 leaves `lo` down.

use std::ffi::CString;

use anyhow::{bail, Result};
use nix::unistd::Pid;

/// Joins the network namespace of `pid` in a short-lived child and sets `lo`
/// up there. Root only: before its execve the init is not dumpable, so only a
/// caller with CAP_SYS_PTRACE may open its /proc/<pid>/ns files. A network
/// namespace owned by a user namespace is joined the same way, since root holds
/// every capability in the user namespaces below its own.
pub fn bring_up(pid: Pid) -> Result<()> {
    // Prepared before fork: the child only makes system calls.
    let net_path = CString::new(format!("/proc/{pid}/ns/net")).expect("a /proc path has no NUL");
    // SAFETY: the child calls only async-signal-safe functions (open, setns,
    // socket, ioctl, _exit) and touches no memory shared with other threads.
    match unsafe { nix::unistd::fork() }? {
        nix::unistd::ForkResult::Child => {
            let code = unsafe { child(&net_path) };
            unsafe { libc::_exit(code) }
        }
        nix::unistd::ForkResult::Parent { child } => match nix::sys::wait::waitpid(child, None)? {
            nix::sys::wait::WaitStatus::Exited(_, 0) => Ok(()),
            nix::sys::wait::WaitStatus::Exited(_, errno) => bail!(
                "bring up lo in the network namespace of pid {pid}: {}",
                std::io::Error::from_raw_os_error(errno)
            ),
            other => bail!("bring up lo in the network namespace of pid {pid}: helper ended with {other:?}"),
        },
    }
}

/// Returns 0, or the errno of the step that failed.
unsafe fn child(net: &CString) -> i32 {
    let errno = || std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
    let fd = libc::open(net.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
    if fd < 0 || libc::setns(fd, libc::CLONE_NEWNET) != 0 {
        return errno();
    }
    let sock = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
    if sock < 0 {
        return errno();
    }
    let mut ifr: libc::ifreq = std::mem::zeroed();
    for (dst, src) in ifr.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    if libc::ioctl(sock, libc::SIOCGIFFLAGS, &mut ifr) != 0 {
        return errno();
    }
    ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
    if libc::ioctl(sock, libc::SIOCSIFFLAGS, &ifr) != 0 {
        return errno();
    }
    0
}
