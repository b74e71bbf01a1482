//! The agent's seccomp profile, generated here as data and checked in as
//! specs/seccomp/agent.json (OCI LinuxSeccomp, usable as is by runc and by
//! `podman --security-opt seccomp=`). The compile step puts it in
//! `linux.seccomp`; the runtime adapts it for libcontainer (guards.rs).
//!
//! Shape: default EPERM; an allow list equivalent to Docker's default profile
//! for a container without capabilities (moby profiles/seccomp/default.json),
//! minus the calls the sandbox denies (`DENIED`, each with its reason), plus
//! conditional rules for clone, unshare, clone3, personality, ioctl and socket
//! (its family, and for AF_NETLINK its protocol).
//! Argument comparisons follow the OCI semantics: for SCMP_CMP_MASKED_EQ,
//! `value` is the mask and `valueTwo` the datum.

mod allowed;
mod decision;
mod denied;
mod extra;
mod filters;
mod profile;
mod rule;
pub mod socketcall;
pub mod syscalls;

pub use decision::{decide, Decision};
pub use denied::DENIED;
pub use extra::allow_extra;
pub use filters::{
    masked_cover, AF_ALG, AF_HIGHEST, AF_NETLINK, AF_VSOCK, CLONE_NEW_MASK, CONDITIONAL, IOCTL_DENIED, NETLINK_ROUTE,
    PERSONALITY_ALLOWED,
};
pub use profile::{agent_profile, agent_profile_json, AGENT_PROFILE_JSON, AGENT_PROFILE_NAME};
pub use rule::{ENOSYS, EPERM};
