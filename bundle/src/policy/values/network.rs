//! The network section's values: the mode, the host patterns of the allow
//! and deny lists, the address ranges a public sandbox may reach, and the
//! ports it publishes on the host's loopback.

use std::net::{IpAddr, Ipv4Addr};

use serde::Deserialize;

/// `none`, `allowlist` or `public` (strictness none > allowlist > public).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    #[default]
    None,
    Allowlist,
    Public,
}

impl NetworkMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Allowlist => "allowlist",
            Self::Public => "public",
        }
    }
}

/// A host pattern of the network allow and deny lists: `host`, `*.domain`,
/// either with an optional `:port`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct HostPattern(pub String);

impl TryFrom<String> for HostPattern {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let lower = s.to_ascii_lowercase();
        let (host, port) = match lower.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (lower.as_str(), None),
        };
        if let Some(p) = port {
            parse_port(p).map_err(|e| format!("{s:?}: {e}"))?;
        }
        // `*:port`: that port for every allowed host (entries without a port admit 443 and 80).
        if host == "*" && port.is_some() {
            return Ok(Self(lower));
        }
        let name = host.strip_prefix("*.").unwrap_or(host);
        if name.contains('*') {
            return Err(format!("{s:?}: a wildcard is allowed only as a leading \"*.\""));
        }
        if host.starts_with("*.") && !name.contains('.') {
            return Err(format!("{s:?}: a wildcard over a whole top-level domain is too broad"));
        }
        if name.is_empty() || name.len() > 253 {
            return Err(format!("{s:?} is not a host name"));
        }
        for label in name.split('.') {
            let ok = !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
            if !ok {
                return Err(format!("{s:?} is not a host name (labels of a-z, 0-9 and -)"));
            }
        }
        Ok(Self(lower))
    }
}

fn parse_port(p: &str) -> Result<u16, String> {
    match p.parse::<u16>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("port {p:?} is not in 1..=65535")),
    }
}

/// `[HOSTPORT:]PORT`: a TCP port the sandbox listens on, reachable from the
/// host at 127.0.0.1:HOSTPORT (the same number without HOSTPORT).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Publish {
    pub host: u16,
    pub port: u16,
}

impl TryFrom<String> for Publish {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        Publish::parse(&s)
    }
}

impl Publish {
    pub fn parse(s: &str) -> Result<Self, String> {
        let bad = |e: String| format!("{s:?} is not [HOSTPORT:]PORT: {e}");
        let (host, port) = match s.split_once(':') {
            Some((h, p)) => (parse_port(h).map_err(bad)?, parse_port(p).map_err(bad)?),
            None => {
                let p = parse_port(s).map_err(bad)?;
                (p, p)
            }
        };
        Ok(Self { host, port })
    }
}

impl std::fmt::Display for Publish {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// An address range a `public` sandbox may reach although it is private:
/// `10.0.0.5/32`, `10.0.0.0/24:443`, `[fd00::/8]:443`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct CidrRule(pub String);

impl TryFrom<String> for CidrRule {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let bad = |why: &str| format!("{s:?} is not a CIDR with an optional port ({why})");
        let (cidr, port) = if let Some(rest) = s.strip_prefix('[') {
            let (inner, after) = rest.split_once(']').ok_or_else(|| bad("unclosed ["))?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(|| bad("expected :port after ]"))?),
            };
            (inner, port)
        } else {
            match s.split_once('/') {
                Some((addr, rest)) if addr.parse::<Ipv4Addr>().is_ok() => match rest.split_once(':') {
                    Some((len, p)) => (&s[..addr.len() + 1 + len.len()], Some(p)),
                    None => (s.as_str(), None),
                },
                _ => (s.as_str(), None),
            }
        };
        if let Some(p) = port {
            parse_port(p).map_err(|e| bad(&e))?;
        }
        let (addr, len) = cidr.split_once('/').ok_or_else(|| bad("missing /prefix"))?;
        let addr: IpAddr = addr.parse().map_err(|_| bad("bad address"))?;
        let (bits, max): (u128, u32) = match addr {
            IpAddr::V4(a) => (u128::from(u32::from(a)), 32),
            IpAddr::V6(a) => (u128::from(a), 128),
        };
        let len: u32 = len.parse().map_err(|_| bad("bad prefix length"))?;
        if len > max {
            return Err(bad("prefix length too long"));
        }
        if len == 0 {
            return Err(format!("{s:?} covers every address; use a narrower range"));
        }
        let host_mask: u128 = if len == max { 0 } else { (1u128 << (max - len)) - 1 };
        if bits & host_mask != 0 {
            return Err(bad("address bits set beyond the prefix"));
        }
        Ok(Self(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_patterns() {
        for ok in [
            "github.com",
            "*.github.com",
            "api.anthropic.com:443",
            "LOCALHOST",
            "10.1.2.3",
            "*:22",
        ] {
            HostPattern::try_from(ok.to_owned()).unwrap();
        }
        assert_eq!(HostPattern::try_from("GitHub.com".to_owned()).unwrap().0, "github.com");
        for bad in [
            "*",
            "*.com",
            "a.*.com",
            "exa mple.com",
            "-a.com",
            "a.com:0",
            "a.com:99999",
            "",
            ":443",
            "a..b",
        ] {
            assert!(HostPattern::try_from(bad.to_owned()).is_err(), "{bad}");
        }
    }

    #[test]
    fn published_ports() {
        assert_eq!(Publish::parse("8080:3000").unwrap(), Publish { host: 8080, port: 3000 });
        assert_eq!(Publish::parse("3000").unwrap().to_string(), "3000:3000");
        for bad in ["", "0", "x", "80:", ":80", "1:2:3", "70000", "127.0.0.1:80:80"] {
            assert!(Publish::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cidr_rules() {
        for ok in [
            "10.0.0.5/32:443",
            "10.0.0.0/24",
            "192.168.1.0/24:22",
            "[fd00::/8]:443",
            "fd00::/8",
        ] {
            CidrRule::try_from(ok.to_owned()).unwrap();
        }
        for bad in [
            "10.0.0.5",
            "10.0.0.5/33",
            "10.0.0.1/24",
            "0.0.0.0/0",
            "[fd00::/8]443",
            "x/8",
            "10.0.0.0/8:0",
        ] {
            assert!(CidrRule::try_from(bad.to_owned()).is_err(), "{bad}");
        }
    }
}
