//! The sections of the settings: srt's, the `sandbox` and `permissions` of
//! Claude Code's, each key translated, named as having no equivalent, or
//! named as unknown.

use claude_shim_bundle::policy::values::{EnvPattern, HostPattern};
use claude_shim_bundle::Policy;
use serde_json::{Map, Value};

use super::paths::{rule_parts, Syntax};
use super::{js, q, Env, Imported, Scope, Source};

impl Imported {
    fn domain(&mut self, d: &str, allow: bool, at: &str) {
        let field = if allow { "network.allow" } else { "network.deny" };
        let trimmed = d.trim();
        if trimmed == "*" {
            let why = if allow {
                "every host; an allowlist cannot say that (network.mode = \"public\" does, without host names)"
            } else {
                "every host; outside network.allow nothing is reachable already"
            };
            self.note(&format!("{at} {}", q(d)), why);
            return;
        }
        match HostPattern::try_from(trimmed.to_owned()) {
            Ok(h) => {
                self.did(&format!("{at} {}", q(d)), field);
                if allow {
                    self.allow.insert(h.0);
                } else {
                    self.deny.insert(h.0);
                }
            }
            Err(e) => self.note(&format!("{at} {}", q(d)), format!("{e}; not translated")),
        }
    }

    fn filesystem(&mut self, fs: &Map<String, Value>, src: &Source, env: &Env, at: &str) {
        let syntax = if src.scope == Scope::Srt {
            Syntax::Srt
        } else {
            Syntax::Sandbox
        };
        let known: &[&str] = if src.scope == Scope::Srt {
            &[
                "denyRead",
                "allowRead",
                "allowWrite",
                "denyWrite",
                "allowGitConfig",
                "disabled",
            ]
        } else {
            &[
                "denyRead",
                "allowRead",
                "allowWrite",
                "denyWrite",
                "allowManagedReadPathsOnly",
            ]
        };
        self.unknown(fs, known, at);
        for p in self.strings(fs.get("denyRead"), &format!("{at}.denyRead")) {
            self.deny_read(&p, syntax, src, env, &format!("{at}.denyRead {}", q(&p)));
        }
        for p in self.strings(fs.get("allowWrite"), &format!("{at}.allowWrite")) {
            self.allow_write(&p, syntax, src, env, &format!("{at}.allowWrite {}", q(&p)));
        }
        for p in self.strings(fs.get("denyWrite"), &format!("{at}.denyWrite")) {
            self.deny_write(&p, syntax, src, env, &format!("{at}.denyWrite {}", q(&p)));
        }
        let allow_read = self.strings(fs.get("allowRead"), &format!("{at}.allowRead"));
        if !allow_read.is_empty() {
            self.note(
                &format!("{at}.allowRead {}", js(&Value::from(allow_read))),
                "a hidden path cannot be partly re-opened; what denyRead names stays hidden whole",
            );
        }
        for (k, why) in [
            ("allowGitConfig", "the working directory's .git/config stays read-only"),
            ("disabled", "claude-shim always confines the filesystem"),
            (
                "allowManagedReadPathsOnly",
                "it only narrows allowRead, which is not translated",
            ),
        ] {
            if let Some(v) = fs.get(k).filter(|v| known.contains(&k) && **v != Value::Bool(false)) {
                self.note(&format!("{at}.{k} = {}", js(v)), format!("{why}; not translated"));
            }
        }
    }

    fn network(&mut self, net: &Map<String, Value>, src: &Source, managed_only: bool, at: &str) {
        let mut known = vec![
            "allowedDomains",
            "deniedDomains",
            "allowUnixSockets",
            "allowAllUnixSockets",
            "allowLocalBinding",
            "allowMachLookup",
            "httpProxyPort",
            "socksProxyPort",
            "tlsTerminate",
        ];
        if src.scope == Scope::Srt {
            known.extend([
                "deniedDomainReasons",
                "strictAllowlist",
                "deniedResolvedAddresses",
                "mitmProxy",
                "parentProxy",
            ]);
        } else {
            known.push("allowManagedDomainsOnly");
        }
        self.unknown(net, &known, at);
        let allowed = self.strings(net.get("allowedDomains"), &format!("{at}.allowedDomains"));
        if managed_only && src.scope != Scope::Managed && !allowed.is_empty() {
            self.note(
                &format!("{at}.allowedDomains {}", js(&Value::from(allowed))),
                "ignored: managed settings set allowManagedDomainsOnly",
            );
        } else {
            for d in allowed {
                self.domain(&d, true, &format!("{at}.allowedDomains"));
            }
        }
        for d in self.strings(net.get("deniedDomains"), &format!("{at}.deniedDomains")) {
            self.domain(&d, false, &format!("{at}.deniedDomains"));
        }
        for (k, why) in [
            ("allowUnixSockets", "host sockets stay closed"),
            ("allowAllUnixSockets", "host sockets stay closed"),
            ("allowLocalBinding", "no port of the sandbox is reachable from the host"),
            ("allowMachLookup", "macOS only"),
            ("httpProxyPort", "the sandbox's own proxy filters; no outside proxy"),
            ("socksProxyPort", "the sandbox's own proxy filters; no outside proxy"),
            ("tlsTerminate", "the proxy does not terminate TLS"),
            ("mitmProxy", "the proxy does not hand traffic on"),
            ("parentProxy", "the proxy does not chain to another"),
            (
                "deniedDomainReasons",
                "the refusal names the policy, not a custom reason",
            ),
            (
                "deniedResolvedAddresses",
                "private ranges are refused already; no other address list",
            ),
            (
                "strictAllowlist",
                "hosts outside network.allow are refused already (no prompt)",
            ),
        ] {
            if let Some(v) = net.get(k).filter(|v| known.contains(&k) && **v != Value::Bool(false)) {
                self.note(&format!("{at}.{k} = {}", js(v)), format!("{why}; not translated"));
            }
        }
    }

    /// Top-level keys of srt's settings that are also `sandbox.*` keys of Claude Code.
    fn sandbox_scalars(&mut self, obj: &Map<String, Value>, at: &str) {
        for (k, why) in [
            ("ignoreViolations", "claude-shim reports every refusal"),
            ("enableWeakerNestedSandbox", "claude-shim has no weaker mode"),
            (
                "allowNestedUserNamespaces",
                "dropped on purpose: claude-shim never allows a user namespace inside the sandbox (its seccomp profile refuses them)",
            ),
            ("enableWeakerNetworkIsolation", "macOS only"),
            ("allowAppleEvents", "macOS only"),
            ("allowPty", "macOS only"),
            ("ripgrep", "claude-shim does not search for paths"),
            (
                "mandatoryDenySearchDepth",
                "protected paths are the built-in list, at their place",
            ),
            ("bwrapPath", "claude-shim runs no bwrap"),
            ("socatPath", "claude-shim runs no socat"),
            ("seccomp", "claude-shim's seccomp profile is its own (seccomp.profile)"),
            ("javaAgentJarPath", "the proxy is set through the environment only"),
            ("windows", "Windows only"),
            ("git", "git's safe.directory is not set"),
            (
                "failIfUnavailable",
                "claude-shim always refuses to run without its sandbox",
            ),
            (
                "autoAllowBashIfSandboxed",
                "a rule of Claude Code's prompts; it keeps applying",
            ),
            (
                "allowUnsandboxedCommands",
                "under claude-shim no command runs outside the sandbox",
            ),
        ] {
            if let Some(v) = obj.get(k).filter(|v| **v != Value::Bool(false) && !v.is_null()) {
                self.note(&format!("{at}.{k} = {}", js(v)), format!("{why}; not translated"));
            }
        }
    }

    fn credentials(&mut self, c: &Value, src: &Source, env: &Env, at: &str) {
        let Some(c) = c.as_object() else {
            return self.note(at, format!("{} is not an object; skipped", js(c)));
        };
        let known: &[&str] = if src.scope == Scope::Srt {
            &["files", "envVars", "allowPlaintextInject", "awsPairs"]
        } else {
            &["files", "envVars"]
        };
        self.unknown(c, known, at);
        let agent = Policy::embedded_default();
        for (i, f) in c
            .get("files")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let fat = format!("{at}.files[{i}]");
            match (
                f.get("path").and_then(Value::as_str),
                f.get("mode").and_then(Value::as_str),
            ) {
                (Some(p), Some("deny")) => {
                    let syntax = if src.scope == Scope::Srt {
                        Syntax::Srt
                    } else {
                        Syntax::Sandbox
                    };
                    self.deny_read(p, syntax, src, env, &format!("{fat} {}", q(p)));
                }
                _ => self.note(
                    &fat,
                    format!("{}: only {{path, mode: \"deny\"}} maps (hidden); not translated", js(f)),
                ),
            }
        }
        for (i, v) in c
            .get("envVars")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let vat = format!("{at}.envVars[{i}]");
            match (
                v.get("name").and_then(Value::as_str),
                v.get("mode").and_then(Value::as_str),
            ) {
                (Some(n), Some("deny")) => {
                    let passed = agent.environment.allow.iter().any(|p: &EnvPattern| p.matches(n))
                        || claude_shim_bundle::policy::FIXED_ENV.contains(&n);
                    if passed {
                        self.note(
                            &format!("{vat} {}", q(n)),
                            "passed by environment.allow; take it out by hand",
                        );
                    } else {
                        self.did(&format!("{vat} {}", q(n)), "not passed (the environment is cleared)");
                    }
                }
                _ => self.note(
                    &vat,
                    format!("{}: only {{name, mode: \"deny\"}} maps; not translated", js(v)),
                ),
            }
        }
        for k in ["allowPlaintextInject", "awsPairs"] {
            if let Some(v) = c.get(k).filter(|_| known.contains(&k)) {
                self.note(
                    &format!("{at}.{k} = {}", js(v)),
                    "the sandbox injects no credential; not translated",
                );
            }
        }
    }

    /// An srt settings file.
    pub fn srt(&mut self, src: &Source, env: &Env) {
        let at = src.name.clone();
        let Some(obj) = src.value.as_object() else {
            return self.note(&at, "not a JSON object; not translated");
        };
        self.unknown(
            obj,
            &[
                "network",
                "filesystem",
                "credentials",
                "ignoreViolations",
                "enableWeakerNestedSandbox",
                "allowNestedUserNamespaces",
                "enableWeakerNetworkIsolation",
                "allowAppleEvents",
                "ripgrep",
                "mandatoryDenySearchDepth",
                "allowPty",
                "seccomp",
                "bwrapPath",
                "socatPath",
                "javaAgentJarPath",
                "windows",
                "git",
            ],
            &at,
        );
        self.section(obj, src, env, false, &at);
    }

    /// The sections srt and Claude Code's `sandbox` share.
    fn section(&mut self, obj: &Map<String, Value>, src: &Source, env: &Env, managed_only: bool, at: &str) {
        match obj.get("network") {
            Some(Value::Object(net)) => self.network(net, src, managed_only, &format!("{at}.network")),
            Some(other) => self.note(
                &format!("{at}.network"),
                format!("{} is not an object; skipped", js(other)),
            ),
            None => {}
        }
        match obj.get("filesystem") {
            Some(Value::Object(fs)) => self.filesystem(fs, src, env, &format!("{at}.filesystem")),
            Some(other) => self.note(
                &format!("{at}.filesystem"),
                format!("{} is not an object; skipped", js(other)),
            ),
            None => {}
        }
        if let Some(c) = obj.get("credentials") {
            self.credentials(c, src, env, &format!("{at}.credentials"));
        }
        self.sandbox_scalars(obj, at);
    }

    /// One of Claude Code's settings files; `managed_only` when managed
    /// settings set `sandbox.network.allowManagedDomainsOnly`.
    pub fn settings(&mut self, src: &Source, env: &Env, managed_only: bool) {
        let Some(obj) = src.value.as_object() else {
            return self.note(&src.name, "not a JSON object; not translated");
        };
        let others: Vec<&str> = obj
            .keys()
            .map(String::as_str)
            .filter(|k| !["sandbox", "permissions", "$schema"].contains(k))
            .collect();
        if !others.is_empty() {
            self.note(
                &src.name,
                format!(
                    "{}: Claude Code's own settings, not the sandbox's; not translated",
                    others.join(", ")
                ),
            );
        }
        match obj.get("sandbox") {
            Some(Value::Object(sb)) => {
                let at = format!("{}: sandbox", src.name);
                self.unknown(
                    sb,
                    &[
                        "enabled",
                        "failIfUnavailable",
                        "autoAllowBashIfSandboxed",
                        "allowUnsandboxedCommands",
                        "network",
                        "filesystem",
                        "credentials",
                        "ignoreViolations",
                        "enableWeakerNestedSandbox",
                        "allowNestedUserNamespaces",
                        "enableWeakerNetworkIsolation",
                        "allowAppleEvents",
                        "excludedCommands",
                        "ripgrep",
                        "bwrapPath",
                        "socatPath",
                    ],
                    &at,
                );
                match sb.get("enabled") {
                    Some(Value::Bool(b)) if self.enabled.is_none() => self.enabled = Some((*b, at.clone())),
                    Some(Value::Bool(_)) | None => {}
                    Some(other) => self.note(&format!("{at}.enabled"), format!("{} is not a boolean", js(other))),
                }
                let ex = self.strings(sb.get("excludedCommands"), &format!("{at}.excludedCommands"));
                if !ex.is_empty() {
                    self.note(
                        &format!("{at}.excludedCommands {}", js(&Value::from(ex))),
                        "under claude-shim every command runs sandboxed; not translated",
                    );
                }
                self.section(sb, src, env, managed_only, &at);
            }
            Some(other) => self.note(
                &format!("{}: sandbox", src.name),
                format!("{} is not an object; skipped", js(other)),
            ),
            None => {}
        }
        match obj.get("permissions") {
            Some(Value::Object(perms)) => self.permissions(perms, src, env, managed_only),
            Some(other) => self.note(
                &format!("{}: permissions", src.name),
                format!("{} is not an object; skipped", js(other)),
            ),
            None => {}
        }
    }

    fn permissions(&mut self, perms: &Map<String, Value>, src: &Source, env: &Env, managed_only: bool) {
        let at = format!("{}: permissions", src.name);
        self.unknown(
            perms,
            &[
                "allow",
                "deny",
                "ask",
                "defaultMode",
                "disableBypassPermissionsMode",
                "additionalDirectories",
            ],
            &at,
        );
        for (list, allow) in [("allow", true), ("deny", false)] {
            let lat = format!("{at}.{list}");
            for rule in self.strings(perms.get(list), &lat) {
                let rat = format!("{lat} {}", q(&rule));
                match (rule_parts(&rule), allow) {
                    (("WebFetch", Some(spec)), _) if spec.starts_with("domain:") => {
                        if allow && managed_only && src.scope != Scope::Managed {
                            self.note(&rat, "ignored: managed settings set allowManagedDomainsOnly");
                        } else {
                            self.domain(&spec["domain:".len()..], allow, &lat);
                        }
                    }
                    (("Read", Some(spec)), false) => self.deny_read(spec, Syntax::Rule, src, env, &rat),
                    (("Edit", Some(spec)), false) => self.deny_write(spec, Syntax::Rule, src, env, &rat),
                    (("Edit", Some(spec)), true) => self.allow_write(spec, Syntax::Rule, src, env, &rat),
                    _ => self.note(
                        &rat,
                        "a rule of Claude Code's own prompts, not of its sandbox; it keeps applying",
                    ),
                }
            }
        }
        let dirs = self.strings(
            perms.get("additionalDirectories"),
            &format!("{at}.additionalDirectories"),
        );
        for d in dirs {
            self.allow_write(
                &d,
                Syntax::Sandbox,
                src,
                env,
                &format!("{at}.additionalDirectories {}", q(&d)),
            );
        }
        for k in ["ask", "defaultMode", "disableBypassPermissionsMode"] {
            if let Some(v) = perms.get(k) {
                self.note(
                    &format!("{at}.{k} = {}", js(v)),
                    "Claude Code's own prompts, not its sandbox; it keeps applying",
                );
            }
        }
    }
}
