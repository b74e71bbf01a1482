//! The egress policy carried by a container's annotations: the mode, host
//! patterns (allow, deny) and CIDR punch-throughs, parsed and validated at
//! `create`, then consulted by the proxy for every request and compiled into
//! nftables rules for public mode. Pure logic: no sockets, no kernel calls.

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

/// The annotation that selects the mode.
pub const MODE_ANNOTATION: &str = "run.claude-shim.network";
/// The annotation that holds the policy JSON.
pub const POLICY_ANNOTATION: &str = "run.claude-shim.network.policy";

/// How a sandbox reaches the network, from the strictest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Loopback only.
    None,
    /// Nothing directly; the proxy admits the hosts on the list.
    Allowlist,
    /// pasta, with private and local destinations rejected.
    Public,
}

impl Mode {
    pub fn parse(s: &str) -> Result<Self, PolicyError> {
        match s {
            "none" => Ok(Self::None),
            "allowlist" => Ok(Self::Allowlist),
            "public" => Ok(Self::Public),
            other => Err(PolicyError(format!(
                "annotation {MODE_ANNOTATION}={other:?} is not a mode (none, allowlist or public)"
            ))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Allowlist => "allowlist",
            Self::Public => "public",
        }
    }

    fn strictness(self) -> u8 {
        match self {
            Self::None => 2,
            Self::Allowlist => 1,
            Self::Public => 0,
        }
    }

    /// The stricter of two modes: an annotation may tighten a policy, never loosen it.
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "for the admin policy, which lets an annotation only tighten its mode"
        )
    )]
    pub fn stricter(self, other: Self) -> Self {
        if other.strictness() > self.strictness() {
            other
        } else {
            self
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PolicyError(String);

/// The policy JSON exactly as the annotation carries it.
#[derive(Debug, Default, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawPolicy {
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
    #[serde(default)]
    pub allow_cidrs: Vec<String>,
}

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
fn normalize_name(s: &str) -> Result<String, PolicyError> {
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

    pub fn matches(&self, host: &Host, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
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

/// Destinations no mode reaches unless an allow_cidrs entry says so: private,
/// shared (CGNAT), loopback, link-local (which holds the cloud metadata
/// service 169.254.169.254), multicast and reserved space (RFC 6890).
pub const BLOCKED_RANGES: &[&str] = &[
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.168.0.0/16",
    "224.0.0.0/4",
    "240.0.0.0/4",
    "::/128",
    "::1/128",
    "::ffff:0:0/96",
    "fc00::/7",
    "fe80::/10",
    "fec0::/10",
    "ff00::/8",
];

pub fn blocked_ranges() -> Vec<IpNet> {
    BLOCKED_RANGES
        .iter()
        .map(|s| s.parse().expect("the built-in ranges are valid CIDRs"))
        .collect()
}

/// A validated policy.
#[derive(Debug, Clone)]
pub struct Policy {
    pub allow: Vec<HostPattern>,
    pub deny: Vec<HostPattern>,
    pub allow_cidrs: Vec<CidrRule>,
}

/// The answer for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allow: bool,
    pub reason: String,
}

impl Decision {
    fn deny(reason: String) -> Self {
        Self { allow: false, reason }
    }
}

impl Policy {
    pub fn parse(raw: &RawPolicy) -> Result<Self, PolicyError> {
        Ok(Self {
            allow: raw
                .allow
                .iter()
                .map(|s| HostPattern::parse(s))
                .collect::<Result<_, _>>()?,
            deny: raw
                .deny
                .iter()
                .map(|s| HostPattern::parse(s))
                .collect::<Result<_, _>>()?,
            allow_cidrs: raw
                .allow_cidrs
                .iter()
                .map(|s| CidrRule::parse(s))
                .collect::<Result<_, _>>()?,
        })
    }

    #[cfg(test)]
    pub fn from_json(json: &str) -> Result<Self, PolicyError> {
        let raw: RawPolicy = serde_json::from_str(json)
            .map_err(|e| PolicyError(format!("parse annotation {POLICY_ANNOTATION}: {e}")))?;
        Self::parse(&raw)
    }

    /// Whether a request for `host:port` may go on to resolution: deny wins,
    /// then the allowlist; nothing else is allowed.
    pub fn decide(&self, host: &Host, port: u16) -> Decision {
        if let Some(d) = self.deny.iter().find(|p| p.matches(host, port)) {
            return Decision::deny(format!("denied by {d}"));
        }
        match self.allow.iter().find(|p| p.matches(host, port)) {
            Some(a) => Decision {
                allow: true,
                reason: format!("allowed by {a}"),
            },
            None if self.allow.is_empty() => Decision::deny("the allowlist is empty".into()),
            None => Decision::deny("not on the allowlist".into()),
        }
    }

    /// Whether an address a name resolved to (or a literal) may be connected
    /// to: a denied address never; one inside an allow_cidrs entry yes; one
    /// in `blocked` (the fixed ranges plus the host's own networks) no.
    pub fn address_verdict(&self, ip: IpAddr, port: u16, blocked: &[IpNet]) -> Result<(), String> {
        let ip = canonical(ip);
        if let Some(d) = self
            .deny
            .iter()
            .find(|d| d.ip() == Some(ip) && d.port().is_none_or(|p| p == port))
        {
            return Err(format!("address {ip} is denied by {d}"));
        }
        if self.allow_cidrs.iter().any(|c| c.admits(ip, port)) {
            return Ok(());
        }
        match blocked.iter().find(|n| n.contains(&ip)) {
            Some(n) => Err(format!("address {ip} is in blocked range {n}")),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str], deny: &[&str], cidrs: &[&str]) -> Policy {
        Policy::parse(&RawPolicy {
            allow: allow.iter().map(|s| s.to_string()).collect(),
            deny: deny.iter().map(|s| s.to_string()).collect(),
            allow_cidrs: cidrs.iter().map(|s| s.to_string()).collect(),
        })
        .unwrap()
    }

    fn allowed(p: &Policy, host: &str, port: u16) -> bool {
        p.decide(&Host::parse(host).unwrap(), port).allow
    }

    #[test]
    fn empty_allowlist_admits_nothing() {
        let p = policy(&[], &[], &[]);
        let d = p.decide(&Host::parse("api.anthropic.com").unwrap(), 443);
        assert!(!d.allow);
        assert_eq!(d.reason, "the allowlist is empty");
    }

    #[test]
    fn exact_names_ignore_case_and_a_trailing_dot() {
        let p = policy(&["API.Anthropic.com."], &[], &[]);
        for h in ["api.anthropic.com", "API.ANTHROPIC.COM", "api.anthropic.com."] {
            assert!(allowed(&p, h, 443), "{h}");
        }
        for h in [
            "anthropic.com",
            "x.api.anthropic.com",
            "api.anthropic.com.evil.com",
            "api-anthropic.com",
        ] {
            assert!(!allowed(&p, h, 443), "{h}");
        }
    }

    #[test]
    fn wildcards_match_subdomains_only() {
        let p = policy(&["*.github.com"], &[], &[]);
        assert!(allowed(&p, "api.github.com", 443));
        assert!(allowed(&p, "a.b.github.com", 443));
        assert!(allowed(&p, "A.GitHub.com.", 443));
        assert!(!allowed(&p, "github.com", 443), "the apex is listed on its own");
        assert!(!allowed(&p, "evilgithub.com", 443));
        assert!(!allowed(&p, "github.com.evil.com", 443));
    }

    #[test]
    fn ports_restrict_an_entry() {
        let p = policy(
            &[
                "pypi.org:443",
                "*.example.com:8080",
                "[2001:db8::1]:443",
                "192.0.2.7:22",
            ],
            &[],
            &[],
        );
        assert!(allowed(&p, "pypi.org", 443));
        assert!(!allowed(&p, "pypi.org", 80));
        assert!(allowed(&p, "a.example.com", 8080));
        assert!(!allowed(&p, "a.example.com", 443));
        assert!(allowed(&p, "2001:db8::1", 443));
        assert!(!allowed(&p, "[2001:db8::1]", 80));
        assert!(allowed(&p, "192.0.2.7", 22));
        assert!(!allowed(&p, "192.0.2.7", 23));
    }

    #[test]
    fn deny_wins_over_allow() {
        let p = policy(
            &["*.example.com", "example.com"],
            &["secret.example.com", "example.com:22"],
            &[],
        );
        assert!(allowed(&p, "www.example.com", 443));
        let d = p.decide(&Host::parse("SECRET.example.com").unwrap(), 443);
        assert!(!d.allow);
        assert_eq!(d.reason, "denied by secret.example.com");
        assert!(allowed(&p, "example.com", 443));
        assert!(!allowed(&p, "example.com", 22));
    }

    #[test]
    fn ip_literals_are_not_names() {
        // A wildcard never matches an address, and "127.0.0.1" is not "localhost".
        assert!(HostPattern::parse("*.0.0.1").is_err(), "numeric last label");
        let p = policy(&["localhost", "*.example.com"], &[], &[]);
        assert!(!allowed(&p, "127.0.0.1", 80));
        assert!(!allowed(&p, "::1", 80));
        let p = policy(&["10.0.0.5", "2001:db8::5", "::ffff:192.0.2.9"], &[], &[]);
        assert!(allowed(&p, "10.0.0.5", 443));
        assert!(allowed(&p, "[2001:DB8:0::5]", 443), "addresses compare as addresses");
        assert!(allowed(&p, "192.0.2.9", 443), "a mapped address is its IPv4 address");
        assert!(!allowed(&p, "10.0.0.6", 443));
    }

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

    #[test]
    fn resolved_addresses_in_blocked_ranges_are_refused() {
        let blocked = blocked_ranges();
        let p = policy(&["*.example.com"], &["203.0.113.66"], &["10.123.1.2/32:80"]);
        let v = |ip: &str, port| p.address_verdict(ip.parse().unwrap(), port, &blocked);
        assert!(v("203.0.113.5", 443).is_ok());
        for ip in [
            "127.0.0.1",
            "169.254.169.254",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "::ffff:127.0.0.1",
            "fe80::1",
            "fd00::1",
        ] {
            assert!(v(ip, 80).is_err(), "{ip}");
        }
        assert!(v("10.123.1.2", 80).is_ok(), "punched through");
        assert!(v("10.123.1.2", 8080).is_err(), "only on its port");
        assert_eq!(
            v("203.0.113.66", 443).unwrap_err(),
            "address 203.0.113.66 is denied by 203.0.113.66"
        );
    }

    #[test]
    fn modes_only_tighten() {
        use Mode::*;
        assert_eq!(Public.stricter(None), None);
        assert_eq!(None.stricter(Public), None);
        assert_eq!(Allowlist.stricter(Public), Allowlist);
        assert_eq!(Public.stricter(Allowlist), Allowlist);
        assert!(Mode::parse("open").is_err());
    }

    #[test]
    fn unknown_policy_fields_are_refused() {
        assert!(Policy::from_json(r#"{"allow":["a.com"],"alow":[]}"#).is_err());
        assert!(Policy::from_json(r#"{}"#).unwrap().allow.is_empty());
    }
}
