//! Every loosening a policy spells out, one line each: what `compile` puts
//! in the `run.claude-shim.opt-outs` annotation and `verify` reports.

use super::schema::Policy;
use super::values::{AfterEffects, HomeMode, NetworkMode, ProfileRef, ServerTool};

impl Policy {
    /// Every loosening the policy spells out, one line each, for `verify`.
    /// Invocation-dependent ones (an unprivileged run without a user
    /// namespace cannot happen: it is refused) are added by `compile`.
    pub fn opt_outs(&self) -> Vec<String> {
        let mut out = Vec::new();
        let fs = &self.filesystem;
        for b in &fs.writable {
            out.push(format!("filesystem.writable: {}", b.path));
        }
        for u in &fs.unprotected {
            out.push(format!("filesystem.unprotected: {u}"));
        }
        for u in &fs.unhidden {
            out.push(format!("filesystem.unhidden: {u}"));
        }
        if fs.home == HomeMode::Host {
            out.push("filesystem.home = host".to_owned());
        }
        for s in &fs.unix_sockets {
            out.push(format!("filesystem.unix_sockets: {}", s.path));
        }
        if !fs.hide_env_files {
            out.push("filesystem.hide_env_files = false".to_owned());
        }
        if fs.after_effects == AfterEffects::Report {
            out.push(
                "filesystem.after_effects = \"report\" (what the run leaves that the host would run stays in place)"
                    .to_owned(),
            );
        }
        for n in &self.environment.pass_secrets {
            out.push(format!("environment.pass_secrets: {}", n.0));
        }
        for c in &self.identity.capabilities {
            out.push(format!("identity.capabilities: {}", c.1));
        }
        if !self.identity.no_new_privileges {
            out.push("identity.no_new_privileges = false".to_owned());
        }
        if self.resources.best_effort {
            out.push("resources.best_effort = true".to_owned());
        }
        if let ProfileRef::File(p) = &self.seccomp.profile {
            out.push(format!(
                "seccomp.profile: {} (not the built-in agent profile)",
                p.display()
            ));
        }
        for s in &self.seccomp.allow {
            out.push(format!("seccomp.allow: {}", s.0));
        }
        if self.network.mode == NetworkMode::Public {
            out.push("network.mode = public".to_owned());
        }
        for c in &self.network.allow_cidrs {
            out.push(format!("network.allow_cidrs: {}", c.0));
        }
        // web_search is what Claude Code's own WebSearch tool needs, and the
        // API reaches no address the agent names with it (docs/claude.md).
        for t in self.claude.server_tools.iter().filter(|t| **t != ServerTool::WebSearch) {
            out.push(format!("claude.server_tools: {t}"));
        }
        out
    }
}
