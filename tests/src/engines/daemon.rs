//! A private engine's life: the test image, an admin policy for it, its start
//! through hack/podman or hack/containerd, its stop, and the clean-up after a
//! failed test.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{rootfs, shim_path, workspace};

use super::command::text;
use super::leaks::{mounts_under, remove_cgroup_tree};

/// The image hack/podman and hack/containerd build from the test rootfs.
pub const IMAGE: &str = "localhost/claude-shim-test:latest";

/// The environment variable through which the tests choose an admin policy.
pub const ADMIN_POLICY_ENV: &str = "CLAUDE_SHIM_ADMIN_POLICY";

/// Writes an admin policy into `dir` (root's, 0700), readable, root's alone.
pub fn write_admin_policy(dir: &Path, toml: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("admin-policy.toml");
    fs::write(&path, toml).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    path
}

pub(super) fn hack(script: &str, dir: &Path, admin_policy: Option<&Path>) {
    let mut c = Command::new(workspace().join("hack").join(script));
    c.arg(dir)
        .env("CLAUDE_SHIM", shim_path())
        .env("CLAUDE_SHIM_ROOTFS", rootfs())
        .env_remove(ADMIN_POLICY_ENV)
        .stdin(Stdio::null());
    if let Some(p) = admin_policy {
        c.env(ADMIN_POLICY_ENV, p);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "hack/{script} {} failed: {}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `hack/SCRIPT stop DIR`: ends a private daemon a test started there.
pub fn stop_daemon(script: &str, dir: &Path) {
    let out = Command::new(workspace().join("hack").join(script))
        .arg("stop")
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "hack/{script} stop: {}", text(&out.stderr));
}

/// After a failed test: ends the daemon, detaches what is mounted under its
/// directory and removes its cgroups, so that later tests start clean.
pub fn tear_down(script: &str, dir: &Path, cgroup_parent: &str) {
    let _ = Command::new(workspace().join("hack").join(script))
        .arg("stop")
        .arg(dir)
        .output();
    for m in mounts_under(dir).iter().rev() {
        let _ = nix::mount::umount2(m.as_str(), nix::mount::MntFlags::MNT_DETACH);
    }
    let _ = remove_cgroup_tree(cgroup_parent);
}
