//! What an engine and the runtime it drove must not leave: mounts, sockets,
//! processes and cgroups under a test's private directory and parent, found
//! and reported, and cgroups removed.

use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use crate::processes;

/// Mount points at or under `dir`.
pub fn mounts_under(dir: &Path) -> Vec<String> {
    let prefix = dir.to_string_lossy().into_owned();
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(str::to_owned))
        .filter(|m| m == &prefix || m.starts_with(&format!("{prefix}/")))
        .collect()
}

/// Unix sockets at or under `dir`.
pub fn sockets_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let Ok(t) = e.file_type() else { continue };
            if t.is_socket() {
                out.push(e.path());
            } else if t.is_dir() {
                stack.push(e.path());
            }
        }
    }
    out
}

/// Pids and command lines of processes that mention `needle` (a private path).
pub fn processes_mentioning(needle: &str) -> Vec<(i32, String)> {
    processes()
        .into_iter()
        .filter(|p| p.mentions(needle))
        .map(|p| (p.pid, p.cmdline))
        .collect()
}

/// Removes cgroup `rel` (and its empty children) in every hierarchy; returns
/// what could not be removed.
pub fn remove_cgroup_tree(rel: &str) -> Vec<String> {
    let mut left = Vec::new();
    let Ok(hierarchies) = fs::read_dir("/sys/fs/cgroup") else {
        return left;
    };
    for h in hierarchies.flatten() {
        let top = h.path().join(rel.trim_start_matches('/'));
        if !top.is_dir() {
            continue;
        }
        // A controller this host does not mount (hugetlb, net_cls, net_prio,
        // perf_event here) is a plain folder on /sys/fs/cgroup's tmpfs, where
        // conmon still makes our parent and writes a `tasks` file: not a
        // cgroup, and the folder is this test's own (its unique name).
        if !is_cgroupfs(&h.path()) {
            let _ = fs::remove_dir_all(&top);
            continue;
        }
        let mut dirs = vec![top.clone()];
        let mut i = 0;
        while i < dirs.len() {
            if let Ok(entries) = fs::read_dir(&dirs[i]) {
                for e in entries.flatten() {
                    if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                        dirs.push(e.path());
                    }
                }
            }
            i += 1;
        }
        for d in dirs.iter().rev() {
            if let Err(e) = fs::remove_dir(d) {
                let procs = fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default();
                left.push(format!("cgroup {} ({e}; processes: {})", d.display(), procs.trim()));
            }
        }
    }
    left
}

/// Entries of a directory, or none when it does not exist.
pub fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .map(|e| e.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Mounts under the daemon's directory, shim sockets that were not there
/// before it, and processes naming its directory: what a daemon and the
/// runtime it drove must not leave.
pub fn daemon_leaks(dir: &Path, shim_sockets_before: &[PathBuf]) -> Vec<String> {
    let mut leaks: Vec<String> = mounts_under(dir).into_iter().map(|m| format!("mount {m}")).collect();
    leaks.extend(
        entries(Path::new("/run/containerd/s"))
            .into_iter()
            .filter(|s| !shim_sockets_before.contains(s))
            .map(|s| format!("shim socket {}", s.display())),
    );
    leaks.extend(
        processes_mentioning(&dir.to_string_lossy())
            .into_iter()
            .map(|(pid, cmd)| format!("process {pid}: {cmd}")),
    );
    leaks
}

/// Fails the test with one line per thing `daemon` left in `dir`.
pub fn assert_nothing_left(daemon: &str, dir: &Path, leaks: &[String]) {
    assert!(
        leaks.is_empty(),
        "{daemon} in {} left behind:\n{}",
        dir.display(),
        leaks.join("\n")
    );
}

/// Whether `path` is on a cgroup (v1 or v2) filesystem.
fn is_cgroupfs(path: &Path) -> bool {
    use nix::sys::statfs::{statfs, CGROUP2_SUPER_MAGIC, CGROUP_SUPER_MAGIC};
    statfs(path).is_ok_and(|s| s.filesystem_type() == CGROUP_SUPER_MAGIC || s.filesystem_type() == CGROUP2_SUPER_MAGIC)
}
