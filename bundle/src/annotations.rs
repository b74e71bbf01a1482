//! Annotation keys the compiled spec carries (the contract in the project
//! brief): `compile` writes them, the runtime and `verify` read them.

/// The policy's name.
pub const POLICY: &str = "run.claude-shim.policy";
/// `none` | `allowlist` | `public`.
pub const NETWORK: &str = "run.claude-shim.network";
/// JSON `{"allow": [...], "deny": [...], "allow_cidrs": [...]}`.
pub const NETWORK_POLICY: &str = "run.claude-shim.network.policy";
/// `HOSTPORT:PORT,...`: the ports published on the host's loopback (absent: none).
pub const NETWORK_PUBLISH: &str = "run.claude-shim.network.publish";
/// The working directory the sandbox was compiled for (the project of its run).
pub const WORKDIR: &str = "run.claude-shim.workdir";
/// The policy file the run started from (absent for an embedded policy).
pub const POLICY_FILE: &str = "run.claude-shim.policy.file";
/// `"true"` when resource limits may be skipped where cgroups cannot apply them.
pub const BEST_EFFORT_RESOURCES: &str = "run.claude-shim.best-effort-resources";
/// JSON array of every loosening the policy spelled out (what `verify` reports).
pub const OPT_OUTS: &str = "run.claude-shim.opt-outs";
