//! The network mode and lists the admin policy leaves a container: the admin
//! policy's own, narrowed (never widened) by the other layers and by the
//! engine's annotations.

use anyhow::{anyhow, bail, Result};
use claude_shim_bundle::annotations;
use claude_shim_bundle::policy::values::{CidrRule, HostPattern, NetworkMode};
use claude_shim_bundle::Policy;
use libcontainer::oci_spec::runtime::Spec;

use super::annotation::annotation;

/// The network lists of one mode, as `run.claude-shim.network.policy` holds them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NetLists {
    #[serde(default)]
    pub(super) allow: Vec<String>,
    #[serde(default)]
    pub(super) deny: Vec<String>,
    #[serde(default)]
    pub(super) allow_cidrs: Vec<String>,
}

/// none > allowlist > public.
fn strictness(m: NetworkMode) -> u8 {
    match m {
        NetworkMode::None => 2,
        NetworkMode::Allowlist => 1,
        NetworkMode::Public => 0,
    }
}

fn parse_mode(s: &str) -> Option<NetworkMode> {
    match s {
        "none" => Some(NetworkMode::None),
        "allowlist" => Some(NetworkMode::Allowlist),
        "public" => Some(NetworkMode::Public),
        _ => None,
    }
}

/// Whether the allow list `outer` admits everything entry `inner` does: the
/// same pattern, or a `*.domain` over it, on the same port; an entry without
/// a port admits 443, 80 and the list's `*:port` ports, so it covers an
/// inner entry on one of those, and an inner `*:port` needs the same entry.
pub(super) fn covered(outer: &[String], inner: &str) -> bool {
    let split = |p: &str| match p.rsplit_once(':') {
        Some((h, port)) => (h.to_owned(), Some(port.to_owned())),
        None => (p.to_owned(), None),
    };
    let (ih, ip) = split(inner);
    if ih == "*" {
        return outer.iter().any(|o| o == inner);
    }
    let any_host = |port: &str| outer.iter().any(|o| o.strip_prefix("*:") == Some(port));
    outer.iter().any(|o| {
        let (oh, op) = split(o);
        let port_ok = match (&op, &ip) {
            (Some(op), Some(ip)) => op == ip,
            (Some(_), None) => false,
            (None, None) => true,
            (None, Some(ip)) => ["443", "80"].contains(&ip.as_str()) || any_host(ip),
        };
        let host_ok = oh == ih
            || oh.strip_prefix("*.").is_some_and(|domain| {
                let name = ih.strip_prefix("*.").unwrap_or(&ih);
                name.ends_with(&format!(".{domain}"))
            });
        oh != "*" && port_ok && host_ok
    })
}

/// Narrows the current mode and lists by a request (a layer's or the
/// engine's annotations), refusing one that asks for more.
fn narrow(
    cur: (NetworkMode, NetLists),
    mode: NetworkMode,
    lists: Option<NetLists>,
    who: &str,
) -> Result<(NetworkMode, NetLists)> {
    let (cur_mode, cur_lists) = cur;
    if strictness(mode) < strictness(cur_mode) {
        bail!(
            "{who} asks for network mode {:?}, more than the admin policy's {:?}",
            mode.as_str(),
            cur_mode.as_str()
        );
    }
    Ok(match mode {
        NetworkMode::None => (NetworkMode::None, NetLists::default()),
        NetworkMode::Allowlist => {
            let asked = lists.unwrap_or_else(|| {
                if cur_mode == NetworkMode::Allowlist {
                    cur_lists.clone()
                } else {
                    NetLists::default()
                }
            });
            if cur_mode == NetworkMode::Allowlist {
                if let Some(h) = asked.allow.iter().find(|h| !covered(&cur_lists.allow, h)) {
                    bail!("{who} allows host {h:?}, which the admin policy does not");
                }
            }
            let mut deny = cur_lists.deny.clone();
            for d in asked.deny {
                if !deny.contains(&d) {
                    deny.push(d);
                }
            }
            (
                NetworkMode::Allowlist,
                NetLists {
                    allow: asked.allow,
                    deny,
                    allow_cidrs: Vec::new(),
                },
            )
        }
        NetworkMode::Public => {
            let asked = lists
                .map(|l| l.allow_cidrs)
                .unwrap_or_else(|| cur_lists.allow_cidrs.clone());
            if let Some(c) = asked.iter().find(|c| !cur_lists.allow_cidrs.contains(c)) {
                bail!("{who} opens {c}, which the admin policy does not");
            }
            (
                NetworkMode::Public,
                NetLists {
                    allow_cidrs: asked,
                    ..NetLists::default()
                },
            )
        }
    })
}

fn lists_of(p: &Policy) -> NetLists {
    NetLists {
        allow: p.network.allow.iter().map(|h| h.0.clone()).collect(),
        deny: p.network.deny.iter().map(|h| h.0.clone()).collect(),
        allow_cidrs: p.network.allow_cidrs.iter().map(|c| c.0.clone()).collect(),
    }
}

/// The network mode and lists: the admin policy's, narrowed by the other
/// layers and by the engine's annotations; written back as annotations for
/// the network helper.
pub(super) fn resolve_network(spec: &mut Spec, layers: &[Policy]) -> Result<NetworkMode> {
    let Some((first, rest)) = layers.split_first() else {
        bail!("no admin policy to apply");
    };
    let mut cur = (first.network.mode, lists_of(first));
    for p in rest {
        cur = narrow(
            cur,
            p.network.mode,
            Some(lists_of(p)),
            &format!("profile {:?}", p.name()),
        )?;
    }
    let asked_mode = annotation(spec, annotations::NETWORK);
    let asked_lists = annotation(spec, annotations::NETWORK_POLICY);
    if asked_mode.is_some() || asked_lists.is_some() {
        let mode = match &asked_mode {
            Some(m) => parse_mode(m).ok_or_else(|| {
                anyhow!(
                    "annotation {}={m:?} is not none, allowlist or public",
                    annotations::NETWORK
                )
            })?,
            None => cur.0,
        };
        let lists = match &asked_lists {
            Some(json) => {
                let l: NetLists = serde_json::from_str(json)
                    .map_err(|e| anyhow!("annotation {} is not valid: {e}", annotations::NETWORK_POLICY))?;
                for h in l.allow.iter().chain(&l.deny) {
                    HostPattern::try_from(h.clone())
                        .map_err(|e| anyhow!("annotation {}: {e}", annotations::NETWORK_POLICY))?;
                }
                for c in &l.allow_cidrs {
                    CidrRule::try_from(c.clone())
                        .map_err(|e| anyhow!("annotation {}: {e}", annotations::NETWORK_POLICY))?;
                }
                Some(l)
            }
            None => None,
        };
        let who = match &asked_mode {
            Some(m) => format!("annotation {}={m:?}", annotations::NETWORK),
            None => format!("annotation {}", annotations::NETWORK_POLICY),
        };
        cur = narrow(cur, mode, lists, &who)?;
    }
    let mut ann = spec.annotations().clone().unwrap_or_default();
    ann.insert(annotations::NETWORK.to_owned(), cur.0.as_str().to_owned());
    ann.insert(
        annotations::NETWORK_POLICY.to_owned(),
        serde_json::to_string(&cur.1).expect("strings serialize"),
    );
    spec.set_annotations(Some(ann));
    Ok(cur.0)
}
