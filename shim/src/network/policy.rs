//! The egress policy carried by a container's annotations: the mode, host
//! patterns (allow, deny) and CIDR punch-throughs, parsed and validated at
//! `create`, then consulted by the proxy for every request and compiled into
//! nftables rules for public mode. Pure logic: no sockets, no kernel calls.

pub mod change;
mod entries;
mod error;
mod host;
mod ranges;

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

pub use self::entries::{CidrRule, HostPattern};
pub use self::error::PolicyError;
pub use self::host::{canonical, Host};
pub use self::ranges::{blocked_ranges, blocked_with_local};

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

/// A list's host patterns and its `*:port` entries.
fn split_any_host(list: &[String]) -> Result<(Vec<HostPattern>, Vec<u16>), PolicyError> {
    let (mut hosts, mut ports) = (Vec::new(), Vec::new());
    for entry in list {
        match entries::any_host_port(entry)? {
            Some(p) => ports.push(p),
            None => hosts.push(HostPattern::parse(entry)?),
        }
    }
    Ok((hosts, ports))
}

/// A validated policy.
#[derive(Debug, Clone)]
pub struct Policy {
    pub allow: Vec<HostPattern>,
    /// Ports `*:port` entries admit for every allowed host.
    pub any_host_ports: Vec<u16>,
    /// Ports `*:port` deny entries refuse for every host.
    pub denied_ports: Vec<u16>,
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
        let (allow, any_host_ports) = split_any_host(&raw.allow)?;
        let (deny, denied_ports) = split_any_host(&raw.deny)?;
        Ok(Self {
            allow,
            any_host_ports,
            deny,
            denied_ports,
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
        if self.denied_ports.contains(&port) {
            return Decision::deny(format!("denied by *:{port}"));
        }
        if let Some(a) = self.allow.iter().find(|p| p.admits(host, port, &self.any_host_ports)) {
            return Decision {
                allow: true,
                reason: format!("allowed by {a}"),
            };
        }
        if self.allow.is_empty() {
            return Decision::deny("the allowlist is empty".into());
        }
        if self.allow.iter().any(|p| p.port().is_none() && p.matches(host, port)) {
            return Decision::deny(format!(
                "port {port} is not allowed: an entry without a port admits 443 and 80; add {}:{port} or *:{port}",
                host
            ));
        }
        Decision::deny("not on the allowlist".into())
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
        // The most specific block the registry names says why best; the
        // host's own networks, added at run time, have no name there.
        let holding = blocked.iter().filter(|n| n.contains(&ip));
        let named = holding
            .clone()
            .filter_map(|n| ranges::name_of(n).map(|name| (n, name)))
            .max_by_key(|(n, _)| n.prefix_len());
        match (named, holding.max_by_key(|n| n.prefix_len())) {
            (Some((n, name)), _) => Err(format!("address {ip} is in blocked range {n} ({name})")),
            (None, Some(n)) => Err(format!("address {ip} is in blocked range {n} (the host's own network)")),
            (None, None) => Ok(()),
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
    fn an_entry_without_a_port_admits_the_web_ports_only() {
        let p = policy(&["github.com", "*.example.com", "192.0.2.7"], &[], &[]);
        for (host, port) in [
            ("github.com", 443),
            ("github.com", 80),
            ("a.example.com", 443),
            ("192.0.2.7", 80),
        ] {
            assert!(allowed(&p, host, port), "{host}:{port}");
        }
        for (host, port) in [
            ("github.com", 22),
            ("github.com", 25),
            ("a.example.com", 8443),
            ("192.0.2.7", 22),
        ] {
            assert!(!allowed(&p, host, port), "{host}:{port}");
        }
        let d = p.decide(&Host::parse("github.com").unwrap(), 22);
        assert_eq!(
            d.reason,
            "port 22 is not allowed: an entry without a port admits 443 and 80; add github.com:22 or *:22"
        );
        // `*:22` adds SSH for every allowed host, and only for those.
        let p = policy(&["github.com", "*.example.com", "*:22"], &[], &[]);
        assert!(allowed(&p, "github.com", 22) && allowed(&p, "a.example.com", 22));
        assert!(!allowed(&p, "gitlab.com", 22) && !allowed(&p, "github.com", 25));
        assert_eq!(
            p.decide(&Host::parse("gitlab.com").unwrap(), 22).reason,
            "not on the allowlist"
        );
        let p = policy(&["github.com", "*:22"], &["*:22"], &[]);
        assert_eq!(
            p.decide(&Host::parse("github.com").unwrap(), 22).reason,
            "denied by *:22"
        );
        assert!(Policy::parse(&RawPolicy {
            allow: vec!["*:0".into()],
            ..Default::default()
        })
        .is_err());
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
    fn resolved_addresses_in_blocked_ranges_are_refused() {
        let blocked = blocked_ranges();
        let p = policy(&["*.example.com"], &["1.2.3.66"], &["10.123.1.2/32:80"]);
        let v = |ip: &str, port| p.address_verdict(ip.parse().unwrap(), port, &blocked);
        assert!(v("1.2.3.5", 443).is_ok());
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
            v("1.2.3.66", 443).unwrap_err(),
            "address 1.2.3.66 is denied by 1.2.3.66"
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
