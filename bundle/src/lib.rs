//! Policy -> OCI bundle: the policy model and its validation (`policy`), the
//! seccomp profile (`seccomp`), the compilation of a policy into an `oci_spec`
//! runtime `Spec` for one invocation (`compile`) and the bundle writer
//! (`write`). This crate makes no system calls; everything it must know about
//! the machine comes through `compile::HostView`, which the binary implements.
#![forbid(unsafe_code)]

pub mod compile;
pub mod policy;
pub mod seccomp;
pub mod write;

pub use compile::{compile, CompileError, Compiled, HostView, Invocation, PathKind, Placeholder, SkeletonEntry};
pub use policy::{Policy, PolicyError};
pub use write::{fill_skeleton, write_bundle, WriteError, WriteOptions};

/// Annotation keys the compiled spec carries (the contract in the project brief).
pub mod annotations {
    /// The policy's name.
    pub const POLICY: &str = "run.claude-shim.policy";
    /// `none` | `allowlist` | `public`.
    pub const NETWORK: &str = "run.claude-shim.network";
    /// JSON `{"allow": [...], "deny": [...], "allow_cidrs": [...]}`.
    pub const NETWORK_POLICY: &str = "run.claude-shim.network.policy";
    /// `"true"` when resource limits may be skipped where cgroups cannot apply them.
    pub const BEST_EFFORT_RESOURCES: &str = "run.claude-shim.best-effort-resources";
    /// JSON array of every loosening the policy spelled out (what `verify` reports).
    pub const OPT_OUTS: &str = "run.claude-shim.opt-outs";
}
