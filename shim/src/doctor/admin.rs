//! The admin policy, read by the same loader `create` uses: whether it is
//! there, whether it parses and is trusted, and what it enforces.

use super::check::Check;
use crate::admin;

pub fn check() -> Check {
    match admin::load() {
        Ok(None) => Check::ok(
            "admin policy",
            format!(
                "none at {}: claude-shim enforces each container's own config.json, as runc does",
                admin::DEFAULT_PATH
            ),
        ),
        Ok(Some(a)) => {
            let p = &a.policy;
            let caps = if p.identity.capabilities.is_empty() {
                String::from("no capabilities")
            } else {
                format!("capabilities at most {}", p.identity.capabilities.len())
            };
            Check::ok(
                "admin policy",
                format!(
                    "{} (\"{}\"): network {}{}, {caps}, no_new_privileges forced, its seccomp profile stacked on every container's",
                    a.path.display(),
                    p.name(),
                    p.network.mode.as_str(),
                    if p.network.allow.is_empty() { String::new() } else { format!(" ({} allowed hosts)", p.network.allow.len()) },
                ),
            )
        }
        Err(e) => Check::fail(
            "admin policy",
            format!("{e:#}"),
            "fix the file (docs/admin-policy.md), or remove it to run without one",
        ),
    }
}
