//! The engine's annotations as the admin layer reads them, and the one that
//! stacks a built-in profile on the admin policy. Below the rules that read
//! them.

use anyhow::{bail, Result};
use claude_shim_bundle::Policy;
use libcontainer::oci_spec::runtime::Spec;

/// An annotation that stacks a built-in policy on the admin policy: it can
/// only add restrictions.
pub const PROFILE_ANNOTATION: &str = "run.claude-shim.profile";

pub(super) fn annotation(spec: &Spec, key: &str) -> Option<String> {
    spec.annotations().as_ref().and_then(|a| a.get(key)).cloned()
}

pub(super) fn builtin_profile(name: &str) -> Result<Policy> {
    match name {
        "agent" => Ok(Policy::embedded_default()),
        "offline" => Ok(Policy::embedded_offline()),
        other => bail!("annotation {PROFILE_ANNOTATION}={other:?} names no built-in profile (agent, offline)"),
    }
}
