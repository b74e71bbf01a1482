//! One entry of a policy's lists, parsed and matched: an allow or deny host
//! pattern (`host`, `*.domain` or an address, with an optional port) or an
//! allow_cidrs punch-through. Below the policy that holds the lists.

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;

use super::error::PolicyError;
use super::host::{canonical, normalize_name, Host};

/// The ports an allow entry without one admits: HTTPS and HTTP.
pub const DEFAULT_PORTS: &[u16] = &[443, 80];

/// `*:port`: the port every allowed host is admitted on besides the default
/// ones; None for any other entry.
pub fn any_host_port(entry: &str) -> Result<Option<u16>, PolicyError> {
    match entry.trim().strip_prefix("*:") {
        Some(p) => parse_port(p, entry).map(Some),
        None => Ok(None),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// Exactly this name.
    Exact(String),
    /// Any name ending in this suffix (it starts with '.'), not the suffix's apex.
    Subdomains(String),
    /// This address literal.
    Ip(IpAddr),
}

/// One allow or deny entry: `host`, `*.domain` or an address, with an optional `:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    text: String,
    target: Target,
    port: Option<u16>,
}

fn parse_port(s: &str, entry: &str) -> Result<u16, PolicyError> {
    match s.parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(PolicyError(format!("entry {entry:?}: {s:?} is not a port (1-65535)"))),
    }
}

impl HostPattern {
    pub fn parse(entry: &str) -> Result<Self, PolicyError> {
        let text = entry.trim();
        let err = |why: String| PolicyError(format!("entry {entry:?}: {why}"));
        if text.is_empty() {
            return Err(err("it is empty".into()));
        }
        // [v6] or [v6]:port
        if let Some(rest) = text.strip_prefix('[') {
            let (addr, after) = rest
                .split_once(']')
                .ok_or_else(|| err("a '[' without its ']'".into()))?;
            let ip: std::net::Ipv6Addr = addr
                .parse()
                .map_err(|_| err(format!("{addr:?} is not an IPv6 address")))?;
            let port = match after {
                "" => None,
                p => Some(parse_port(
                    p.strip_prefix(':').ok_or_else(|| err("text after ']'".into()))?,
                    entry,
                )?),
            };
            return Ok(Self {
                text: text.to_owned(),
                target: Target::Ip(canonical(IpAddr::V6(ip))),
                port,
            });
        }
        // An unbracketed IPv6 address has no port.
        if let Ok(ip) = text.parse::<IpAddr>() {
            return Ok(Self {
                text: text.to_owned(),
                target: Target::Ip(canonical(ip)),
                port: None,
            });
        }
        let (host, port) = match text.rsplit_once(':') {
            Some((h, p)) => (h, Some(parse_port(p, entry)?)),
            None => (text, None),
        };
        if let Ok(ip) = host.parse::<std::net::Ipv4Addr>() {
            return Ok(Self {
                text: text.to_owned(),
                target: Target::Ip(IpAddr::V4(ip)),
                port,
            });
        }
        let target = if let Some(domain) = host.strip_prefix("*.") {
            let d = normalize_name(domain).map_err(|e| err(e.0))?;
            if !d.contains('.') {
                // As the policy crate does: `*.com` is every host of a top-level domain.
                return Err(err(format!("a wildcard over the top-level domain {d:?} is too wide")));
            }
            Target::Subdomains(format!(".{d}"))
        } else if host.contains('*') {
            return Err(err(
                "'*' is only allowed as a whole first label ('*.example.com'); use public mode to allow every host"
                    .into(),
            ));
        } else {
            Target::Exact(normalize_name(host).map_err(|e| err(e.0))?)
        };
        Ok(Self {
            text: text.to_owned(),
            target,
            port,
        })
    }

    /// For a deny entry: this host, on its port or, without one, on any.
    pub fn matches(&self, host: &Host, port: u16) -> bool {
        self.port.is_none_or(|p| p == port) && self.names(host)
    }

    /// For an allow entry: this host on its port or, without one, on the web's
    /// ports and the ones `*:port` entries add. An entry without a port
    /// admitted every port once, so `github.com` let SSH and SMTP through.
    pub fn admits(&self, host: &Host, port: u16, any_host_ports: &[u16]) -> bool {
        let port_ok = match self.port {
            Some(p) => p == port,
            None => DEFAULT_PORTS.contains(&port) || any_host_ports.contains(&port),
        };
        port_ok && self.names(host)
    }

    fn names(&self, host: &Host) -> bool {
        match (&self.target, host) {
            (Target::Exact(e), Host::Name(n)) => e == n,
            (Target::Subdomains(s), Host::Name(n)) => n.len() > s.len() && n.ends_with(s.as_str()),
            (Target::Ip(a), Host::Ip(b)) => a == b,
            _ => false,
        }
    }

    /// The address, for entries that name one.
    pub fn ip(&self) -> Option<IpAddr> {
        match self.target {
            Target::Ip(ip) => Some(ip),
            _ => None,
        }
    }

    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// The same host and port, however each entry spells them.
    pub fn same_as(&self, other: &HostPattern) -> bool {
        self.target == other.target && self.port == other.port
    }

    /// The name of an entry that names exactly one host.
    pub fn exact_name(&self) -> Option<&str> {
        match &self.target {
            Target::Exact(n) => Some(n),
            _ => None,
        }
    }

    pub fn is_name(&self) -> bool {
        !matches!(self.target, Target::Ip(_))
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// `CIDR[:port]` for IPv4, `CIDR` or `[CIDR]:port` for IPv6; a bare address is a /32 or /128.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CidrRule {
    pub net: IpNet,
    pub port: Option<u16>,
}

impl CidrRule {
    pub fn parse(entry: &str) -> Result<Self, PolicyError> {
        let text = entry.trim();
        let err = |why: &str| PolicyError(format!("allow_cidrs entry {entry:?}: {why}"));
        let (net, port) = if let Some(rest) = text.strip_prefix('[') {
            let (net, after) = rest.split_once(']').ok_or_else(|| err("a '[' without its ']'"))?;
            let port = match after {
                "" => None,
                p => Some(parse_port(
                    p.strip_prefix(':').ok_or_else(|| err("text after ']'"))?,
                    entry,
                )?),
            };
            (net, port)
        } else if text.matches(':').count() > 1 {
            (text, None)
        } else {
            match text.rsplit_once(':') {
                Some((n, p)) => (n, Some(parse_port(p, entry)?)),
                None => (text, None),
            }
        };
        let net: IpNet = match net.parse::<IpNet>() {
            Ok(n) => n,
            Err(_) => match net.parse::<IpAddr>() {
                Ok(ip) => IpNet::from(ip),
                Err(_) => return Err(err("not an address or CIDR")),
            },
        };
        if net.network() != net.addr() {
            return Err(err(&format!("host bits are set (did you mean {}?)", net.trunc())));
        }
        Ok(Self { net, port })
    }

    pub fn admits(&self, ip: IpAddr, port: u16) -> bool {
        self.net.contains(&ip) && self.port.is_none_or(|p| p == port)
    }
}

impl fmt::Display for CidrRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.port, self.net) {
            (None, n) => write!(f, "{n}"),
            (Some(p), n @ IpNet::V4(_)) => write!(f, "{n}:{p}"),
            (Some(p), n) => write!(f, "[{n}]:{p}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_entries_name_themselves() {
        for bad in [
            "*",
            "*.com",
            "*.COM.:443",
            "a.*.com",
            "*example.com",
            "host:0",
            "host:99999",
            "[::1",
            "[::1]x",
            "",
        ] {
            let e = HostPattern::parse(bad).unwrap_err();
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
    }

    #[test]
    fn cidr_entries_parse_with_and_without_ports() {
        let c = CidrRule::parse("10.0.0.5/32:443").unwrap();
        assert!(c.admits("10.0.0.5".parse().unwrap(), 443));
        assert!(!c.admits("10.0.0.5".parse().unwrap(), 80));
        let c = CidrRule::parse("10.123.0.0/16").unwrap();
        assert!(c.admits("10.123.9.9".parse().unwrap(), 1));
        let c = CidrRule::parse("fd00::/8").unwrap();
        assert_eq!(c.port, None);
        assert!(c.admits("fd12::1".parse().unwrap(), 22));
        let c = CidrRule::parse("[fd00::/8]:443").unwrap();
        assert_eq!(c.port, Some(443));
        assert_eq!(c.to_string(), "[fd00::/8]:443");
        assert_eq!(CidrRule::parse("192.0.2.1").unwrap().net.prefix_len(), 32);
        assert_eq!(CidrRule::parse("fd00::1").unwrap().net.prefix_len(), 128);
        assert!(CidrRule::parse("10.0.0.1/8").is_err(), "host bits set");
        assert!(CidrRule::parse("10.0.0.0/33").is_err());
        assert!(CidrRule::parse("example.com").is_err());
    }
}
