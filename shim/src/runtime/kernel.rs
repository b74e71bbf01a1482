//! What the kernel says about this process (root or not, in a user namespace
//! or not, its capabilities) and which namespaces a spec asks of it: the
//! facts several verbs decide on before libcontainer sees a container.

use std::fs;

use libcontainer::oci_spec::runtime::{LinuxNamespaceType, Spec};

pub(super) fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Whether this process runs in a user namespace other than the initial
/// one (libcontainer then treats it as rootless, even as uid 0). Read from
/// the kernel's own account of it, /proc/self/uid_map, never from the
/// environment: an unreadable map counts as a namespace, the weaker case.
pub(super) fn in_user_ns() -> bool {
    fs::read_to_string("/proc/self/uid_map").map_or(true, |m| !is_identity_map(&m))
}

/// Root of the initial user namespace: the only caller that may write under
/// /run, make cgroups anywhere and raise hard rlimits. uid 0 in a user
/// namespace an engine made (rootless podman, Docker rootless, nerdctl) is
/// root there only, as runc treats it.
pub(super) fn is_host_root() -> bool {
    is_root() && !in_user_ns()
}

/// The initial namespace's map: every uid to itself, one line.
fn is_identity_map(map: &str) -> bool {
    let mut lines = map.lines().filter(|l| !l.trim().is_empty());
    let first: Vec<&str> = lines.next().map(|l| l.split_whitespace().collect()).unwrap_or_default();
    first == ["0", "0", "4294967295"] && lines.next().is_none()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_whole_identity_map_is_the_initial_namespace() {
        assert!(is_identity_map("         0          0 4294967295\n"));
        // rootless podman's namespace: its root is the user, the rest subuids.
        assert!(!is_identity_map("0 1001 1\n1 100000 65536\n"));
        assert!(!is_identity_map("0 0 4294967295\n1 1 1\n"));
        assert!(!is_identity_map("0 0 65536\n"));
        assert!(!is_identity_map(""));
    }
}
