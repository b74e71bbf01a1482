//! The address ranges no mode reaches unless an allow_cidrs entry punches
//! through: every block of IANA's IPv4 and IPv6 Special-Purpose Address
//! Registries (RFC 6890 and its updates) that the registry does not call
//! globally reachable, multicast, and the IPv6 images of the IPv4 blocks
//! (NAT64's well-known prefix and 6to4), so that an IPv4 address is judged
//! the same whichever form carries it. Pure data and arithmetic.

use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

/// (block, the registry's name). Blocks inside another block are listed when
/// the registry lists them, so a refusal names the most specific one. A few
/// registry entries that are globally reachable sit inside these (PCP and
/// TURN anycast in 192.0.0.0/24 and 2001::/23, AS112, AMT): an agent has no
/// business with them, so the enclosing block is refused whole.
pub const SPECIAL_PURPOSE: &[(&str, &str)] = &[
    ("0.0.0.0/8", "\"this network\""),
    ("10.0.0.0/8", "private-use"),
    ("100.64.0.0/10", "shared address space (CGNAT)"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local (cloud metadata)"),
    ("172.16.0.0/12", "private-use"),
    ("192.0.0.0/24", "IETF protocol assignments"),
    ("192.0.2.0/24", "documentation (TEST-NET-1)"),
    ("192.88.99.0/24", "deprecated 6to4 relay anycast"),
    ("192.168.0.0/16", "private-use"),
    ("198.18.0.0/15", "benchmarking"),
    ("198.51.100.0/24", "documentation (TEST-NET-2)"),
    ("203.0.113.0/24", "documentation (TEST-NET-3)"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
    ("255.255.255.255/32", "limited broadcast"),
    ("::/96", "IPv4-compatible (deprecated)"),
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("::ffff:0:0/96", "IPv4-mapped"),
    ("64:ff9b:1::/48", "IPv4-IPv6 translation, local use"),
    ("100::/64", "discard-only"),
    ("100:0:0:1::/64", "dummy prefix"),
    ("2001::/23", "IETF protocol assignments"),
    ("2001::/32", "Teredo"),
    ("2001:2::/48", "benchmarking"),
    ("2001:db8::/32", "documentation"),
    ("3fff::/20", "documentation"),
    ("5f00::/16", "segment routing SIDs"),
    ("fc00::/7", "unique-local"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local (deprecated)"),
    ("ff00::/8", "multicast"),
];

/// NAT64's well-known prefix (RFC 6052): 64:ff9b::a.b.c.d is a.b.c.d once
/// translated, so it is refused where a.b.c.d is.
const NAT64: Ipv6Addr = Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0);
/// 6to4 (RFC 3056): 2002:AABB:CCDD::/48 routes to the IPv4 host AA.BB.CC.DD.
const SIX_TO_FOUR: Ipv6Addr = Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0);

/// The special-purpose blocks and their IPv6 images.
pub fn blocked_ranges() -> Vec<IpNet> {
    blocked_with_local([])
}

/// The blocked ranges with the host's own networks added: the proxy and
/// pasta connect from the host, so its LAN and addresses are "local" too.
pub fn blocked_with_local(local: impl IntoIterator<Item = IpNet>) -> Vec<IpNet> {
    let mut ranges: Vec<IpNet> = SPECIAL_PURPOSE
        .iter()
        .map(|(s, _)| s.parse().expect("the registry's blocks are valid CIDRs"))
        .collect();
    for n in local {
        let n = n.trunc();
        if !ranges.contains(&n) {
            ranges.push(n);
        }
    }
    with_embedded(ranges)
}

/// `ranges` with the NAT64 and 6to4 image of each IPv4 range added, so the
/// host's own networks, added at run time, are covered in every form too.
fn with_embedded(ranges: Vec<IpNet>) -> Vec<IpNet> {
    let mut out = ranges.clone();
    for n in ranges {
        let IpNet::V4(v4) = n else { continue };
        for image in embedded_images(v4) {
            if !out.contains(&image) {
                out.push(image);
            }
        }
    }
    out
}

/// The IPv6 prefixes that carry the addresses of `v4`: under NAT64's
/// well-known prefix (the IPv4 address in the last 32 bits) and under 6to4
/// (in bits 16 to 47).
fn embedded_images(v4: Ipv4Net) -> [IpNet; 2] {
    let a = u128::from(u32::from(v4.network()));
    let len = v4.prefix_len();
    let nat64 = Ipv6Net::new(Ipv6Addr::from(u128::from(NAT64) | a), 96 + len).expect("96 + at most 32");
    let six_to_four =
        Ipv6Net::new(Ipv6Addr::from(u128::from(SIX_TO_FOUR) | (a << 80)), 16 + len).expect("16 + at most 32");
    [IpNet::V6(nat64), IpNet::V6(six_to_four)]
}

/// The registry's name of the block that holds `ip`, the most specific one,
/// for refusal messages; for an IPv6 image, the IPv4 block's name with the
/// form that carried it.
pub fn name_of(net: &IpNet) -> Option<String> {
    let named = |n: &IpNet| {
        SPECIAL_PURPOSE
            .iter()
            .find(|(s, _)| s.parse::<IpNet>().ok().as_ref() == Some(n))
    };
    if let Some((_, name)) = named(net) {
        return Some((*name).to_owned());
    }
    let IpNet::V6(v6) = net else { return None };
    let bits = u128::from(v6.network());
    let (form, v4, len) = if v6.prefix_len() >= 96 && bits >> 32 == u128::from(NAT64) >> 32 {
        ("NAT64", bits as u32, v6.prefix_len() - 96)
    } else if (16..=48).contains(&v6.prefix_len()) && bits >> 112 == 0x2002 {
        ("6to4", (bits >> 80) as u32, v6.prefix_len() - 16)
    } else {
        return None;
    };
    let v4 = IpNet::V4(Ipv4Net::new(Ipv4Addr::from(v4), len).ok()?);
    Some(match named(&v4) {
        Some((_, name)) => format!("{form} form of {v4}, {name}"),
        None => format!("{form} form of {v4}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    fn blocked(ip: &str) -> Option<IpNet> {
        let ip: IpAddr = ip.parse().unwrap();
        blocked_ranges()
            .into_iter()
            .filter(|n| n.contains(&ip))
            .max_by_key(|n| n.prefix_len())
    }

    #[test]
    fn every_block_that_is_not_globally_reachable_is_refused() {
        for ip in [
            "0.1.2.3",
            "10.9.9.9",
            "100.100.0.1",
            "127.0.0.2",
            "169.254.169.254",
            "172.31.255.255",
            "192.0.0.9",
            "192.0.2.1",
            "192.168.3.4",
            "198.18.0.1",
            "198.19.255.254",
            "198.51.100.7",
            "203.0.113.5",
            "233.252.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::a00:1",
            "::ffff:1.2.3.4",
            "64:ff9b:1::1",
            "100::1",
            "2001::1",
            "2001:2::1",
            "2001:db8::1",
            "3fff::1",
            "5f00::1",
            "fd00::1",
            "fe80::1",
            "ff02::1",
        ] {
            assert!(blocked(ip).is_some(), "{ip}");
        }
        for ip in [
            "1.1.1.1",
            "8.8.8.8",
            "198.20.123.2",
            "2a01:123::2",
            "2606:4700::1111",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert_eq!(blocked(ip), None, "{ip} is globally reachable");
        }
    }

    #[test]
    fn nat64_and_6to4_are_judged_by_the_ipv4_address_they_carry() {
        assert_eq!(
            blocked("64:ff9b::a9fe:a9fe").unwrap().to_string(),
            "64:ff9b::a9fe:0/112"
        );
        assert_eq!(blocked("64:ff9b::7f00:1").unwrap().to_string(), "64:ff9b::7f00:0/104");
        assert_eq!(blocked("2002:a00:1::1").unwrap().to_string(), "2002:a00::/24");
        assert_eq!(blocked("2002:c0a8:101::1").unwrap().to_string(), "2002:c0a8::/32");
        assert_eq!(
            name_of(&"64:ff9b::a9fe:0/112".parse().unwrap()).unwrap(),
            "NAT64 form of 169.254.0.0/16, link-local (cloud metadata)"
        );
        assert_eq!(
            name_of(&"2002:a00::/24".parse().unwrap()).unwrap(),
            "6to4 form of 10.0.0.0/8, private-use"
        );
        assert_eq!(name_of(&"198.18.0.0/15".parse().unwrap()).unwrap(), "benchmarking");
        // A host network added at run time gets its images too, without a name.
        let host: IpNet = "203.1.0.0/16".parse().unwrap();
        let all = blocked_with_local([host]);
        assert!(all.contains(&"64:ff9b::cb01:0/112".parse().unwrap()));
        assert_eq!(
            name_of(&"64:ff9b::cb01:0/112".parse().unwrap()).unwrap(),
            "NAT64 form of 203.1.0.0/16"
        );
    }
}
