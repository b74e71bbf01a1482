//! Routes, addresses and resolvers: the host's, or a namespace's read through
//! /proc/<pid>/net without entering it. What the egress filter and the proxy
//! count as local, and whether pasta's routes are in place.

use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// One route of the main table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub iface: String,
    pub dest: IpNet,
    pub gateway: Option<IpAddr>,
}

/// /proc/<pid>/net/route: addresses are the kernel's __be32 printed as a
/// host-order integer, so the bytes come back with to_ne_bytes.
pub fn parse_route_v4(text: &str) -> Vec<Route> {
    let hex = |s: &str| u32::from_str_radix(s, 16).ok().map(|v| Ipv4Addr::from(v.to_ne_bytes()));
    let mut out = Vec::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 {
            continue;
        }
        let (Some(dest), Some(gw), Some(mask)) = (hex(f[1]), hex(f[2]), hex(f[7])) else {
            continue;
        };
        let flags = u32::from_str_radix(f[3], 16).unwrap_or(0);
        let prefix = u32::from_be_bytes(mask.octets()).leading_ones() as u8;
        let Ok(net) = ipnet::Ipv4Net::new(dest, prefix) else {
            continue;
        };
        out.push(Route {
            iface: f[0].to_owned(),
            dest: IpNet::V4(net),
            gateway: (flags & libc::RTF_GATEWAY as u32 != 0).then_some(IpAddr::V4(gw)),
        });
    }
    out
}

/// /proc/<pid>/net/ipv6_route: dest, dest_plen, src, src_plen, next_hop, metric, refcnt, use, flags, iface.
pub fn parse_route_v6(text: &str) -> Vec<Route> {
    let addr = |s: &str| u128::from_str_radix(s, 16).ok().map(Ipv6Addr::from);
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 10 {
            continue;
        }
        let (Some(dest), Ok(plen), Some(hop)) = (addr(f[0]), u8::from_str_radix(f[1], 16), addr(f[4])) else {
            continue;
        };
        let Ok(net) = ipnet::Ipv6Net::new(dest, plen) else {
            continue;
        };
        out.push(Route {
            iface: f[9].to_owned(),
            dest: IpNet::V6(net),
            gateway: (!hop.is_unspecified()).then_some(IpAddr::V6(hop)),
        });
    }
    out
}

pub fn routes(pid: &str) -> Vec<Route> {
    let mut out = parse_route_v4(&fs::read_to_string(format!("/proc/{pid}/net/route")).unwrap_or_default());
    out.extend(parse_route_v6(
        &fs::read_to_string(format!("/proc/{pid}/net/ipv6_route")).unwrap_or_default(),
    ));
    out
}

pub fn has_default_route(routes: &[Route], v6: bool) -> bool {
    routes
        .iter()
        .any(|r| r.dest.prefix_len() == 0 && r.dest.addr().is_ipv6() == v6 && r.iface != "lo")
}

/// The networks a route table says are local: connected subnets (routes
/// without a gateway) and the gateways themselves. Loopback routes and the
/// default route are not networks to block.
pub fn local_networks(routes: &[Route]) -> Vec<IpNet> {
    let mut out = Vec::new();
    for r in routes.iter().filter(|r| r.iface != "lo") {
        if let Some(gw) = r.gateway {
            out.push(IpNet::from(gw));
        } else if r.dest.prefix_len() > 0 {
            out.push(r.dest.trunc());
        }
    }
    out
}

/// Every address configured on the host's interfaces (getifaddrs(3)).
pub fn host_addresses() -> Vec<IpAddr> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills head with a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: cur points into the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr points to a sockaddr of the family it names.
            unsafe {
                match (*ifa.ifa_addr).sa_family as i32 {
                    libc::AF_INET => {
                        let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                        out.push(IpAddr::V4(Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes())));
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                        out.push(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)));
                    }
                    _ => {}
                }
            }
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: head came from getifaddrs.
    unsafe { libc::freeifaddrs(head) };
    out
}

/// The nameservers of a resolv.conf (zone ids dropped).
pub fn nameservers(resolv_conf: &str) -> Vec<IpAddr> {
    resolv_conf
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            (words.next() == Some("nameserver")).then(|| words.next()).flatten()
        })
        .filter_map(|a| a.split('%').next().and_then(|a| a.parse().ok()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_routes_parse() {
        let text = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
            eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
            eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        let r = parse_route_v4(text);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].dest, "0.0.0.0/0".parse::<IpNet>().unwrap());
        assert_eq!(r[0].gateway, Some("192.0.2.1".parse().unwrap()));
        assert_eq!(r[1].dest, "192.0.2.0/24".parse::<IpNet>().unwrap());
        assert_eq!(r[1].gateway, None);
        assert!(has_default_route(&r, false));
        assert!(!has_default_route(&r, true));
        assert_eq!(
            local_networks(&r),
            vec![
                "192.0.2.1/32".parse::<IpNet>().unwrap(),
                "192.0.2.0/24".parse().unwrap()
            ]
        );
    }

    #[test]
    fn ipv6_routes_parse() {
        let text = "fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0\n\
            00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000001 00000000 00000003     eth0\n\
            00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n";
        let r = parse_route_v6(text);
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].dest, "fd00::/64".parse::<IpNet>().unwrap());
        assert_eq!(r[1].gateway, Some("fd00::1".parse().unwrap()));
        assert!(has_default_route(&r, true), "the lo unreachable route does not count");
        assert_eq!(
            local_networks(&r),
            vec!["fd00::/64".parse::<IpNet>().unwrap(), "fd00::1/128".parse().unwrap()]
        );
    }

    #[test]
    fn nameservers_parse() {
        let text = "# comment\nsearch x\nnameserver 10.255.255.53\nnameserver fe80::1%eth0\nnameserver bad\n";
        assert_eq!(
            nameservers(text),
            vec!["10.255.255.53".parse::<IpAddr>().unwrap(), "fe80::1".parse().unwrap()]
        );
    }
}
