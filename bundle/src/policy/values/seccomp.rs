//! The seccomp section's values: syscall names known for x86_64 or i386,
//! and the profile, the built-in one or an OCI LinuxSeccomp JSON file.

use std::path::PathBuf;

use serde::Deserialize;

use super::filesystem::absolute_clean;

/// A syscall name known for x86_64 or i386.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct SyscallName(pub String);

impl TryFrom<String> for SyscallName {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        if !crate::seccomp::syscalls::is_known(&s) {
            return Err(format!("unknown syscall {s:?}"));
        }
        Ok(Self(s))
    }
}

/// `agent` (the built-in profile) or an absolute path to an OCI LinuxSeccomp JSON.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "String")]
pub enum ProfileRef {
    #[default]
    Agent,
    File(PathBuf),
}

impl TryFrom<String> for ProfileRef {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        if s == crate::seccomp::AGENT_PROFILE_NAME {
            return Ok(Self::Agent);
        }
        Ok(Self::File(absolute_clean(
            &s,
            "a seccomp profile other than \"agent\"",
        )?))
    }
}
