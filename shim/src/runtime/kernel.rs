//! What the kernel says about this process (root or not, in a user namespace
//! or not, its capabilities) and which namespaces a spec asks of it: the
//! facts several verbs decide on before libcontainer sees a container.

use std::fs;

use libcontainer::oci_spec::runtime::{LinuxNamespaceType, Spec};

pub(super) fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Whether this process runs in a user namespace other than the initial
/// one (libcontainer then treats it as rootless, even as uid 0).
pub(super) fn in_user_ns() -> bool {
    libcontainer::utils::is_in_new_userns().unwrap_or(true)
}

/// Whether the spec names a namespace of this type (new or joined).
pub fn has_namespace(spec: &Spec, typ: LinuxNamespaceType) -> bool {
    spec.linux()
        .as_ref()
        .and_then(|l| l.namespaces().as_ref())
        .is_some_and(|ns| ns.iter().any(|n| n.typ() == typ))
}

pub fn has_new_namespace(spec: &Spec, typ: LinuxNamespaceType) -> bool {
    spec.linux()
        .as_ref()
        .and_then(|l| l.namespaces().as_ref())
        .is_some_and(|ns| ns.iter().any(|n| n.typ() == typ && n.path().is_none()))
}

/// The effective capability set of this process.
pub fn caps_effective() -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line.trim_start_matches("CapEff:").trim(), 16).ok()
}
