//! The network part of what the probe must find: which direct addresses must
//! be refused and, in allowlist mode, what the proxy must refuse and admit,
//! from the mode and policy annotations the runtime enforces.

use nix::errno::Errno;
use oci_spec::runtime::Spec;

use crate::verify::expect::{DirectTarget, Errnos, NetworkExpect, PlainHttp, ProxyExpect, ProxyRequest};
use crate::verify::HostFacts;

/// Which allowed host the allowlist check asks the proxy for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// The first name on the allowlist that names one host, port 443 unless it gives one.
    FirstAllowed,
    Host(String, u16),
    /// No request for an allowed host (it would leave the machine).
    Skip,
}

impl Reach {
    /// `verify --reach`: HOST[:PORT], `none`, or nothing for the default.
    pub fn parse(arg: Option<&str>) -> anyhow::Result<Self> {
        let Some(arg) = arg else { return Ok(Self::FirstAllowed) };
        if arg == "none" {
            return Ok(Self::Skip);
        }
        let (host, port) = match arg.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') || h.ends_with(']') => (
                h,
                p.parse::<u16>()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| anyhow::anyhow!("parse --reach {arg}: {p:?} is not a port"))?,
            ),
            _ => (arg, 443),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            anyhow::bail!("parse --reach {arg}: it names no host");
        }
        Ok(Self::Host(host.to_owned(), port))
    }
}

/// What the network checks expect, from the mode and policy annotations the
/// runtime enforces (so the same for every way the bundle is started).
pub(super) fn network_expect(spec: &Spec, facts: &HostFacts, reach: &Reach) -> NetworkExpect {
    use crate::network::policy::{blocked_ranges, Host, Policy as NetPolicy, RawPolicy};
    use claude_shim_bundle::annotations::{NETWORK, NETWORK_POLICY};
    use std::net::{IpAddr, SocketAddr};

    let annotations = spec.annotations().clone().unwrap_or_default();
    let Some(mode) = annotations.get(NETWORK).map(|m| m.trim().to_owned()) else {
        return NetworkExpect {
            mode: None,
            tamper_refused: false,
            direct: Vec::new(),
            proxy: None,
        };
    };
    // A policy the runtime cannot parse refuses the container; expect from an
    // empty one (the strictest) so the checks still run.
    let policy = annotations
        .get(NETWORK_POLICY)
        .and_then(|j| serde_json::from_str::<RawPolicy>(j).ok())
        .and_then(|raw| NetPolicy::parse(&raw).ok())
        .unwrap_or_else(|| NetPolicy::parse(&RawPolicy::default()).expect("the empty policy is valid"));
    let public = mode == "public";
    let port = facts.canary_port;
    let everything: Vec<ipnet::IpNet> = vec!["0.0.0.0/0".parse().unwrap(), "::/0".parse().unwrap()];
    // Public mode's filter lets through what allow_cidrs punch; nothing else of these.
    let punched = |ip: IpAddr, port: u16| public && policy.address_verdict(ip, port, &everything).is_ok();

    let mut targets: Vec<(String, SocketAddr)> = Vec::new();
    for (what, ip) in [
        ("private 10/8", "10.0.0.1"),
        ("private 172.16/12", "172.16.0.1"),
        ("private 192.168/16", "192.168.0.1"),
        ("CGNAT 100.64/10", "100.64.0.1"),
        ("private IPv6 fc00::/7", "fd00::1"),
    ] {
        targets.push((what.to_owned(), SocketAddr::new(ip.parse().unwrap(), port)));
    }
    targets.push(("metadata".into(), "169.254.169.254:80".parse().unwrap()));
    for a in facts.addresses.iter().take(6) {
        targets.push(("host address".into(), SocketAddr::new(*a, port)));
    }
    for g in facts.gateways.iter().take(4) {
        targets.push(("gateway".into(), SocketAddr::new(*g, port)));
    }
    if !public {
        // Documentation ranges: with no route out, nothing is sent anywhere.
        targets.push(("public".into(), "192.0.2.1:443".parse().unwrap()));
        targets.push(("public IPv6".into(), "[2001:db8::1]:443".parse().unwrap()));
    }
    let refused = if public {
        // The filter rejects with admin-prohibited (EHOSTUNREACH over IPv4,
        // EACCES over IPv6); a family without a route fails before it.
        Errnos::of(&[Errno::EHOSTUNREACH, Errno::EACCES, Errno::EPERM, Errno::ENETUNREACH])
    } else {
        Errnos::of(&[Errno::ENETUNREACH])
    };
    let mut direct: Vec<DirectTarget> = Vec::new();
    for (what, addr) in targets {
        if punched(addr.ip(), addr.port()) || direct.iter().any(|d| d.addr == addr) {
            continue;
        }
        let mut refused_with = refused.clone();
        if public && what == "host address" {
            // pasta gives the sandbox the host's own addresses, so a reset may
            // come from the sandbox's copy; never from the host, whose canary
            // listens on that port and would accept.
            refused_with.0.push(Errno::ECONNREFUSED);
        }
        direct.push(DirectTarget {
            what,
            addr,
            refused_with,
        });
    }
    // The sandbox's own loopback, where nothing listens on that port.
    direct.push(DirectTarget {
        what: "host loopback".into(),
        addr: SocketAddr::new(IpAddr::from([127, 0, 0, 1]), port),
        refused_with: Errnos::of(&[Errno::ECONNREFUSED]),
    });
    if facts.canary_v6 {
        direct.push(DirectTarget {
            what: "host loopback IPv6".into(),
            addr: SocketAddr::new(IpAddr::from(std::net::Ipv6Addr::LOCALHOST), port),
            refused_with: Errnos::of(&[Errno::ECONNREFUSED, Errno::EADDRNOTAVAIL, Errno::ENETUNREACH]),
        });
    }

    let proxy = (mode == "allowlist").then(|| {
        let listener = |var: &str, scheme: &str| -> SocketAddr {
            crate::network::PROXY_ENV
                .iter()
                .find(|(k, _)| *k == var)
                .and_then(|(_, v)| v.strip_prefix(scheme))
                .and_then(|a| a.parse().ok())
                .expect("PROXY_ENV names the proxy's listeners")
        };
        let blocked = blocked_ranges();
        // What the proxy will do: the policy decides on the name, then the
        // address it connects to must not be blocked.
        let admits = |host: &str, port: u16| -> bool {
            let Ok(h) = Host::parse(host) else { return false };
            if !policy.decide(&h, port).allow {
                return false;
            }
            match h {
                Host::Ip(ip) => policy.address_verdict(ip, port, &blocked).is_ok(),
                Host::Name(n) if n == "localhost" => policy
                    .address_verdict(IpAddr::from([127, 0, 0, 1]), port, &blocked)
                    .is_ok(),
                Host::Name(_) => true,
            }
        };
        let mut requests = Vec::new();
        let refusal = |what: &str, host: String, port: u16, socks: bool| ProxyRequest {
            what: what.to_owned(),
            host,
            port,
            socks,
            admit: false,
            plain: None,
            why: None,
        };
        let mut expect_refused = |what: &str, host: String, port: u16, socks: bool| {
            if !admits(&host, port) {
                requests.push(refusal(what, host, port, socks));
            }
        };
        expect_refused("off the list", "not-listed.claude-shim.invalid".into(), 443, false);
        expect_refused("off the list", "not-listed.claude-shim.invalid".into(), 443, true);
        if let Some(d) = policy
            .deny
            .iter()
            .find_map(|d| d.exact_name().map(|n| (n.to_owned(), d.port())))
        {
            expect_refused("denied", d.0, d.1.unwrap_or(443), false);
        }
        expect_refused("metadata", "169.254.169.254".into(), 80, false);
        expect_refused("host loopback", "127.0.0.1".into(), port, false);
        expect_refused("host loopback", "localhost".into(), port, true);
        if let Some(a) = facts.addresses.first() {
            expect_refused("host address", a.to_string(), port, false);
        }
        let allowed = match reach {
            Reach::Skip => None,
            Reach::Host(h, p) => Some((h.clone(), *p)),
            Reach::FirstAllowed => policy
                .allow
                .iter()
                .find_map(|a| a.exact_name().map(|n| (n.to_owned(), a.port().unwrap_or(443)))),
        };
        // NAT64's form of the metadata address: refused for its range, whatever the lists say.
        requests.push(ProxyRequest {
            why: Some("blocked range".into()),
            ..refusal("metadata as NAT64", "64:ff9b::a9fe:a9fe".into(), 80, false)
        });
        // The rules that hold for hosts on the list, asked of the first one
        // the policy names (or of a name off it): answered before the proxy
        // connects anywhere.
        let listed = policy.allow.iter().find_map(|a| a.exact_name().map(str::to_owned));
        if let Some(host) = &listed {
            if let Some(p) = [25, 8025, 2525].into_iter().find(|p| !admits(host, *p)) {
                requests.push(ProxyRequest {
                    why: Some(format!("port {p} is not allowed")),
                    ..refusal("port not allowed", host.clone(), p, false)
                });
            }
        }
        let named = listed.unwrap_or_else(|| "not-listed.claude-shim.invalid".into());
        for (what, shape) in [
            ("Host mismatch", PlainHttp::HostMismatch),
            ("pipelined", PlainHttp::Pipelined),
        ] {
            requests.push(ProxyRequest {
                plain: Some(shape),
                ..refusal(what, named.clone(), 80, false)
            });
        }
        if let Some((host, port)) = allowed {
            let admit = admits(&host, port);
            requests.push(ProxyRequest {
                what: if admit { "allowed" } else { "not allowed" }.to_owned(),
                admit,
                ..refusal("", host, port, false)
            });
        }
        ProxyExpect {
            http: listener("HTTP_PROXY", "http://"),
            socks: listener("ALL_PROXY", "socks5h://"),
            requests,
        }
    });

    NetworkExpect {
        mode: Some(mode),
        tamper_refused: true,
        direct,
        proxy,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_spec::runtime::Spec;

    fn facts() -> HostFacts {
        HostFacts {
            namespaces: Default::default(),
            pid: 1,
            sid: 1,
            pts_dev: None,
            addresses: vec!["10.123.0.2".parse().unwrap(), "fd12:3::2".parse().unwrap()],
            gateways: vec!["10.123.0.1".parse().unwrap()],
            canary_port: 4242,
            canary_v6: true,
        }
    }

    fn spec(mode: &str, policy: serde_json::Value) -> Spec {
        let mut s = Spec::default();
        s.set_annotations(Some(
            [
                (claude_shim_bundle::annotations::NETWORK.to_owned(), mode.to_owned()),
                (
                    claude_shim_bundle::annotations::NETWORK_POLICY.to_owned(),
                    policy.to_string(),
                ),
            ]
            .into(),
        ));
        s
    }

    fn check_ids(n: &NetworkExpect) -> Vec<String> {
        let mut v: Vec<String> = n.direct.iter().map(|d| format!("{} {}", d.what, d.addr)).collect();
        if let Some(p) = &n.proxy {
            v.extend(p.requests.iter().map(|r| {
                format!(
                    "{} {}{}:{} {}",
                    r.what,
                    if r.socks { "socks " } else { "" },
                    r.host,
                    r.port,
                    r.admit
                )
            }));
        }
        v
    }

    #[test]
    fn allowlist_probes_the_proxy_and_refuses_every_direct_address() {
        let policy = serde_json::json!({"allow": ["*.wild.test", "pub.test", "ports.test:8080"], "deny": ["bad.wild.test"], "allow_cidrs": ["10.0.0.0/8"]});
        let n = network_expect(&spec("allowlist", policy.clone()), &facts(), &Reach::FirstAllowed);
        assert_eq!(n.mode.as_deref(), Some("allowlist"));
        assert!(n.tamper_refused);
        let ids = check_ids(&n);
        for want in [
            "private 10/8 10.0.0.1:4242",
            "metadata 169.254.169.254:80",
            "host address 10.123.0.2:4242",
            "host address [fd12:3::2]:4242",
            "gateway 10.123.0.1:4242",
            "public 192.0.2.1:443",
            "host loopback 127.0.0.1:4242",
            "off the list not-listed.claude-shim.invalid:443 false",
            "off the list socks not-listed.claude-shim.invalid:443 false",
            "denied bad.wild.test:443 false",
            "metadata 169.254.169.254:80 false",
            "host loopback 127.0.0.1:4242 false",
            "host loopback socks localhost:4242 false",
            "allowed pub.test:443 true",
        ] {
            assert!(ids.contains(&want.to_owned()), "{want} missing from {ids:#?}");
        }
        // allow_cidrs only vet the addresses of allowed names: an address literal off the list is refused.
        assert!(
            ids.contains(&"host address 10.123.0.2:4242 false".to_owned()),
            "{ids:#?}"
        );
        for d in &n.direct[..n.direct.len() - 2] {
            assert_eq!(d.refused_with, Errnos::of(&[Errno::ENETUNREACH]), "{d:?}");
        }
        let given = network_expect(
            &spec("allowlist", policy.clone()),
            &facts(),
            &Reach::Host("ports.test".into(), 8080),
        );
        assert!(check_ids(&given).contains(&"allowed ports.test:8080 true".to_owned()));
        let wrong_port = network_expect(
            &spec("allowlist", policy.clone()),
            &facts(),
            &Reach::Host("ports.test".into(), 443),
        );
        assert!(check_ids(&wrong_port).contains(&"not allowed ports.test:443 false".to_owned()));
        let skip = network_expect(&spec("allowlist", policy), &facts(), &Reach::Skip);
        assert!(!check_ids(&skip).iter().any(|i| i.starts_with("allowed")));
    }

    #[test]
    fn public_expects_the_filter_and_leaves_punched_ranges_alone() {
        let n = network_expect(
            &spec("public", serde_json::json!({"allow_cidrs": ["10.0.0.0/8:4242"]})),
            &facts(),
            &Reach::FirstAllowed,
        );
        assert!(n.proxy.is_none());
        let ids = check_ids(&n);
        assert!(
            !ids.iter().any(|i| i.starts_with("public ")),
            "no public address is tried: {ids:?}"
        );
        assert!(
            !ids.contains(&"private 10/8 10.0.0.1:4242".to_owned()),
            "punched: {ids:?}"
        );
        assert!(ids.contains(&"private 192.168/16 192.168.0.1:4242".to_owned()));
        assert!(ids.contains(&"metadata 169.254.169.254:80".to_owned()));
        assert!(n.direct[0].refused_with.contains(Errno::EHOSTUNREACH));
    }

    #[test]
    fn no_mode_no_network_checks() {
        let n = network_expect(&Spec::default(), &facts(), &Reach::FirstAllowed);
        assert_eq!(n.mode, None);
        assert!(!n.tamper_refused && n.direct.is_empty() && n.proxy.is_none());
    }

    #[test]
    fn reach_arguments_parse() {
        assert_eq!(Reach::parse(None).unwrap(), Reach::FirstAllowed);
        assert_eq!(Reach::parse(Some("none")).unwrap(), Reach::Skip);
        assert_eq!(Reach::parse(Some("a.test")).unwrap(), Reach::Host("a.test".into(), 443));
        assert_eq!(
            Reach::parse(Some("a.test:80")).unwrap(),
            Reach::Host("a.test".into(), 80)
        );
        assert_eq!(Reach::parse(Some("[::1]:80")).unwrap(), Reach::Host("::1".into(), 80));
        assert!(Reach::parse(Some("a.test:x")).is_err());
        assert!(Reach::parse(Some(":80")).is_err());
    }
}
