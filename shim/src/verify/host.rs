//! What only the host can see, collected before the probe runs: its
//! namespaces, its process and session, its addresses and gateways, and the
//! canary port a sandbox must not reach.

use std::collections::BTreeMap;
use std::path::Path;

use super::expect;

/// What only the host can see and the probe compares against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFacts {
    /// Namespace kind -> inode of the calling process's namespace.
    pub namespaces: BTreeMap<String, u64>,
    /// The calling process: alive while the probe runs.
    pub pid: i32,
    /// The calling process's session.
    pub sid: i32,
    /// st_dev of the host's /dev/pts, if it has one.
    pub pts_dev: Option<u64>,
    /// The host's addresses (loopback and link-local left out) and gateways:
    /// the sandbox must reach none of them.
    pub addresses: Vec<std::net::IpAddr>,
    pub gateways: Vec<std::net::IpAddr>,
    /// The port a `Canary` listens on, on every host address loopback
    /// included, while the probe runs: a connection the sandbox gets to it
    /// is one that left the sandbox. `canary_v6`: also on the IPv6 addresses.
    pub canary_port: u16,
    pub canary_v6: bool,
}

impl HostFacts {
    pub fn collect(canary: &Canary) -> Self {
        let mut namespaces = BTreeMap::new();
        for kind in expect::NAMESPACE_KINDS {
            if let Some(inode) = namespace_inode(Path::new("/proc/self/ns").join(kind).as_path()) {
                namespaces.insert((*kind).to_owned(), inode);
            }
        }
        Self {
            namespaces,
            pid: std::process::id() as i32,
            sid: nix::unistd::getsid(None).map(|p| p.as_raw()).unwrap_or(0),
            pts_dev: std::fs::metadata("/dev/pts").ok().map(|m| {
                use std::os::unix::fs::MetadataExt;
                m.dev()
            }),
            addresses: crate::network::routing::host_addresses()
                .into_iter()
                .filter(|a| !a.is_loopback() && !is_link_local(a))
                .collect(),
            gateways: crate::network::routing::routes("self")
                .iter()
                .filter_map(|r| r.gateway)
                .filter(|a| !is_link_local(a))
                .collect(),
            canary_port: canary.port,
            canary_v6: canary.v6,
        }
    }
}

/// fe80::/10 needs a scope to connect to; 169.254/16 is probed as metadata.
fn is_link_local(a: &std::net::IpAddr) -> bool {
    match a {
        std::net::IpAddr::V4(v4) => v4.is_link_local(),
        std::net::IpAddr::V6(v6) => v6.is_unicast_link_local(),
    }
}

/// A TCP listener on every host address (IPv4 and IPv6, loopback included)
/// for as long as the probe runs. Nothing accepts: the kernel completes a
/// handshake on its own, so a sandbox that reaches it sees `connect` succeed.
pub struct Canary {
    _listeners: Vec<std::net::TcpListener>,
    pub port: u16,
    /// Listening on IPv6 too; false only where the host has no IPv6.
    pub v6: bool,
}

impl Canary {
    pub fn open() -> std::io::Result<Self> {
        let v4 = std::net::TcpListener::bind("0.0.0.0:0")?;
        let port = v4.local_addr()?.port();
        let mut listeners = vec![v4];
        // The same port on IPv6 (a dual-stack bind of [::] would collide with
        // the IPv4 one). Any failure but a host without IPv6 refuses: the
        // IPv6 checks would lose their canary.
        let v6 = match bind_v6_only(port) {
            Ok(l) => {
                listeners.push(l);
                true
            }
            Err(nix::errno::Errno::EAFNOSUPPORT | nix::errno::Errno::EADDRNOTAVAIL) => false,
            Err(e) => return Err(std::io::Error::from(e)),
        };
        Ok(Self {
            _listeners: listeners,
            port,
            v6,
        })
    }
}

fn bind_v6_only(port: u16) -> nix::Result<std::net::TcpListener> {
    use nix::sys::socket::{bind, listen, setsockopt, socket, sockopt, AddressFamily, Backlog, SockFlag, SockType};
    let fd = socket(AddressFamily::Inet6, SockType::Stream, SockFlag::SOCK_CLOEXEC, None)?;
    setsockopt(&fd, sockopt::Ipv6V6Only, &true)?;
    let addr = std::net::SocketAddrV6::new(std::net::Ipv6Addr::UNSPECIFIED, port, 0, 0);
    bind(
        std::os::fd::AsRawFd::as_raw_fd(&fd),
        &nix::sys::socket::SockaddrIn6::from(addr),
    )?;
    listen(&fd, Backlog::new(16)?)?;
    Ok(std::net::TcpListener::from(fd))
}

/// The inode of a namespace file ("pid:[4026531836]").
pub fn namespace_inode(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| m.ino())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_facts_see_this_process() {
        let canary = Canary::open().unwrap();
        let f = HostFacts::collect(&canary);
        assert_eq!(f.canary_port, canary.port);
        assert_eq!(f.pid, std::process::id() as i32);
        assert!(f.namespaces.contains_key("pid") && f.namespaces.contains_key("mnt"));
        // The session as the kernel reports it (field 6 of /proc/self/stat; 0 when the
        // session leader lives outside this pid namespace, as under some CI runners).
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
        let session: i32 = after_comm.split(' ').nth(3).unwrap().parse().unwrap();
        assert_eq!(f.sid, session);
    }
}
