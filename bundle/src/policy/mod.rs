//! The policy model: what a sandbox may see, write, call and reach. It is
//! read from TOML (`load`), checked field by field while parsing (`values`)
//! and across fields (`Policy::validate`), then handed to `compile`. Every
//! field is optional and its absence means the strict choice; unknown fields
//! are errors. The schema is documented in specs/policies/README.md.

mod env;
mod load;
pub mod values;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

pub use self::env::{is_secret_name, SECRET_PATTERNS};
pub use self::load::PolicyError;
use self::values::*;

/// The schema version this build reads.
pub const VERSION: u32 = 1;

/// specs/policies/agent.toml, the default policy.
pub const AGENT_TOML: &str = include_str!("../../../specs/policies/agent.toml");
/// specs/policies/offline.toml, the strict one.
pub const OFFLINE_TOML: &str = include_str!("../../../specs/policies/offline.toml");

/// Paths inside the working directory that stay read-only although it is
/// writable: code that runs outside the sandbox later (git hooks, git config,
/// the agent's own settings and MCP servers, shell start-up files, IDE
/// settings, direnv) must not be planted from inside it. A trailing `/`
/// marks a directory.
pub const BUILTIN_PROTECTED: &[&str] = &[
    ".git/hooks/",
    ".git/config",
    ".claude/",
    ".mcp.json",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".gitconfig",
    ".gitmodules",
    ".vscode/",
    ".idea/",
    ".envrc",
];

/// Secrets of the caller that read as empty inside the sandbox.
pub const BUILTIN_HIDDEN: &[&str] = &[
    "~/.ssh",
    "~/.aws",
    "~/.gnupg",
    "~/.config/gcloud",
    "~/.azure",
    "~/.netrc",
    "~/.Xauthority",
    "~/.docker/config.json",
    "~/.kube",
    "~/.git-credentials",
    "~/.config/gh/hosts.yml",
    "~/.npmrc",
    "~/.pypirc",
    "~/.cargo/credentials.toml",
    "~/.claude/.credentials.json",
];

/// Host paths covered with an empty tmpfs: per-user runtime directories
/// (D-Bus, agent and IDE sockets) and secrets injected by engines.
pub const BUILTIN_MASKED: &[&str] = &["/run/user", "/run/secrets", "/var/run/secrets"];

/// Variables that always pass (when set) whatever `environment.allow` says.
pub const FIXED_ENV: &[&str] = &["PATH", "HOME", "TERM", "LANG"];

/// The policy file, as parsed.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    pub version: SchemaVersion,
    #[serde(default)]
    pub name: Option<PolicyName>,
    #[serde(default)]
    pub filesystem: Filesystem,
    #[serde(default)]
    pub environment: Environment,
    #[serde(default)]
    pub identity: Identity,
    #[serde(default)]
    pub resources: Resources,
    #[serde(default)]
    pub seccomp: Seccomp,
    #[serde(default)]
    pub network: Network,
    /// Where the policy came from (a path, or `embedded:agent.toml`), for errors.
    #[serde(skip)]
    pub origin: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "i64")]
pub struct SchemaVersion(pub u32);

impl TryFrom<i64> for SchemaVersion {
    type Error = String;
    fn try_from(v: i64) -> Result<Self, String> {
        if v != i64::from(VERSION) {
            return Err(format!("unsupported version {v}; this build reads version {VERSION}"));
        }
        Ok(Self(VERSION))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct PolicyName(pub String);

impl TryFrom<String> for PolicyName {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let ok = !s.is_empty() && s.len() <= 64 && s.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
        if !ok {
            return Err(format!("{s:?}: a name is 1 to 64 of [A-Za-z0-9._-]"));
        }
        Ok(Self(s))
    }
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Filesystem {
    #[serde(default)]
    pub root: RootSource,
    #[serde(default)]
    pub workdir: Access,
    #[serde(default)]
    pub tmp: Tmp,
    #[serde(default)]
    pub writable: Vec<BindPath>,
    #[serde(default)]
    pub readonly: Vec<BindPath>,
    /// Added to `BUILTIN_PROTECTED`.
    #[serde(default)]
    pub protected: Vec<WorkdirPath>,
    /// Entries of `BUILTIN_PROTECTED` to drop (an opt-out).
    #[serde(default)]
    pub unprotected: Vec<WorkdirPath>,
    /// Added to `BUILTIN_HIDDEN`.
    #[serde(default)]
    pub hidden: Vec<HostPath>,
    /// Entries of `BUILTIN_HIDDEN` to drop (an opt-out).
    #[serde(default)]
    pub unhidden: Vec<HostPath>,
    #[serde(default = "yes")]
    pub hide_env_files: bool,
    /// Added to `BUILTIN_MASKED`.
    #[serde(default)]
    pub masked: Vec<AbsPath>,
}

impl Default for Filesystem {
    fn default() -> Self {
        Self {
            root: RootSource::Host,
            workdir: Access::Rw,
            tmp: Tmp::Private,
            writable: Vec::new(),
            readonly: Vec::new(),
            protected: Vec::new(),
            unprotected: Vec::new(),
            hidden: Vec::new(),
            unhidden: Vec::new(),
            hide_env_files: true,
            masked: Vec::new(),
        }
    }
}

impl Filesystem {
    /// The effective protected list: the built-in one less `unprotected`, plus `protected`.
    pub fn protected_paths(&self) -> Vec<WorkdirPath> {
        let mut out: Vec<WorkdirPath> = BUILTIN_PROTECTED
            .iter()
            .map(|s| WorkdirPath::new(s).expect("built-in protected paths are valid"))
            .filter(|b| !self.unprotected.iter().any(|u| u.path == b.path))
            .collect();
        for p in &self.protected {
            if !out.iter().any(|o| o.path == p.path) {
                out.push(p.clone());
            }
        }
        out
    }

    /// The effective hidden list: the built-in one less `unhidden`, plus `hidden`.
    pub fn hidden_paths(&self) -> Vec<PolicyPath> {
        let mut out: Vec<PolicyPath> = BUILTIN_HIDDEN
            .iter()
            .map(|s| {
                HostPath::try_from(s.to_string())
                    .expect("built-in hidden paths are valid")
                    .0
            })
            .filter(|b| !self.unhidden.iter().any(|u| &u.0 == b))
            .collect();
        for h in &self.hidden {
            if !out.contains(&h.0) {
                out.push(h.0.clone());
            }
        }
        out
    }

    /// The effective masked list.
    pub fn masked_paths(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = BUILTIN_MASKED.iter().map(PathBuf::from).collect();
        for m in &self.masked {
            if !out.contains(&m.0) {
                out.push(m.0.clone());
            }
        }
        out
    }
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Environment {
    /// Added to `FIXED_ENV`; names or `PREFIX*` patterns. The secret rule wins.
    #[serde(default)]
    pub allow: Vec<EnvPattern>,
    /// Exact names the secret rule would drop, passed anyway (an opt-out).
    #[serde(default)]
    pub pass_secrets: Vec<EnvName>,
    /// Set inside the sandbox, over what the caller passed.
    #[serde(default)]
    pub set: BTreeMap<EnvName, String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Identity {
    #[serde(default)]
    pub user_namespace: UserNamespace,
    /// Kept in all five sets (an opt-out); empty = no capability at all.
    #[serde(default)]
    pub capabilities: Vec<CapabilityName>,
    /// false = an opt-out.
    #[serde(default = "yes")]
    pub no_new_privileges: bool,
}

impl Default for Identity {
    fn default() -> Self {
        Self {
            user_namespace: UserNamespace::Auto,
            capabilities: Vec::new(),
            no_new_privileges: true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    #[serde(default)]
    pub memory: Option<ByteSize>,
    #[serde(default)]
    pub pids: Option<Positive>,
    #[serde(default)]
    pub cpus: Option<Cpus>,
    /// true = limits the machine's cgroups cannot apply are skipped (an opt-out).
    #[serde(default)]
    pub best_effort: bool,
    /// Soft = hard limit per resource (`nofile = 4096`, `core = 0`).
    #[serde(default)]
    pub rlimits: BTreeMap<RlimitName, Count>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "i64")]
pub struct Positive(pub u64);

impl TryFrom<i64> for Positive {
    type Error = String;
    fn try_from(v: i64) -> Result<Self, String> {
        if v <= 0 {
            return Err(format!("{v} must be positive"));
        }
        Ok(Self(v as u64))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "i64")]
pub struct Count(pub u64);

impl TryFrom<i64> for Count {
    type Error = String;
    fn try_from(v: i64) -> Result<Self, String> {
        if v < 0 {
            return Err(format!("{v} must not be negative"));
        }
        Ok(Self(v as u64))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(try_from = "toml::Value")]
pub struct Cpus(pub f64);

impl TryFrom<toml::Value> for Cpus {
    type Error = String;
    fn try_from(v: toml::Value) -> Result<Self, String> {
        let n = match v {
            toml::Value::Float(f) => f,
            toml::Value::Integer(i) => i as f64,
            other => return Err(format!("{other} is not a number of CPUs")),
        };
        if !(0.01..=1024.0).contains(&n) {
            return Err(format!("{n} CPUs is outside 0.01..=1024"));
        }
        Ok(Self(n))
    }
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seccomp {
    #[serde(default)]
    pub profile: ProfileRef,
    /// Allowed on top of the profile, unconditionally (an opt-out).
    #[serde(default)]
    pub allow: Vec<SyscallName>,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    #[serde(default)]
    pub mode: NetworkMode,
    #[serde(default)]
    pub allow: Vec<HostPattern>,
    #[serde(default)]
    pub deny: Vec<HostPattern>,
    #[serde(default)]
    pub allow_cidrs: Vec<CidrRule>,
}

/// A field path and what is wrong with it, before the origin is added.
pub(crate) type FieldError = (String, String);

fn err<T>(path: impl Into<String>, msg: impl Into<String>) -> Result<T, FieldError> {
    Err((path.into(), msg.into()))
}

/// Paths the sandbox gets from the kernel, never from the host.
const PSEUDO: &[&str] = &["/proc", "/sys", "/dev"];

fn under(path: &Path, base: &Path) -> bool {
    path.starts_with(base)
}

impl Policy {
    /// Parses and checks a policy; `origin` names it in errors.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Self, PolicyError> {
        load::parse(text, origin)
    }

    /// The default policy (specs/policies/agent.toml, embedded).
    pub fn embedded_default() -> Self {
        Self::from_toml_str(AGENT_TOML, "embedded:agent.toml").expect("the shipped agent policy is valid")
    }

    /// The strict policy (specs/policies/offline.toml, embedded).
    pub fn embedded_offline() -> Self {
        Self::from_toml_str(OFFLINE_TOML, "embedded:offline.toml").expect("the shipped offline policy is valid")
    }

    /// The policy's name (`custom` when it has none).
    pub fn name(&self) -> &str {
        self.name.as_ref().map(|n| n.0.as_str()).unwrap_or("custom")
    }

    /// Checks across fields (what a single value cannot tell).
    pub(crate) fn validate(&self) -> Result<(), FieldError> {
        let fs = &self.filesystem;
        for (i, u) in fs.unprotected.iter().enumerate() {
            if !BUILTIN_PROTECTED
                .iter()
                .any(|b| WorkdirPath::new(b).map(|w| w.path == u.path).unwrap_or(false))
            {
                return err(
                    format!("filesystem.unprotected[{i}]"),
                    format!("{u} is not a built-in protected path"),
                );
            }
        }
        for (i, u) in fs.unhidden.iter().enumerate() {
            if !BUILTIN_HIDDEN
                .iter()
                .any(|b| HostPath::try_from(b.to_string()).map(|h| h == *u).unwrap_or(false))
            {
                return err(
                    format!("filesystem.unhidden[{i}]"),
                    format!("{u} is not a built-in hidden path"),
                );
            }
        }
        let mut binds: Vec<(String, &BindPath)> = Vec::new();
        for (field, list) in [("writable", &fs.writable), ("readonly", &fs.readonly)] {
            for (i, b) in list.iter().enumerate() {
                binds.push((format!("filesystem.{field}[{i}]"), b));
            }
        }
        for (i, (path, b)) in binds.iter().enumerate() {
            if let PolicyPath::Absolute(p) = &b.path {
                if p == Path::new("/") {
                    return err(
                        path,
                        "\"/\" cannot be bound; the host's root is already visible read-only",
                    );
                }
                if let Some(ps) = PSEUDO.iter().find(|ps| under(p, Path::new(ps))) {
                    return err(
                        path,
                        format!("{}: {ps} comes from the kernel, not from the host", b.path),
                    );
                }
            }
            for (other, ob) in &binds[..i] {
                if ob.path == b.path {
                    return err(path, format!("{} is already listed in {other}", b.path));
                }
            }
            for h in fs.hidden_paths() {
                if same_base_under(&b.path, &h) {
                    return err(
                        path,
                        format!(
                            "{} is a hidden path or lies under one ({h}); list it in filesystem.unhidden first",
                            b.path
                        ),
                    );
                }
            }
        }
        for (i, m) in fs.masked.iter().enumerate() {
            if m.0 == Path::new("/") || PSEUDO.iter().any(|ps| under(&m.0, Path::new(ps))) {
                return err(
                    format!("filesystem.masked[{i}]"),
                    format!("{} cannot be masked", m.0.display()),
                );
            }
        }

        let env = &self.environment;
        for (i, n) in env.pass_secrets.iter().enumerate() {
            if !is_secret_name(&n.0) {
                return err(
                    format!("environment.pass_secrets[{i}]"),
                    format!("{} is not a secret name; list it in environment.allow instead", n.0),
                );
            }
        }
        for (name, value) in &env.set {
            let path = format!("environment.set.{}", name.0);
            if value.contains('\0') {
                // It becomes an envp entry, a C string: the container's init
                // would fail on it (issue 11: it panicked).
                return err(path, "the value holds a NUL byte");
            }
            if name.0 == "IS_SANDBOX" {
                return err(path, "IS_SANDBOX is always 1 inside the sandbox");
            }
            if self.network.mode == NetworkMode::Allowlist && env::PROXY_VARS.contains(&name.0.as_str()) {
                return err(path, "the proxy variables are set by the allowlist network mode");
            }
        }

        let net = &self.network;
        match net.mode {
            NetworkMode::None => {
                for (field, empty) in [
                    ("allow", net.allow.is_empty()),
                    ("deny", net.deny.is_empty()),
                    ("allow_cidrs", net.allow_cidrs.is_empty()),
                ] {
                    if !empty {
                        return err(
                            format!("network.{field}"),
                            "has no effect with mode = \"none\" (loopback only)",
                        );
                    }
                }
            }
            NetworkMode::Allowlist => {
                if !net.allow_cidrs.is_empty() {
                    return err("network.allow_cidrs", "is only used with mode = \"public\"");
                }
            }
            NetworkMode::Public => {
                for (field, empty) in [("allow", net.allow.is_empty()), ("deny", net.deny.is_empty())] {
                    if !empty {
                        return err(
                            format!("network.{field}"),
                            "host names are filtered only with mode = \"allowlist\"; public mode filters addresses (allow_cidrs)",
                        );
                    }
                }
            }
        }

        if let Some(ByteSize(m)) = self.resources.memory {
            if m < 16 << 20 {
                return err(
                    "resources.memory",
                    format!("{m} bytes is below 16MiB, too little to start anything"),
                );
            }
        }
        let mut seen = Vec::new();
        for (i, s) in self.seccomp.allow.iter().enumerate() {
            if seen.contains(&&s.0) {
                return err(format!("seccomp.allow[{i}]"), format!("{:?} is listed twice", s.0));
            }
            seen.push(&s.0);
        }
        Ok(())
    }

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
        if !fs.hide_env_files {
            out.push("filesystem.hide_env_files = false".to_owned());
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
        out
    }
}

/// `a` equals `b` or lies under it, when both are written from the same base.
fn same_base_under(a: &PolicyPath, b: &PolicyPath) -> bool {
    match (a, b) {
        (PolicyPath::Absolute(x), PolicyPath::Absolute(y)) | (PolicyPath::Home(x), PolicyPath::Home(y)) => {
            x.starts_with(y)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests;
