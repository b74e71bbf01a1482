//! The machine files an install may change (engine configuration, the
//! AppArmor profile), snapshotted so a test can assert that uninstalling put
//! every one back as it was: tests/install.rs (hack/install) and tests/deb.rs
//! (the package).

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// What an install may change, and so what must come back unchanged.
pub const ENGINE_DIRS: &[&str] = &["/etc/containers", "/etc/containerd", "/etc/docker", "/etc/apparmor.d"];

/// Every file and directory under `ENGINE_DIRS`: its bytes (files; a link's
/// target) and mode.
pub type Snapshot = BTreeMap<PathBuf, (Option<Vec<u8>>, u32)>;

pub fn snapshot() -> Snapshot {
    fn walk(p: &Path, out: &mut Snapshot) {
        let Ok(meta) = std::fs::symlink_metadata(p) else { return };
        let mode = meta.permissions().mode();
        if meta.is_dir() {
            out.insert(p.to_owned(), (None, mode));
            for e in std::fs::read_dir(p).unwrap().flatten() {
                walk(&e.path(), out);
            }
        } else {
            let bytes =
                std::fs::read(p).or_else(|_| std::fs::read_link(p).map(|l| l.into_os_string().into_encoded_bytes()));
            out.insert(p.to_owned(), (Some(bytes.unwrap()), mode));
        }
    }
    let mut out = BTreeMap::new();
    for d in ENGINE_DIRS {
        walk(Path::new(d), &mut out);
    }
    out
}

/// The paths whose bytes or mode differ between two snapshots, or that only one has.
pub fn changed(before: &Snapshot, after: &Snapshot) -> Vec<PathBuf> {
    let paths: std::collections::BTreeSet<&PathBuf> = before.keys().chain(after.keys()).collect();
    paths
        .into_iter()
        .filter(|p| before.get(*p) != after.get(*p))
        .cloned()
        .collect()
}

/// Runs `doctor` from the installed binary `bin` and asserts it found each
/// engine's registration of that binary (an `ok` line naming it); returns
/// doctor's output.
pub fn assert_doctor_sees_registrations(bin: &str) -> std::process::Output {
    let doctor = std::process::Command::new(bin).arg("doctor").output().unwrap();
    let report = String::from_utf8_lossy(&doctor.stdout);
    for engine in ["podman", "docker", "containerd"] {
        let line = report
            .lines()
            .find(|l| l.contains(&format!(" {engine}: ")))
            .unwrap_or_default();
        assert!(
            line.starts_with("ok") && line.contains(bin),
            "doctor's {engine} line: {line:?}\n{report}"
        );
    }
    doctor
}

/// `man claude-shim-sandbox` (from `manpath`, or man's default path) prints
/// the verb's page.
pub fn assert_man_page(manpath: Option<&Path>) {
    let mut man = std::process::Command::new("man");
    if let Some(dir) = manpath {
        man.arg("-M").arg(dir);
    }
    let out = man
        .args(["-P", "cat", "claude-shim-sandbox"])
        .env("MANWIDTH", "80")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "man claude-shim-sandbox: {stderr}");
    assert!(stdout.contains("Run one command in a sandbox"), "{stdout}");
}
