//! Egress filters: one nftables table in the container's network namespace
//! (family inet, so IPv4 and IPv6 alike) whose output chain rejects private,
//! local and denied destinations (public mode), or everything but lo (mode
//! none in a namespace the runtime joined, such as a pod's). pasta copies the
//! host's routes, connected subnets included, so routes cannot do this
//! (NOTES.md); a filter on the destination address can. The rules are written
//! as nft JSON, applied in one transaction that first empties the table (the
//! containers of a pod share one namespace, each installs the same table),
//! then read back from the kernel and compared.

use std::net::IpAddr;
use std::path::Path;

use anyhow::{bail, Context, Result};
use ipnet::IpNet;
use serde_json::{json, Value};

use super::netns::{self, NsFds};
use super::policy::{blocked_with_local, Policy};

pub const TABLE: &str = "claude_shim";
pub const CHAIN: &str = "egress";

/// What the rules are built from, besides the policy.
#[derive(Debug, Default, Clone)]
pub struct Facts {
    /// Connected subnets, gateways and the host's own addresses.
    pub local: Vec<IpNet>,
    /// The resolvers pasta hands out; DNS to them stays open even when private.
    pub resolvers: Vec<IpAddr>,
}

fn daddr(net: &IpNet) -> Value {
    let proto = if net.addr().is_ipv4() { "ip" } else { "ip6" };
    // nft prints a full-length prefix as a plain address.
    let right = if net.prefix_len() == net.max_prefix_len() {
        json!(net.addr().to_string())
    } else {
        json!({"prefix": {"addr": net.network().to_string(), "len": net.prefix_len()}})
    };
    json!({"match": {"op": "==", "left": {"payload": {"protocol": proto, "field": "daddr"}}, "right": right}})
}

fn port_match(port: u16) -> [Value; 2] {
    [
        json!({"match": {"op": "==", "left": {"meta": {"key": "l4proto"}}, "right": {"set": ["tcp", "udp"]}}}),
        json!({"match": {"op": "==", "left": {"payload": {"protocol": "th", "field": "dport"}}, "right": port}}),
    ]
}

fn reject() -> Value {
    json!({"reject": {"type": "icmpx", "expr": "admin-prohibited"}})
}

fn accept() -> Value {
    json!({"accept": null})
}

/// The rules of the egress chain, in order, as nft's JSON `expr` arrays.
/// Order is the policy: deny wins over everything; DNS to the resolvers and
/// the allow_cidrs punch-throughs come before the blocked ranges.
pub fn rules(policy: &Policy, facts: &Facts) -> Vec<Value> {
    let mut out = vec![
        json!([{"match": {"op": "==", "left": {"meta": {"key": "oifname"}}, "right": "lo"}}, accept()]),
        // Neighbour discovery: without it IPv6 reaches nothing, gateway included.
        json!([{"match": {"op": "==", "left": {"payload": {"protocol": "icmpv6", "field": "type"}},
            "right": {"set": ["nd-router-solicit", "nd-neighbor-solicit", "nd-neighbor-advert"]}}}, accept()]),
    ];
    for d in &policy.deny {
        if let Some(ip) = d.ip() {
            let mut e = vec![daddr(&IpNet::from(ip))];
            if let Some(p) = d.port() {
                e.extend(port_match(p));
            }
            e.push(reject());
            out.push(Value::Array(e));
        }
    }
    for r in &facts.resolvers {
        let mut e = vec![daddr(&IpNet::from(*r))];
        e.extend(port_match(53));
        e.push(accept());
        out.push(Value::Array(e));
    }
    for c in &policy.allow_cidrs {
        let mut e = vec![daddr(&c.net)];
        if let Some(p) = c.port {
            e.extend(port_match(p));
        }
        e.push(accept());
        out.push(Value::Array(e));
    }
    for n in &blocked_with_local(facts.local.iter().copied()) {
        out.push(json!([daddr(n), reject()]));
    }
    out
}

/// Mode none where interfaces are not the runtime's to remove: only lo.
pub fn loopback_only() -> Vec<Value> {
    vec![
        json!([{"match": {"op": "==", "left": {"meta": {"key": "oifname"}}, "right": "lo"}}, accept()]),
        json!([reject()]),
    ]
}

/// The transaction that creates (or empties) the table, its chain and the rules.
pub fn transaction(rules: &[Value]) -> Value {
    let mut cmds = vec![
        json!({"add": {"table": {"family": "inet", "name": TABLE}}}),
        json!({"flush": {"table": {"family": "inet", "name": TABLE}}}),
        json!({"add": {"chain": {"family": "inet", "table": TABLE, "name": CHAIN,
            "type": "filter", "hook": "output", "prio": 0, "policy": "accept"}}}),
    ];
    for r in rules {
        cmds.push(json!({"add": {"rule": {"family": "inet", "table": TABLE, "chain": CHAIN, "expr": r}}}));
    }
    json!({ "nftables": cmds })
}

/// Compares what the kernel holds (`nft -j list table`) with the rules asked for.
pub fn check_listing(listing: &Value, want: &[Value]) -> Result<()> {
    let items = listing["nftables"].as_array().map(Vec::as_slice).unwrap_or_default();
    let chains: Vec<&Value> = items.iter().filter_map(|i| i.get("chain")).collect();
    match chains.as_slice() {
        [c] if c["name"] == CHAIN
            && c["type"] == "filter"
            && c["hook"] == "output"
            && c["prio"] == 0
            && c["policy"] == "accept" => {}
        _ => bail!("the kernel holds chains {chains:?}, not the single output chain {CHAIN}"),
    }
    let got: Vec<&Value> = items.iter().filter_map(|i| i.get("rule")).map(|r| &r["expr"]).collect();
    if got.len() != want.len() {
        bail!("the kernel holds {} rules, {} were written", got.len(), want.len());
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if *g != w {
            bail!("rule {i} reads back as {g}, not {w}");
        }
    }
    Ok(())
}

/// Installs the rules inside the namespace and proves them by reading them back.
pub fn install(nft: &Path, ns: &NsFds, want: &[Value]) -> Result<()> {
    let input = transaction(want).to_string();
    tracing::debug!("nft -j -f - ({} rules)", want.len());
    let out = netns::run_in(ns, nft, &["-j", "-f", "-"], Some(input.as_bytes()))?;
    if !out.status.success() {
        bail!(
            "{} -j -f - exited with {}: {}",
            nft.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let out = netns::run_in(ns, nft, &["-j", "list", "table", "inet", TABLE], None)?;
    if !out.status.success() {
        bail!(
            "read the rules back: {} exited with {}: {}",
            nft.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let listing: Value = serde_json::from_slice(&out.stdout).context("read the rules back: parse nft's JSON")?;
    check_listing(&listing, want).context("read the rules back")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::policy::RawPolicy;

    fn facts() -> Facts {
        Facts {
            local: vec!["192.0.2.0/24".parse().unwrap(), "192.0.2.1/32".parse().unwrap()],
            resolvers: vec!["10.255.255.53".parse().unwrap()],
        }
    }

    #[test]
    fn order_is_lo_nd_deny_dns_cidrs_blocked() {
        let p = Policy::parse(&RawPolicy {
            allow: vec![],
            deny: vec!["203.0.113.9:443".into()],
            allow_cidrs: vec!["10.123.1.2/32:80".into()],
        })
        .unwrap();
        let r = rules(&p, &facts());
        let text: Vec<String> = r.iter().map(|v| v.to_string()).collect();
        assert!(text[0].contains("oifname"));
        assert!(text[1].contains("nd-neighbor-solicit"));
        assert!(text[2].contains("203.0.113.9") && text[2].contains("reject") && text[2].contains("443"));
        assert!(text[3].contains("10.255.255.53") && text[3].contains("53") && text[3].contains("accept"));
        assert!(text[4].contains("10.123.1.2") && text[4].contains("accept"));
        let rest = text[5..].join("\n");
        for net in [
            "\"10.0.0.0\",\"len\":8",
            "\"169.254.0.0\",\"len\":16",
            "\"fc00::\",\"len\":7",
            "\"192.0.2.0\",\"len\":24",
            "\"192.0.2.1\"",
        ] {
            assert!(rest.contains(net), "{net} in {rest}");
        }
        assert!(text[5..].iter().all(|t| t.contains("reject")));
    }

    #[test]
    fn listing_must_match_exactly() {
        let p = Policy::parse(&RawPolicy::default()).unwrap();
        let want = rules(&p, &facts());
        let chain = json!({"chain": {"family": "inet", "table": TABLE, "name": CHAIN, "handle": 1,
            "type": "filter", "hook": "output", "prio": 0, "policy": "accept"}});
        let mut items = vec![json!({"metainfo": {}}), json!({"table": {}}), chain];
        items.extend(want.iter().map(|e| json!({"rule": {"expr": e, "handle": 3}})));
        let listing = json!({ "nftables": items.clone() });
        check_listing(&listing, &want).unwrap();
        let mut short = items.clone();
        short.pop();
        assert!(check_listing(&json!({ "nftables": short }), &want).is_err());
        let mut changed = items;
        let last = changed.len() - 1;
        changed[last] = json!({"rule": {"expr": [{"accept": null}]}});
        assert!(check_listing(&json!({ "nftables": changed }), &want).is_err());
    }
}
