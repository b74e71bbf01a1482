//! A change to a policy's lists made from the host while the sandbox runs
//! (`claude-shim allow` / `deny`, applied by the proxy and, with `--save`, to
//! the policy file): which entries move, and what the entry's host gets now.
//! Pure logic on the lists, below the proxy and the command that use it.

use serde::{Deserialize, Serialize};

use super::entries::{any_host_port, HostPattern};
use super::error::PolicyError;
use super::host::Host;
use super::{Policy, RawPolicy};

/// Which way a change goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Allow,
    Deny,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
        }
    }
}

/// One entry, parsed: `*:port`, or a host pattern.
#[derive(Debug, Clone)]
enum Entry {
    AnyHost(u16),
    Host(HostPattern),
}

impl Entry {
    fn parse(text: &str) -> Result<Self, PolicyError> {
        Ok(match any_host_port(text)? {
            Some(p) => Self::AnyHost(p),
            None => Self::Host(HostPattern::parse(text)?),
        })
    }

    /// The same entry, however it is spelled (case, a trailing dot).
    fn same(&self, other: &str) -> bool {
        match (self, Entry::parse(other)) {
            (Self::AnyHost(a), Ok(Self::AnyHost(b))) => *a == b,
            (Self::Host(a), Ok(Self::Host(b))) => a.same_as(&b),
            _ => false,
        }
    }

    /// The one host and port a user names with it (`github.com` is
    /// github.com:443), when it names one: a wildcard names many.
    fn destination(&self) -> Option<(Host, u16)> {
        let Self::Host(p) = self else { return None };
        let host = match (p.exact_name(), p.ip()) {
            (Some(n), _) => Host::Name(n.to_owned()),
            (None, Some(ip)) => Host::Ip(ip),
            (None, None) => return None,
        };
        Some((host, p.port().unwrap_or(443)))
    }
}

/// The lists after a change, and one sentence on what it did.
#[derive(Debug, Clone)]
pub struct Changed {
    pub lists: RawPolicy,
    pub said: String,
}

/// Applies `op entry` to `raw`. `allow` takes the entry off `deny` and puts
/// it on `allow`; `deny` takes it off `allow`, and puts it on `deny` only
/// when something else would still admit it (a wildcard), so that an allow
/// undone by a deny leaves the lists as they were.
pub fn apply(raw: &RawPolicy, op: Op, entry: &str) -> Result<Changed, PolicyError> {
    let text = entry.trim();
    let parsed = Entry::parse(text)?;
    let mut lists = raw.clone();
    match op {
        Op::Allow => {
            lists.deny.retain(|d| !parsed.same(d));
            if !lists.allow.iter().any(|a| parsed.same(a)) {
                lists.allow.push(text.to_owned());
            }
        }
        Op::Deny => {
            let before = lists.allow.len();
            lists.allow.retain(|a| !parsed.same(a));
            let removed = lists.allow.len() != before;
            let still = match parsed.destination() {
                Some((host, port)) => Policy::parse(&lists)?.decide(&host, port).allow,
                None => !removed,
            };
            if still && !lists.deny.iter().any(|d| parsed.same(d)) {
                lists.deny.push(text.to_owned());
            }
        }
    }
    let policy = Policy::parse(&lists)?;
    let said = match parsed.destination() {
        Some((host, port)) => {
            let d = policy.decide(&host, port);
            match (op, d.allow) {
                (Op::Allow, true) => format!("{text} is allowed ({})", d.reason),
                (Op::Allow, false) => format!("{text} stays refused ({})", d.reason),
                (Op::Deny, false) => format!("{text} is refused ({})", d.reason),
                (Op::Deny, true) => format!("{text} stays allowed ({})", d.reason),
            }
        }
        None => format!("{} {text}", op.as_str()),
    };
    Ok(Changed { lists, said })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lists(allow: &[&str], deny: &[&str]) -> RawPolicy {
        RawPolicy {
            allow: allow.iter().map(|s| s.to_string()).collect(),
            deny: deny.iter().map(|s| s.to_string()).collect(),
            allow_cidrs: vec![],
        }
    }

    #[test]
    fn allow_then_deny_leaves_the_lists_as_they_were() {
        let start = lists(&["pub.test"], &[]);
        let a = apply(&start, Op::Allow, "wild.test").unwrap();
        assert_eq!(a.lists.allow, ["pub.test", "wild.test"]);
        assert!(a.said.starts_with("wild.test is allowed"), "{}", a.said);
        let d = apply(&a.lists, Op::Deny, "WILD.test.").unwrap();
        assert_eq!(d.lists.allow, ["pub.test"]);
        assert!(d.lists.deny.is_empty(), "{:?}", d.lists);
        assert!(d.said.starts_with("WILD.test. is refused"), "{}", d.said);
    }

    #[test]
    fn allowing_twice_adds_one_entry() {
        let a = apply(&lists(&["wild.test"], &[]), Op::Allow, "wild.test").unwrap();
        assert_eq!(a.lists.allow, ["wild.test"]);
    }

    #[test]
    fn denying_a_host_a_wildcard_admits_puts_it_on_deny() {
        let d = apply(&lists(&["*.github.com"], &[]), Op::Deny, "gist.github.com").unwrap();
        assert_eq!(d.lists.allow, ["*.github.com"]);
        assert_eq!(d.lists.deny, ["gist.github.com"]);
        assert!(d.said.contains("denied by gist.github.com"), "{}", d.said);
        // And allowing it again takes it off.
        let a = apply(&d.lists, Op::Allow, "gist.github.com").unwrap();
        assert!(a.lists.deny.is_empty());
    }

    #[test]
    fn a_wider_deny_keeps_an_allowed_host_refused_and_says_so() {
        let a = apply(&lists(&[], &["*.example.com"]), Op::Allow, "api.example.com").unwrap();
        assert_eq!(a.lists.allow, ["api.example.com"]);
        assert!(
            a.said
                .starts_with("api.example.com stays refused (denied by *.example.com)"),
            "{}",
            a.said
        );
    }

    #[test]
    fn ports_and_any_host_ports() {
        let a = apply(&lists(&["github.com"], &[]), Op::Allow, "github.com:22").unwrap();
        assert_eq!(a.lists.allow, ["github.com", "github.com:22"]);
        assert!(a.said.starts_with("github.com:22 is allowed"), "{}", a.said);
        let d = apply(&a.lists, Op::Deny, "*:22").unwrap();
        assert_eq!(d.lists.deny, ["*:22"]);
        assert_eq!(d.said, "deny *:22");
    }

    #[test]
    fn a_bad_entry_changes_nothing() {
        for bad in ["", "*", "a b", "x:0", "*.com"] {
            assert!(apply(&lists(&[], &[]), Op::Allow, bad).is_err(), "{bad:?}");
        }
    }
}
