//! The policy's shape: `Policy` and one struct per TOML section, with the
//! defaults an absent field takes and the effective built-in lists.
//! `load` fills it, `validate` checks it across fields, `compile` reads it.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use serde::Deserialize;

use super::builtin::{builtin_protected, BUILTIN_HIDDEN, BUILTIN_MASKED};
use super::values::*;

/// The schema version this build reads.
pub const VERSION: u32 = 1;

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
    #[serde(default)]
    pub claude: Claude,
    /// Where the policy came from (a path, or `embedded:agent.toml`), for errors.
    #[serde(skip)]
    pub origin: String,
}

impl Policy {
    /// The policy's name (`custom` when it has none).
    pub fn name(&self) -> &str {
        self.name.as_ref().map(|n| n.0.as_str()).unwrap_or("custom")
    }
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
    /// Where the writes to the working directory go: the project, or a
    /// layer kept for review.
    #[serde(default)]
    pub workspace: Workspace,
    #[serde(default)]
    pub tmp: Tmp,
    #[serde(default)]
    pub writable: Vec<BindPath>,
    #[serde(default)]
    pub readonly: Vec<BindPath>,
    /// Added to the built-in protected paths (`builtin_protected`).
    #[serde(default)]
    pub protected: Vec<WorkdirPath>,
    /// Built-in protected paths to drop (an opt-out).
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
    /// What a run leaves that the host would run: moved aside or reported.
    #[serde(default)]
    pub after_effects: AfterEffects,
    /// What the caller's home shows: an empty tmpfs (the strict choice), or
    /// the host's, read-only (an opt-out).
    #[serde(default)]
    pub home: HomeMode,
    /// Host unix sockets that stay reachable; every other one visible inside
    /// is covered (an opt-out each).
    #[serde(default)]
    pub unix_sockets: Vec<BindPath>,
}

impl Default for Filesystem {
    fn default() -> Self {
        Self {
            root: RootSource::Host,
            workdir: Access::Rw,
            workspace: Workspace::Live,
            tmp: Tmp::Private,
            writable: Vec::new(),
            readonly: Vec::new(),
            protected: Vec::new(),
            unprotected: Vec::new(),
            hidden: Vec::new(),
            unhidden: Vec::new(),
            hide_env_files: true,
            masked: Vec::new(),
            after_effects: AfterEffects::Quarantine,
            home: HomeMode::Empty,
            unix_sockets: Vec::new(),
        }
    }
}

impl Filesystem {
    /// The effective protected list: the built-in one less `unprotected`, plus `protected`.
    pub fn protected_paths(&self) -> Vec<WorkdirPath> {
        let mut out: Vec<WorkdirPath> = builtin_protected()
            .into_iter()
            .filter(|b| !self.unprotected.iter().any(|u| u.path == b.path))
            .collect();
        // Thousands of entries: a set of those taken, not a scan per entry.
        let mut taken: HashSet<PathBuf> = out.iter().map(|o| o.path.clone()).collect();
        for p in &self.protected {
            if taken.insert(p.path.clone()) {
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
        // A set beside the list: policies list thousands of paths, and a
        // scan of `out` for each was quadratic.
        let mut seen: std::collections::HashSet<PolicyPath> = out.iter().cloned().collect();
        for h in &self.hidden {
            if seen.insert(h.0.clone()) {
                out.push(h.0.clone());
            }
        }
        out
    }

    /// The effective masked list.
    pub fn masked_paths(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = BUILTIN_MASKED.iter().map(PathBuf::from).collect();
        let mut seen: std::collections::HashSet<PathBuf> = out.iter().cloned().collect();
        for m in &self.masked {
            if seen.insert(m.0.clone()) {
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
    /// Ports the sandbox serves on the host's loopback, in every mode.
    #[serde(default)]
    pub publish: Vec<Publish>,
}

/// What `claude-shim claude` adds to the sandbox.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claude {
    /// The model API's server-side features a request through the gateway
    /// may use; each lets the API act on the network or on stored data for
    /// the agent. None unless listed.
    #[serde(default)]
    pub server_tools: Vec<ServerTool>,
}
