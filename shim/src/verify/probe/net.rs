//! Network checks from inside (PROBES.md 21-23): what interfaces the sandbox
//! has, whether it can change its network namespace (an address through
//! rtnetlink, the egress filter through nfnetlink), whether a direct
//! connection to a forbidden address fails at once. What the allowlist proxy
//! answers is `proxy`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use netlink_packet_core::{
    DecodeError, DefaultNla, Emitable, NetlinkDeserializable, NetlinkHeader, NetlinkMessage, NetlinkPayload,
    NetlinkSerializable, NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST,
};
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols, Socket};
use nix::errno::Errno;

use crate::network::nft::TABLE as NFT_TABLE;
use crate::verify::expect::{errno_name, Errnos};
use crate::verify::outcome::Finding;

/// How long a forbidden connection may take to fail. A refusal by the route
/// table is immediate, one by the filter comes with the first ICMP error the
/// kernel lets through (ICMPv6 errors are rate-limited, so a SYN retransmitted
/// after 1 s or 3 s may be the one answered); silence means the packets went out.
pub(super) const DIRECT_TIMEOUT: Duration = Duration::from_secs(4);
/// The address the rtnetlink check tries to add to lo (TEST-NET-3).
const PROBE_ADDRESS: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 77);

/// The interfaces of the sandbox's network namespace: only lo in none and
/// allowlist mode; pasta's interface besides it in public mode.
pub fn interfaces(mode: &str) -> Finding {
    let ifaces = match crate::network::netns::interfaces(std::process::id() as i32) {
        Ok(i) => i,
        Err(e) => return Finding::fail(format!("{e:#}")),
    };
    let others = ifaces.iter().filter(|i| *i != "lo").count();
    let ok = if mode == "public" { others > 0 } else { others == 0 };
    Finding::judge(ok, format!("interfaces: {}", ifaces.join(", ")))
}

/// A netlink payload as bytes: nfnetlink messages, and replies read back.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Raw {
    message_type: u16,
    body: Vec<u8>,
}

impl NetlinkSerializable for Raw {
    fn message_type(&self) -> u16 {
        self.message_type
    }
    fn buffer_len(&self) -> usize {
        self.body.len()
    }
    fn serialize(&self, buffer: &mut [u8]) {
        buffer[..self.body.len()].copy_from_slice(&self.body);
    }
}

impl NetlinkDeserializable for Raw {
    type Error = DecodeError;
    fn deserialize(header: &NetlinkHeader, payload: &[u8]) -> Result<Self, Self::Error> {
        Ok(Self {
            message_type: header.message_type,
            body: payload.to_vec(),
        })
    }
}

fn frame<I: NetlinkSerializable>(payload: I, flags: u16, seq: u32) -> Vec<u8> {
    let mut header = NetlinkHeader::default();
    header.flags = flags;
    header.sequence_number = seq;
    let mut msg = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(payload));
    msg.finalize();
    let mut buf = vec![0; msg.buffer_len()];
    msg.serialize(&mut buf);
    buf
}

/// How the kernel refused a netlink request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Refusal {
    errno: Errno,
    /// At socket(2), before any request: the agent profile admits only
    /// NETLINK_ROUTE sockets, so nfnetlink is refused there.
    at_socket: bool,
}

/// Sends `request` on a new netlink socket of `protocol` and returns the
/// kernel's answer: Ok(()) for an acknowledgement, the refusal otherwise.
fn netlink_exchange(protocol: isize, request: &[u8]) -> Result<Result<(), Refusal>, String> {
    let mut sock = match Socket::new(protocol) {
        Ok(s) => s,
        Err(e) => match e.raw_os_error() {
            Some(errno) => {
                return Ok(Err(Refusal {
                    errno: Errno::from_raw(errno),
                    at_socket: true,
                }))
            }
            None => return Err(format!("open a netlink socket: {e}")),
        },
    };
    sock.bind_auto().map_err(|e| format!("bind a netlink socket: {e}"))?;
    nix::sys::socket::setsockopt(
        &sock,
        nix::sys::socket::sockopt::ReceiveTimeout,
        &nix::sys::time::TimeVal::new(2, 0),
    )
    .map_err(|e| format!("set a receive timeout: {}", errno_name(e)))?;
    let kernel = netlink_sys::SocketAddr::new(0, 0);
    sock.send_to(request, &kernel, 0)
        .map_err(|e| format!("send the request: {e}"))?;
    let (reply, _) = sock
        .recv_from_full()
        .map_err(|e| format!("no answer from the kernel: {e}"))?;
    let msg = NetlinkMessage::<Raw>::deserialize(&reply).map_err(|e| format!("parse the answer: {e}"))?;
    match msg.payload {
        NetlinkPayload::Error(e) => match e.code {
            None => Ok(Ok(())),
            Some(code) => Ok(Err(Refusal {
                errno: Errno::from_raw(code.get().abs()),
                at_socket: false,
            })),
        },
        other => Err(format!("unexpected answer {other:?}")),
    }
}

fn judge_tamper(what: &str, r: Result<Result<(), Refusal>, String>) -> Finding {
    match r {
        Ok(Err(Refusal {
            errno: Errno::EPERM,
            at_socket,
        })) => Finding::pass(if at_socket {
            "refused: EPERM at socket()"
        } else {
            "refused: EPERM"
        }),
        // A kernel without the protocol says nothing of the sandbox.
        Ok(Err(Refusal { errno, at_socket: true })) => {
            Finding::fail(format!("open a netlink socket: {}", errno_name(errno)))
        }
        Ok(Err(Refusal { errno, .. })) => Finding::fail(format!(
            "{what}: the kernel took the request and answered {}",
            errno_name(errno)
        )),
        Ok(Ok(())) => Finding::fail(format!("{what}: done")),
        Err(e) => Finding::fail(e),
    }
}

/// RTM_NEWADDR of 203.0.113.77/32 on lo: `ip addr add` without the tool.
pub fn netlink_address() -> Finding {
    // SAFETY: a NUL-terminated name; 0 means no such interface.
    let index = match unsafe { libc::if_nametoindex(c"lo".as_ptr()) } {
        0 => 1,
        i => i,
    };
    let mut msg = AddressMessage::default();
    msg.header.family = AddressFamily::Inet;
    msg.header.prefix_len = 32;
    msg.header.index = index;
    msg.attributes = vec![
        AddressAttribute::Local(IpAddr::V4(PROBE_ADDRESS)),
        AddressAttribute::Address(IpAddr::V4(PROBE_ADDRESS)),
    ];
    let request = frame(
        RouteNetlinkMessage::NewAddress(msg),
        NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
        1,
    );
    judge_tamper(
        &format!("address {PROBE_ADDRESS} added to lo"),
        netlink_exchange(protocols::NETLINK_ROUTE, &request),
    )
}

// nfnetlink (linux/netfilter/nfnetlink.h); libc has all but the attribute.
const NFNL_SUBSYS_NFTABLES: u16 = libc::NFNL_SUBSYS_NFTABLES as u16;
const NFTA_TABLE_NAME: u16 = 1;

/// struct nfgenmsg: family, version, resource id (big-endian).
fn nfgenmsg(family: i32, res_id: u16) -> Vec<u8> {
    let mut b = vec![family as u8, libc::NFNETLINK_V0 as u8];
    b.extend_from_slice(&res_id.to_be_bytes());
    b
}

/// One nftables transaction deleting claude-shim's table: what `nft delete
/// table inet claude_shim` sends.
fn nft_delete_batch() -> Vec<u8> {
    let mut del = nfgenmsg(libc::NFPROTO_INET, 0);
    let name = DefaultNla::new(NFTA_TABLE_NAME, format!("{NFT_TABLE}\0").into_bytes());
    let at = del.len();
    del.resize(at + name.buffer_len(), 0);
    name.emit(&mut del[at..]);
    let mut out = frame(
        Raw {
            message_type: libc::NFNL_MSG_BATCH_BEGIN as u16,
            body: nfgenmsg(libc::AF_UNSPEC, NFNL_SUBSYS_NFTABLES),
        },
        NLM_F_REQUEST,
        1,
    );
    out.extend(frame(
        Raw {
            message_type: (NFNL_SUBSYS_NFTABLES << 8) | libc::NFT_MSG_DELTABLE as u16,
            body: del,
        },
        NLM_F_REQUEST | NLM_F_ACK,
        2,
    ));
    out.extend(frame(
        Raw {
            message_type: libc::NFNL_MSG_BATCH_END as u16,
            body: nfgenmsg(libc::AF_UNSPEC, NFNL_SUBSYS_NFTABLES),
        },
        NLM_F_REQUEST,
        3,
    ));
    out
}

pub fn nftables_delete() -> Finding {
    judge_tamper(
        &format!("table inet {NFT_TABLE} deleted"),
        netlink_exchange(protocols::NETLINK_NETFILTER, &nft_delete_batch()),
    )
}

/// A TCP connection to `addr` must fail at once with one of `refused_with`.
pub fn direct(addr: &SocketAddr, refused_with: &Errnos) -> Finding {
    let start = Instant::now();
    let r = TcpStream::connect_timeout(addr, DIRECT_TIMEOUT);
    let ms = start.elapsed().as_millis();
    let e = match r {
        Ok(_) => return Finding::fail(format!("connected: {addr} answered")),
        Err(e) => e,
    };
    if e.kind() == std::io::ErrorKind::TimedOut {
        return Finding::fail(format!(
            "no refusal within {} s: the packets left the sandbox",
            DIRECT_TIMEOUT.as_secs()
        ));
    }
    match e.raw_os_error().map(Errno::from_raw) {
        Some(errno) if refused_with.contains(errno) => {
            Finding::pass(format!("refused: {} in {ms} ms", errno_name(errno)))
        }
        Some(errno) => Finding::fail(format!("unexpected: {} in {ms} ms", errno_name(errno))),
        None => Finding::fail(format!("unexpected: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nft_batch_is_framed_as_nft_sends_it() {
        let b = nft_delete_batch();
        // Three messages: begin (20 bytes), deltable (16 + 4 + 16), end (20).
        assert_eq!(b.len(), 20 + 36 + 20);
        let len = |at: usize| u32::from_ne_bytes(b[at..at + 4].try_into().unwrap()) as usize;
        let ty = |at: usize| u16::from_ne_bytes(b[at + 4..at + 6].try_into().unwrap());
        assert_eq!((len(0), ty(0)), (20, 0x10));
        assert_eq!(
            &b[16..20],
            &[0, 0, 0, 10],
            "AF_UNSPEC, v0, NFNL_SUBSYS_NFTABLES big-endian"
        );
        assert_eq!((len(20), ty(20)), (36, 0x0a02));
        assert_eq!(b[36], 1, "NFPROTO_INET");
        assert_eq!(&b[44..56], b"claude_shim\0");
        assert_eq!((len(56), ty(56)), (20, 0x11));
    }

    /// A network namespace of the calling child's own, where the tamper
    /// checks change nothing of the host's (and, not root, a user namespace).
    fn own_network_namespace() -> nix::Result<()> {
        let mut flags = nix::sched::CloneFlags::CLONE_NEWNET;
        if !nix::unistd::geteuid().is_root() {
            flags |= nix::sched::CloneFlags::CLONE_NEWUSER;
        }
        nix::sched::unshare(flags)
    }

    /// In a network namespace of its own, the tamper checks fail while the
    /// child holds CAP_NET_ADMIN over it (the kernel takes the change) and
    /// pass once it has dropped every capability.
    #[test]
    fn tamper_checks_fail_where_the_change_is_permitted() {
        let r = crate::verify::probe::sys::ret_in_child(|| {
            own_network_namespace()?;
            let capable = [netlink_address().pass, nftables_delete().pass];
            crate::verify::probe::sys::drop_capabilities()?;
            let without = [netlink_address().pass, nftables_delete().pass];
            Ok(match (capable, without) {
                ([Some(false), Some(false)], [Some(true), Some(true)]) => 1,
                _ => 0,
            })
        });
        assert_eq!(r, Ok(Ok(1)));
    }

    /// Under a filter that refuses nfnetlink sockets, as the agent profile
    /// does, the deletion is refused before any request: that passes, and
    /// says where.
    #[test]
    fn a_refusal_at_socket_passes_and_says_so() {
        use libseccomp::{ScmpAction, ScmpArgCompare, ScmpCompareOp, ScmpFilterContext, ScmpSyscall};
        let r = crate::verify::probe::sys::ret_in_child(|| {
            own_network_namespace()?;
            let mut ctx = ScmpFilterContext::new(ScmpAction::Allow).map_err(|_| Errno::EIO)?;
            ctx.add_rule_conditional(
                ScmpAction::Errno(libc::EPERM),
                ScmpSyscall::from_name("socket").map_err(|_| Errno::EIO)?,
                &[
                    ScmpArgCompare::new(0, ScmpCompareOp::Equal, libc::AF_NETLINK as u64),
                    ScmpArgCompare::new(2, ScmpCompareOp::Equal, protocols::NETLINK_NETFILTER as u64),
                ],
            )
            .map_err(|_| Errno::EIO)?;
            ctx.load().map_err(|_| Errno::EIO)?;
            // CAP_NET_ADMIN is still held: only the filter stands in the way.
            let f = nftables_delete();
            Ok(i64::from(
                f.pass == Some(true) && f.observed == "refused: EPERM at socket()",
            ))
        });
        assert_eq!(r, Ok(Ok(1)));
    }

    #[test]
    fn a_closed_port_on_loopback_is_refused_and_judged() {
        // An address of loopback no other test binds: after the drop, a
        // listener of a test running beside this one may take the same port
        // on 127.0.0.1 and answer (or swallow) the connection.
        let l = std::net::TcpListener::bind("127.0.0.77:0").unwrap();
        let addr = l.local_addr().unwrap();
        let refused = Errnos::of(&[Errno::ECONNREFUSED]);
        // A listener answers: a direct check must fail.
        assert_eq!(direct(&addr, &refused).pass, Some(false));
        drop(l);
        assert_eq!(direct(&addr, &refused).pass, Some(true));
        assert_eq!(direct(&addr, &Errnos::of(&[Errno::ENETUNREACH])).pass, Some(false));
    }
}
