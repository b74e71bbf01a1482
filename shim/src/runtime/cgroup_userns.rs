//! Where a container's cgroup goes when claude-shim runs as uid 0 in a user
//! namespace its engine made (rootless podman, Docker rootless, nerdctl)
//! with the cgroupfs manager and no cgroupsPath: the subtree delegated to
//! the user who owns the namespace, or none. Read by runtime/check_bundle.rs
//! at create; the systemd manager's scope is the engine's business.
//!
//! runc runs such a container without a cgroup when it cannot make one and
//! no limit is asked; asked limits without a cgroup to hold them fail. So
//! does claude-shim, which says so in a warning rather than silently.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use libcontainer::oci_spec::runtime::LinuxResources;

use super::{cgroup, cgroup_v1_unprivileged, cgroup_v2};

/// What the engine's user runs to get cgroups (and limits) here.
const HOW_TO_GET_LIMITS: &str =
    "use the systemd cgroup manager (podman --cgroup-manager systemd) or delegate a cgroup to the user";

/// The container's cgroup path, relative to each hierarchy's root. Without
/// a delegated subtree it is one the runtime cannot make: create.rs then
/// makes none, and libcgroups leaves the container in the runtime's cgroup.
pub fn default_path(resources: Option<&LinuxResources>, id: &str) -> Result<PathBuf> {
    let limits = cgroup::asks_limits(resources);
    let (path, missing) = if cgroup_v2::is_unified() {
        match cgroup_v2::delegated(&cgroup_v2::controllers_for(resources))? {
            Ok(parent) => (parent.join(id), None),
            Err(cgroup_v2::NotDelegated(why)) => (cgroup_v2::own_cgroup()?.join(id), Some(why)),
        }
    } else {
        let owner = outside_uid(0).unwrap_or(0);
        let parent = PathBuf::from(format!("/claude-shim/user-{owner}"));
        (parent.join(id), v1_undelegated(&parent, owner))
    };
    match missing {
        None => Ok(path),
        Some(why) if limits => bail!(
            "limit container {id}: claude-shim runs as root of a user namespace its engine made, where no cgroup is delegated ({why}); {HOW_TO_GET_LIMITS}"
        ),
        Some(why) => {
            tracing::warn!("container {id} runs without a cgroup of its own, as runc does rootless: {why}");
            Ok(path)
        }
    }
}

/// Why the v1 subtree hack/delegate-cgroups makes for `owner` is not there
/// for this process, if it is not. Ownership is seen through the namespace's
/// map: the owner's directories belong to its uid 0.
fn v1_undelegated(parent: &Path, owner: u32) -> Option<String> {
    cgroup_v1_unprivileged::not_delegated(parent).map(|p| {
        format!(
            "{} is missing or not writable (as root: hack/delegate-cgroups {owner})",
            p.display()
        )
    })
}

/// The uid that `uid` of this user namespace is in its parent namespace.
fn outside_uid(uid: u32) -> Option<u32> {
    outside_of(&fs::read_to_string("/proc/self/uid_map").ok()?, uid)
}

fn outside_of(map: &str, uid: u32) -> Option<u32> {
    map.lines().find_map(|l| {
        let f: Vec<u64> = l.split_whitespace().filter_map(|x| x.parse().ok()).collect();
        let [inside, outside, count] = f[..] else { return None };
        let uid = u64::from(uid);
        (uid >= inside && uid < inside + count)
            .then(|| u32::try_from(outside + uid - inside).ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_namespace_root_is_the_user_who_made_it() {
        let podman = "         0       1001          1\n         1     100000      65536\n";
        assert_eq!(outside_of(podman, 0), Some(1001));
        assert_eq!(outside_of(podman, 1), Some(100000));
        assert_eq!(outside_of(podman, 70000), None);
        assert_eq!(outside_of("0 0 4294967295\n", 0), Some(0));
    }
}
