//! The container's network namespace seen from the host: opening it (and its
//! user namespace when rootless), running a program or a few system calls
//! inside it, and reading its interfaces through /proc/<pid>/net,
//! which shows the namespace of that pid without entering it.

use std::fs;
use std::net::SocketAddrV4;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use anyhow::{anyhow, bail, Context, Result};

/// The namespaces of a container's init, opened from the host.
pub struct NsFds {
    pub user: Option<OwnedFd>,
    pub net: OwnedFd,
}

/// The descriptor numbers a helper finds the namespaces on (3 is its ready pipe).
pub const HELPER_NET_FD: RawFd = 4;
pub const HELPER_USER_FD: RawFd = 5;

impl NsFds {
    /// Opens /proc/<pid>/ns/net. Root only: until it execs, the init is not
    /// dumpable, and an unprivileged runtime may not open its namespaces
    /// (an unprivileged runtime gets them from the hook, see `hook`).
    pub fn open_proc(pid: i32) -> Result<Self> {
        let path = format!("/proc/{pid}/ns/net");
        let net: OwnedFd = fs::File::open(&path).with_context(|| format!("open {path}"))?.into();
        Ok(Self { user: None, net })
    }

    /// The descriptors a helper was started with.
    pub fn inherited(join_user: bool) -> Self {
        // SAFETY: the runtime hands these descriptors over at these numbers.
        unsafe {
            Self {
                user: join_user.then(|| OwnedFd::from_raw_fd(HELPER_USER_FD)),
                net: OwnedFd::from_raw_fd(HELPER_NET_FD),
            }
        }
    }

    /// The descriptors to hand a helper, in the order `inherited` expects.
    pub fn for_helper(&self) -> Vec<&OwnedFd> {
        let mut v = vec![&self.net];
        v.extend(self.user.as_ref());
        v
    }

    fn raw(&self) -> (RawFd, RawFd) {
        (
            self.user.as_ref().map(|f| f.as_raw_fd()).unwrap_or(-1),
            self.net.as_raw_fd(),
        )
    }
}

/// Enters the namespaces. Between fork and exec: async-signal-safe only.
unsafe fn enter(user: RawFd, net: RawFd) -> std::io::Result<()> {
    if user >= 0 && libc::setns(user, libc::CLONE_NEWUSER) != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if libc::setns(net, libc::CLONE_NEWNET) != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Moves this process into the namespaces, for good: every socket it makes
/// from then on is made there (sockets it already has stay where they were
/// made). Joining a user namespace needs a single-threaded process.
pub fn join(ns: &NsFds) -> Result<()> {
    let (user, net) = ns.raw();
    // SAFETY: setns on descriptors we hold.
    unsafe { enter(user, net) }.context("setns")
}

/// Runs `program args` inside the namespace, `stdin` on its standard input.
pub fn run_in(ns: &NsFds, program: &Path, args: &[&str], stdin: Option<&[u8]>) -> Result<Output> {
    use std::io::Write;
    let (user, net) = ns.raw();
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: setns only.
    unsafe {
        cmd.pre_exec(move || enter(user, net));
    }
    let mut child = cmd.spawn().with_context(|| format!("execute {}", program.display()))?;
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        match pipe.write_all(input) {
            // It stopped reading: its exit status and stderr tell why.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            r => r.with_context(|| format!("write to {}", program.display()))?,
        }
    }
    child
        .wait_with_output()
        .with_context(|| format!("wait for {}", program.display()))
}

/// Which step of a namespace child failed, for the error message.
const STEPS: [&str; 7] = [
    "",
    "join the container's user namespace",
    "join the container's network namespace",
    "bring up lo",
    "create a listening socket",
    "bind 127.0.0.1",
    "listen",
];

/// Forks a child that runs `f` (system calls only: no allocation, no locks)
/// and returns the `count` descriptors it sends back, or the step and errno
/// it failed with.
fn in_child(count: usize, f: impl FnOnce(RawFd)) -> Result<Vec<OwnedFd>> {
    let mut pair = [0 as RawFd; 2];
    // SAFETY: pair is a valid two-element array.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            pair.as_mut_ptr(),
        )
    } != 0
    {
        return Err(std::io::Error::last_os_error()).context("create a socket pair");
    }
    // SAFETY: both descriptors were just created and are ours.
    let (parent_end, child_end) = unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
    let child_fd = child_end.as_raw_fd();
    // SAFETY: the child only runs `f`, which ends in _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error()).context("fork");
    }
    if pid == 0 {
        f(child_fd);
        // SAFETY: the child ends here whatever `f` did.
        unsafe { libc::_exit(3) }
    }
    drop(child_end);
    let result = receive_fds(&parent_end, count);
    let mut status = 0;
    // SAFETY: pid is our child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    result
}

/// Reports a failed step and errno to the parent, then exits.
unsafe fn child_fail(out: RawFd, step: u8) -> ! {
    let errno = *libc::__errno_location();
    let mut msg = [0u8; 5];
    msg[0] = step;
    msg[1..].copy_from_slice(&errno.to_ne_bytes());
    libc::send(out, msg.as_ptr().cast(), msg.len(), 0);
    libc::_exit(1)
}

/// Sends one byte (0: success) and `fds` to the parent, then exits.
unsafe fn child_send(out: RawFd, fds: &[RawFd]) -> ! {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut cbuf = [0u64; 8];
    let mut msg: libc::msghdr = std::mem::zeroed();
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        let len = std::mem::size_of_val(fds) as u32;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(len) as usize;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(len) as usize;
        std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(cmsg).cast::<RawFd>(), fds.len());
    }
    if libc::sendmsg(out, &msg, 0) < 0 {
        libc::_exit(2);
    }
    libc::_exit(0)
}

/// Brings `lo` up inside the namespace (libcontainer leaves it down) and
/// returns listening TCP sockets bound there to `listen`. The sockets are
/// created by a short-lived child that entered the namespace; they stay in
/// it, while whoever accepts on them lives in the host's.
pub fn loopback(ns: &NsFds, listen: &[SocketAddrV4]) -> Result<Vec<OwnedFd>> {
    const MAX: usize = 4;
    if listen.len() > MAX {
        bail!("listen on more than {MAX} addresses");
    }
    let (user, net) = ns.raw();
    // Everything the child needs is built before the fork: it must not allocate.
    // SAFETY: plain C structs, zero is a valid value for each.
    let mut addrs: [libc::sockaddr_in; MAX] = unsafe { std::mem::zeroed() };
    for (i, a) in listen.iter().enumerate() {
        addrs[i].sin_family = libc::AF_INET as libc::sa_family_t;
        addrs[i].sin_port = a.port().to_be();
        addrs[i].sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
    }
    let count = listen.len();
    // SAFETY: as above.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (i, b) in b"lo".iter().enumerate() {
        ifr.ifr_name[i] = *b as libc::c_char;
    }
    in_child(count, move |out| {
        // SAFETY: system calls on the stack data above (we are a forked child).
        unsafe { loopback_child(user, net, &mut ifr, &addrs[..count], out) }
    })
}

unsafe fn loopback_child(user: RawFd, net: RawFd, ifr: &mut libc::ifreq, addrs: &[libc::sockaddr_in], out: RawFd) -> ! {
    if user >= 0 && libc::setns(user, libc::CLONE_NEWUSER) != 0 {
        child_fail(out, 1);
    }
    if libc::setns(net, libc::CLONE_NEWNET) != 0 {
        child_fail(out, 2);
    }
    let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
    if s < 0 || libc::ioctl(s, libc::SIOCGIFFLAGS, ifr as *mut libc::ifreq) != 0 {
        child_fail(out, 3);
    }
    ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
    if libc::ioctl(s, libc::SIOCSIFFLAGS, ifr as *mut libc::ifreq) != 0 {
        child_fail(out, 3);
    }
    // Read it back: the flag must be set now.
    if libc::ioctl(s, libc::SIOCGIFFLAGS, ifr as *mut libc::ifreq) != 0
        || ifr.ifr_ifru.ifru_flags & libc::IFF_UP as libc::c_short == 0
    {
        child_fail(out, 3);
    }
    let mut fds = [0 as RawFd; 4];
    for (i, a) in addrs.iter().enumerate() {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            child_fail(out, 4);
        }
        let one: libc::c_int = 1;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        if libc::bind(
            fd,
            (a as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        ) != 0
        {
            child_fail(out, 5);
        }
        if libc::listen(fd, 512) != 0 {
            child_fail(out, 6);
        }
        fds[i] = fd;
    }
    child_send(out, &fds[..addrs.len()])
}

fn receive_fds(sock: &OwnedFd, count: usize) -> Result<Vec<OwnedFd>> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    let mut buf = [0u8; 8];
    let mut fds = Vec::new();
    let n = {
        let mut iov = [std::io::IoSliceMut::new(&mut buf)];
        let mut space = nix::cmsg_space!([RawFd; 4]);
        let msg = recvmsg::<()>(sock.as_raw_fd(), &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC)
            .context("receive")?;
        for c in msg.cmsgs().context("read the message")? {
            if let ControlMessageOwned::ScmRights(list) = c {
                // SAFETY: the kernel installed these descriptors for us.
                fds.extend(list.into_iter().map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }));
            }
        }
        msg.bytes
    };
    match (n, buf[0]) {
        (0, _) => bail!("nothing was sent"),
        (1, 0) | (2, b'n') if fds.len() == count => Ok(fds),
        (1, 0) | (2, b'n') => bail!("received {} descriptors, not {count}", fds.len()),
        (5, step) => {
            let errno = i32::from_ne_bytes([buf[1], buf[2], buf[3], buf[4]]);
            let what = STEPS.get(step as usize).copied().unwrap_or("set up the namespace");
            Err(std::io::Error::from_raw_os_error(errno)).context(what.to_owned())
        }
        _ => bail!("a malformed message arrived"),
    }
}

/// The socket the hook sends the namespaces to, in the container's state directory.
const NS_SOCKET: &str = "ns.sock";

/// Binds the datagram socket the createContainer hook will send to. The path
/// goes through /proc/self/fd so that a long state directory still fits in sun_path.
pub fn bind_ns_socket(state_dir: &Path) -> Result<OwnedFd> {
    let dir = fs::File::open(state_dir).with_context(|| format!("open {}", state_dir.display()))?;
    let path = format!("/proc/self/fd/{}/{NS_SOCKET}", dir.as_raw_fd());
    let sock = std::os::unix::net::UnixDatagram::bind(&path)
        .with_context(|| format!("bind {}", state_dir.join(NS_SOCKET).display()))?;
    sock.set_nonblocking(true)?;
    Ok(sock.into())
}

/// The createContainer hook (`__network hook`): libcontainer runs it inside
/// the container's namespaces, after they exist and before pivot_root. It is
/// a fresh exec, hence dumpable, so it may open its own namespaces, and sends
/// them to the runtime's socket.
pub fn hook(state_dir: &Path) -> Result<()> {
    use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags, UnixAddr};
    // The container's state arrives on stdin; it is not needed.
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
    let dir = fs::File::open(state_dir).with_context(|| format!("open {}", state_dir.display()))?;
    let net = fs::File::open("/proc/self/ns/net").context("open /proc/self/ns/net")?;
    let user = fs::File::open("/proc/self/ns/user").context("open /proc/self/ns/user")?;
    let sock = std::os::unix::net::UnixDatagram::unbound().context("create a socket")?;
    let addr = UnixAddr::new(format!("/proc/self/fd/{}/{NS_SOCKET}", dir.as_raw_fd()).as_str())?;
    let fds = [net.as_raw_fd(), user.as_raw_fd()];
    sendmsg(
        sock.as_raw_fd(),
        &[std::io::IoSlice::new(b"ns")],
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        Some(&addr),
    )
    .with_context(|| format!("send the namespaces to {}", state_dir.join(NS_SOCKET).display()))?;
    Ok(())
}

nix::ioctl_none_bad!(ns_get_userns, 0xb701);

/// Takes the namespaces the hook sent, and checks they belong together: the
/// network namespace is owned by the user namespace, which is not ours.
pub fn receive_ns(sock: &OwnedFd) -> Result<NsFds> {
    let mut fds = receive_fds(sock, 2).context("receive the container's namespaces from its createContainer hook")?;
    let user = fds.pop().expect("two descriptors");
    let net = fds.pop().expect("two descriptors");
    // SAFETY: NS_GET_USERNS takes no argument and returns a new descriptor.
    let owner = unsafe { ns_get_userns(net.as_raw_fd()) }.context("find the owner of the network namespace")?;
    // SAFETY: the kernel just returned this descriptor.
    let owner = unsafe { OwnedFd::from_raw_fd(owner) };
    if ns_inode(&owner)? != ns_inode(&user)? {
        bail!("the hook sent a network namespace its user namespace does not own");
    }
    if ns_inode(&user)? == ns_path_inode("/proc/self/ns/user")? {
        bail!("the hook sent the runtime's own user namespace");
    }
    Ok(NsFds { user: Some(user), net })
}

/// The inode of a namespace, to compare namespaces.
pub fn ns_inode(fd: &OwnedFd) -> Result<u64> {
    let st = nix::sys::stat::fstat(fd.as_raw_fd()).context("stat a namespace")?;
    Ok(st.st_ino)
}

/// The inode of a namespace file such as /proc/self/ns/net.
pub fn ns_path_inode(path: &str) -> Result<u64> {
    Ok(fs::metadata(path).with_context(|| format!("stat {path}"))?.ino())
}

/// Interface names in the namespace of `pid`.
pub fn interfaces(pid: i32) -> Result<Vec<String>> {
    let path = format!("/proc/{pid}/net/dev");
    let text = fs::read_to_string(&path).with_context(|| format!("read {path}"))?;
    Ok(text
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect())
}

/// Whether this process may read and write /dev/net/tun (pasta needs it in
/// the namespace it joins; without root it goes by the file's mode).
pub fn tun_accessible() -> Result<()> {
    nix::unistd::access("/dev/net/tun", nix::unistd::AccessFlags::R_OK | nix::unistd::AccessFlags::W_OK)
        .map_err(|e| anyhow!("open /dev/net/tun: {e} (rootless public mode needs it mode 0666, as Debian's udev sets it; hack/setup does)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_namespace_lists_lo() {
        let me = std::process::id() as i32;
        assert!(interfaces(me).unwrap().contains(&"lo".to_owned()));
    }
}
