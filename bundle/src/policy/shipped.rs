//! The two policies shipped in specs/policies/, embedded in the binary:
//! agent.toml, the default, and offline.toml, the strict one.

use super::schema::Policy;

/// specs/policies/agent.toml, the default policy.
pub const AGENT_TOML: &str = include_str!("../../../specs/policies/agent.toml");
/// specs/policies/offline.toml, the strict one.
pub const OFFLINE_TOML: &str = include_str!("../../../specs/policies/offline.toml");

impl Policy {
    /// The default policy (specs/policies/agent.toml, embedded).
    pub fn embedded_default() -> Self {
        Self::from_toml_str(AGENT_TOML, "embedded:agent.toml").expect("the shipped agent policy is valid")
    }

    /// The strict policy (specs/policies/offline.toml, embedded).
    pub fn embedded_offline() -> Self {
        Self::from_toml_str(OFFLINE_TOML, "embedded:offline.toml").expect("the shipped offline policy is valid")
    }
}
