//! The cgroup layout and whether the caller can make a cgroup where the
//! runtime would put a container: root makes (and removes) a scratch cgroup;
//! an unprivileged caller needs a delegated subtree.

use std::path::{Path, PathBuf};

use super::check::Check;
use crate::runtime::{cgroup_v1_unprivileged, cgroup_v2};

pub fn checks() -> Vec<Check> {
    vec![version(), delegation()]
}

fn version() -> Check {
    if cgroup_v2::is_unified() {
        Check::ok("cgroup version", "v2 (unified)")
    } else if Path::new("/sys/fs/cgroup/unified").is_dir() {
        Check::ok("cgroup version", "v1 with cgroup2 at /sys/fs/cgroup/unified (hybrid)")
    } else if cgroup_v1_unprivileged::is_v1() {
        Check::ok("cgroup version", "v1")
    } else {
        Check::fail(
            "cgroup version",
            "no cgroup hierarchy under /sys/fs/cgroup",
            "mount cgroup2 on /sys/fs/cgroup (or the v1 controllers)",
        )
    }
}

fn delegation() -> Check {
    let root = nix::unistd::geteuid().is_root();
    if root {
        return match scratch_cgroup() {
            Ok(made) => Check::ok(
                "cgroup delegation",
                format!("root: made and removed {}", made.display()),
            ),
            Err(e) => Check::fail(
                "cgroup delegation",
                e,
                "run claude-shim as root on the host (not inside a container), with /sys/fs/cgroup writable",
            ),
        };
    }
    if cgroup_v2::is_unified() {
        return match cgroup_v2::delegated(&[]) {
            Ok(Ok(rel)) => Check::ok("cgroup delegation", format!("the caller owns its cgroup {}", rel.display())),
            Ok(Err(cgroup_v2::NotDelegated(why))) => Check::warn(
                "cgroup delegation",
                why,
                "run in a delegated scope (systemd-run --user --scope -p Delegate=yes ...); without one, sandboxes run without limits of their own",
            ),
            Err(e) => Check::fail("cgroup delegation", format!("{e:#}"), "mount cgroup2 on /sys/fs/cgroup"),
        };
    }
    let uid = nix::unistd::geteuid();
    let parent = PathBuf::from(format!("/claude-shim/user-{uid}"));
    match cgroup_v1_unprivileged::not_delegated(&parent) {
        None => Check::ok(
            "cgroup delegation",
            format!("{} is delegated to uid {uid}", parent.display()),
        ),
        Some(p) => Check::warn(
            "cgroup delegation",
            format!("{} is missing or not writable", p.display()),
            format!("as root: hack/delegate-cgroups {uid}; without it, sandboxes run without limits of their own"),
        ),
    }
}

/// Makes and removes a cgroup below the root of the hierarchy the runtime
/// would use first (cgroup2 when unified, else the pids controller).
fn scratch_cgroup() -> Result<PathBuf, String> {
    let base = if cgroup_v2::is_unified() {
        "/sys/fs/cgroup"
    } else {
        "/sys/fs/cgroup/pids"
    };
    let dir = Path::new(base).join(format!("claude-shim-doctor-{}", std::process::id()));
    std::fs::create_dir(&dir).map_err(|e| format!("create cgroup {}: {e}", dir.display()))?;
    std::fs::remove_dir(&dir).map_err(|e| format!("remove cgroup {}: {e}", dir.display()))?;
    Ok(dir)
}
