//! A destination host as a client or a policy entry names it: a DNS name
//! (normalized, refused when a resolver would read it as an address) or an
//! address literal (IPv4-mapped IPv6 taken as IPv4). Below the entries and
//! the policy that match hosts.

use std::fmt;
use std::net::IpAddr;

use super::error::PolicyError;

/// A destination host as a client names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// A DNS name, lowercase, without a trailing dot.
    Name(String),
    /// An address literal (IPv4-mapped IPv6 is taken as IPv4).
    Ip(IpAddr),
}

impl Host {
    /// Parses what a client sent: a name or an address literal (IPv6 may be bracketed).
    pub fn parse(s: &str) -> Result<Self, PolicyError> {
        let inner = s.strip_prefix('[').and_then(|r| r.strip_suffix(']'));
        if let Some(v6) = inner {
            return v6
                .parse::<std::net::Ipv6Addr>()
                .map(|a| Host::Ip(canonical(IpAddr::V6(a))))
                .map_err(|_| PolicyError(format!("{s:?} is not an IPv6 address")));
        }
        if let Ok(ip) = s.parse::<IpAddr>() {
            return Ok(Host::Ip(canonical(ip)));
        }
        normalize_name(s).map(Host::Name)
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Ip(IpAddr::V6(a)) => write!(f, "[{a}]"),
            Host::Ip(a) => write!(f, "{a}"),
        }
    }
}

/// `::ffff:a.b.c.d` is a.b.c.d on the wire; compare and filter it as such.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => ip,
        },
        v4 => v4,
    }
}

/// Lowercase, one trailing dot dropped, and only what DNS allows in a host
/// name. A name whose last label is all digits is refused: resolvers read
/// such strings (`127.1`, `0x7f.1`) as addresses.
pub(super) fn normalize_name(s: &str) -> Result<String, PolicyError> {
    let lower = s.to_ascii_lowercase();
    let name = lower.strip_suffix('.').unwrap_or(&lower);
    let bad = |why: &str| Err(PolicyError(format!("{s:?} is not a host name: {why}")));
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.len() > 253 {
        return bad("it is longer than 253 characters");
    }
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return bad("a label is empty or longer than 63 characters");
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return bad("it holds a character other than letters, digits, '-', '_' and '.'");
        }
        if label.starts_with('-') || label.ends_with('-') {
            return bad("a label starts or ends with '-'");
        }
    }
    if name
        .rsplit('.')
        .next()
        .is_some_and(|l| l.bytes().all(|b| b.is_ascii_digit()))
    {
        return bad("its last label is numeric");
    }
    Ok(name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_resolvers_read_as_addresses_are_refused() {
        for bad in [
            "127.1",
            "0x7f.1",
            "1.2.3.4.5",
            "a..b",
            "-a.com",
            "a b.com",
            "",
            "a.com/x",
            "a@b.com",
        ] {
            assert!(Host::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(Host::parse("0x7f.example").unwrap(), Host::Name("0x7f.example".into()));
    }
}
