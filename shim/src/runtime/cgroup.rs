//! The container's cgroup, between the guards (which adapt the spec) and
//! libcontainer (which joins it): where config.json's `cgroupsPath` may lead,
//! which directories `create` made for the container, and removing only those;
//! and the libcgroups manager the verbs open on it.
//!
//! libcgroups joins `cgroupsPath` to each hierarchy's mount point without
//! cleaning it: `"//"` is the root cgroup (and libcgroups' remove then kills
//! every process of the machine), `/../x` climbs out of cgroupfs. runc cleans
//! the path; claude-shim also confines it below a configured parent, and
//! removes or signals through a cgroup only when `create` made it.

use std::fs;
use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use libcgroups::common::CgroupConfig;
use libcontainer::oci_spec::runtime::LinuxResources;

/// The cgroup every container must be below (a cgroup path such as
/// `/kubepods` or `/machine`); `/` (the default) allows any cgroup but a
/// hierarchy's root. Engines pass it in the runtime's environment.
pub const PARENT_ENV: &str = "CLAUDE_SHIM_CGROUP_PARENT";

/// `raw` cleaned lexically as if rooted at `/`: empty and `.` parts are
/// dropped, `..` goes up but never above the root (as runc's CleanPath).
pub fn clean(raw: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in raw.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// The configured parent: $CLAUDE_SHIM_CGROUP_PARENT, cleaned, or `/`.
pub fn configured_parent() -> PathBuf {
    match std::env::var_os(PARENT_ENV) {
        Some(p) if !p.is_empty() => clean(Path::new(&p)),
        _ => PathBuf::from("/"),
    }
}

/// Cleans `raw` and refuses a path that is a hierarchy's root or not
/// strictly below `parent` (itself clean).
pub fn confine(raw: &Path, parent: &Path) -> Result<PathBuf> {
    let path = clean(raw);
    if path == Path::new("/") {
        bail!(
            "use cgroupsPath {:?}: it resolves to the cgroup root /; a container needs a cgroup of its own",
            raw.display().to_string()
        );
    }
    if !path.starts_with(parent) || path == parent {
        bail!(
            "use cgroupsPath {:?}: it resolves to {}, which is not below the runtime's cgroup parent {} (set by {PARENT_ENV})",
            raw.display().to_string(),
            path.display(),
            parent.display()
        );
    }
    Ok(path)
}

/// The hierarchy roots libcgroups puts a container in: each supported v1
/// controller's mount point (legacy and hybrid) and, on a hybrid host, the
/// cgroup2 mount beside them (runc places the container there too); or the
/// unified root.
pub fn hierarchies() -> Result<Vec<PathBuf>> {
    let mut roots = controller_hierarchies()?;
    roots.extend(hybrid_unified()?);
    Ok(roots)
}

/// On a hybrid host, the cgroup2 mount beside the v1 hierarchies
/// (/sys/fs/cgroup/unified); None elsewhere.
fn hybrid_unified() -> Result<Option<PathBuf>> {
    static KEPT: OnceLock<Option<PathBuf>> = OnceLock::new();
    read_once(&KEPT, read_hybrid_unified)
}

/// What `read` finds, read once per process and kept: the hierarchies are
/// mounted at boot, and each reading parses mountinfo (create and delete
/// asked three times each). A failed reading is not kept.
fn read_once<T: Clone>(kept: &OnceLock<T>, read: fn() -> Result<T>) -> Result<T> {
    if let Some(found) = kept.get() {
        return Ok(found.clone());
    }
    let found = read()?;
    Ok(kept.get_or_init(|| found).clone())
}

fn read_hybrid_unified() -> Result<Option<PathBuf>> {
    use libcgroups::common::{get_cgroup_setup, CgroupSetup};
    let setup = get_cgroup_setup().context("read the cgroup setup of this machine")?;
    if !matches!(setup, CgroupSetup::Hybrid) {
        return Ok(None);
    }
    let (_, unified) =
        libcgroups::v1::util::list_mount_points().context("list the cgroup hierarchies of this machine")?;
    Ok(unified)
}

/// The hierarchies with controllers: each supported v1 controller's mount
/// point, or the unified root.
fn controller_hierarchies() -> Result<Vec<PathBuf>> {
    static KEPT: OnceLock<Vec<PathBuf>> = OnceLock::new();
    read_once(&KEPT, read_controller_hierarchies)
}

fn read_controller_hierarchies() -> Result<Vec<PathBuf>> {
    use libcgroups::common::{get_cgroup_setup, CgroupSetup, DEFAULT_CGROUP_ROOT};
    let setup = get_cgroup_setup().context("read the cgroup setup of this machine")?;
    if matches!(setup, CgroupSetup::Unified) {
        return Ok(vec![PathBuf::from(DEFAULT_CGROUP_ROOT)]);
    }
    let mut roots: Vec<PathBuf> = libcgroups::v1::util::list_supported_mount_points()
        .context("list the cgroup v1 hierarchies of this machine")?
        .into_values()
        .collect();
    roots.sort();
    roots.dedup();
    // One hierarchy can be mounted at two places (cpu and cpuacct): the
    // same superblock, so one directory.
    let mut seen = std::collections::HashSet::new();
    roots.retain(|r| {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(r).map_or(true, |m| seen.insert(m.dev()))
    });
    Ok(roots)
}

/// The container's directory in each hierarchy, for a confined path. The
/// hybrid host's cgroup2 hierarchy holds no limit: only host root is placed
/// there (libcgroups joins it when it may; a caller in a delegated v1 subtree
/// or an engine's user namespace has none delegated there, as under runc).
pub fn dirs(path: &Path) -> Result<Vec<PathBuf>> {
    let rel = path.strip_prefix("/").unwrap_or(path);
    let mut roots = controller_hierarchies()?;
    if super::kernel::is_host_root() {
        roots.extend(hybrid_unified()?);
    }
    Ok(roots.into_iter().map(|h| h.join(rel)).collect())
}

fn on_cgroupfs(path: &Path) -> bool {
    use nix::sys::statfs::{statfs, CGROUP2_SUPER_MAGIC, CGROUP_SUPER_MAGIC};
    statfs(path).is_ok_and(|s| {
        let t = s.filesystem_type();
        t == CGROUP_SUPER_MAGIC || t == CGROUP2_SUPER_MAGIC
    })
}

/// Refuses a directory whose nearest existing ancestor is not on a cgroup
/// filesystem (something mounted over part of cgroupfs), or that is reached
/// through a symlink.
pub fn check_on_cgroupfs(dirs: &[PathBuf], raw: &Path) -> Result<()> {
    for dir in dirs {
        let mut at = dir.as_path();
        loop {
            match fs::symlink_metadata(at) {
                Ok(m) if m.file_type().is_symlink() => bail!(
                    "use cgroupsPath {:?}: {} is a symlink",
                    raw.display().to_string(),
                    at.display()
                ),
                Ok(_) => break,
                Err(_) => match at.parent() {
                    Some(p) => at = p,
                    None => break,
                },
            }
        }
        if !on_cgroupfs(at) {
            bail!(
                "use cgroupsPath {:?}: {} is outside cgroupfs",
                raw.display().to_string(),
                at.display()
            );
        }
    }
    Ok(())
}

/// The processes in one cgroup directory (none if it does not exist).
pub fn procs(dir: &Path) -> Vec<i32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// Refuses a cgroup that already holds processes: they are not the
/// container's, and libcontainer's clean-up after a failed create would
/// kill them.
pub fn check_empty(dirs: &[PathBuf], raw: &Path) -> Result<()> {
    for dir in dirs {
        let pids = procs(dir);
        if !pids.is_empty() {
            bail!(
                "use cgroupsPath {:?}: {} already holds {} process(es) that are not this container's",
                raw.display().to_string(),
                dir.display(),
                pids.len()
            );
        }
    }
    Ok(())
}

/// Makes each missing directory (parents as needed, which stay shared).
/// `record` is given the directories about to be made before any is, so a
/// runtime killed half-way has said what may be its own; it is given the
/// final list again if some appeared meanwhile. Returns the ones made.
pub fn make(dirs: &[PathBuf], record: &mut dyn FnMut(&[PathBuf]) -> Result<()>) -> Result<Vec<PathBuf>> {
    let missing: Vec<PathBuf> = dirs.iter().filter(|d| !d.exists()).cloned().collect();
    record(&missing)?;
    let mut made = Vec::new();
    for dir in &missing {
        if let Some(parent) = dir.parent() {
            fs::create_dir_all(parent).with_context(|| format!("create cgroup {}", parent.display()))?;
        }
        match fs::create_dir(dir) {
            Ok(()) => made.push(dir.clone()),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).with_context(|| format!("create cgroup {}", dir.display())),
        }
    }
    if made.len() != missing.len() {
        record(&made)?;
    }
    Ok(made)
}

/// On cgroup v2 a controller's files appear in a cgroup only when its parent
/// lists the controller in cgroup.subtree_control. libcgroups enables them on
/// the way down only for directories it creates itself, and `make` created
/// the container's first, so the runtime does it here: each ancestor of the
/// container's cgroup below the unified root (and the root) hands down what
/// it has. A controller that cannot be enabled is left to fail, naming
/// itself, when a limit needs it.
pub fn enable_controllers(dirs: &[PathBuf]) {
    use libcgroups::common::DEFAULT_CGROUP_ROOT;
    let root = Path::new(DEFAULT_CGROUP_ROOT);
    // Only a unified root has cgroup.controllers: one stat on the start path
    // instead of another walk of the mount table.
    if dirs.is_empty() || !root.join("cgroup.controllers").exists() {
        return;
    }
    for dir in dirs {
        let Ok(rel) = dir.strip_prefix(root) else { continue };
        let mut ancestor = root.to_path_buf();
        let mut parts: Vec<_> = rel.components().collect();
        parts.pop();
        for part in std::iter::once(None).chain(parts.into_iter().map(Some)) {
            if let Some(p) = part {
                ancestor.push(p);
            }
            let Ok(have) = fs::read_to_string(ancestor.join("cgroup.controllers")) else {
                continue;
            };
            for c in have.split_whitespace() {
                if let Err(e) = fs::write(ancestor.join("cgroup.subtree_control"), format!("+{c}")) {
                    tracing::debug!("enable {c} in {}: {e}", ancestor.display());
                }
            }
        }
    }
}

/// Whether a directory recorded in meta.json is still one `create` could
/// have made: in a hierarchy, below the configured parent (not its root),
/// reached through no symlink. meta.json is the runtime's own, but what is
/// removed on its word is checked as if it were not.
fn confined(dir: &Path, roots: &[PathBuf]) -> bool {
    let Some(rel) = roots.iter().find_map(|r| dir.strip_prefix(r).ok()) else {
        return false;
    };
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return false;
    }
    let path = Path::new("/").join(rel);
    if confine(&path, &configured_parent()).is_err() {
        return false;
    }
    check_on_cgroupfs(&[dir.to_path_buf()], &path).is_ok()
}

/// Removes the directories `create` made, never signalling anything. The
/// kernel refuses to remove a cgroup that still holds processes; those are
/// not the container's (its own were ended first), so it is left and named.
pub fn remove(dirs: &[PathBuf]) -> Result<()> {
    let mut left = Vec::new();
    let roots = if dirs.is_empty() { Vec::new() } else { hierarchies()? };
    for dir in dirs {
        if !confined(dir, &roots) {
            left.push(format!(
                "{}: it is not below a cgroup hierarchy and the runtime's cgroup parent",
                dir.display()
            ));
            continue;
        }
        // A killed process leaves its cgroup a moment after it is reaped.
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            remove_children(dir, 0);
            match fs::remove_dir(dir) {
                Ok(()) => break,
                Err(e) if e.kind() == ErrorKind::NotFound => break,
                Err(e) if Instant::now() < deadline && e.raw_os_error() == Some(libc::EBUSY) => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => {
                    let pids = procs(dir);
                    if pids.is_empty() {
                        left.push(format!("{}: {e}", dir.display()));
                    } else {
                        left.push(format!(
                            "{}: it holds processes that are not the container's ({})",
                            dir.display(),
                            pids.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(" ")
                        ));
                    }
                    break;
                }
            }
        }
    }
    match left.len() {
        0 => Ok(()),
        1 => bail!("remove cgroup {}", left[0]),
        n => bail!("remove cgroup {} (and {} more hierarchies)", left[0], n - 1),
    }
}

/// Removes the cgroups below `dir`, deepest first: ones made inside the
/// container (it owns its cgroup namespace's root) or joined by `exec
/// --cgroup`; runc removes them too. Errors show up at `dir`'s own rmdir.
fn remove_children(dir: &Path, depth: usize) {
    // cgroupfs nests no deeper than this in practice; a bound keeps a
    // hostile tree from recursing without end.
    if depth > 32 {
        return;
    }
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            let child = entry.path();
            remove_children(&child, depth + 1);
            let _ = fs::remove_dir(&child);
        }
    }
}

/// Whether `resources` asks for any limit a cgroup must hold. Device rules
/// alone do not: rootless they are moot or refused (runtime/devices.rs). An
/// engine's `"resources": {}` asks for nothing.
pub fn asks_limits(resources: Option<&LinuxResources>) -> bool {
    !super::cgroup_v2::controllers_for(resources).is_empty()
        || resources.is_some_and(|r| {
            r.network().is_some() || r.rdma().is_some() || r.unified().as_ref().is_some_and(|u| !u.is_empty())
        })
}

pub fn cgroup_manager(path: &Path, id: &str, systemd: bool) -> Result<libcgroups::common::AnyCgroupManager> {
    libcgroups::common::create_cgroup_manager(CgroupConfig {
        cgroup_path: path.to_path_buf(),
        systemd_cgroup: systemd,
        container_name: id.to_owned(),
    })
    .map_err(|e| anyhow!("open cgroup {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_cleaned_like_runc() {
        for (raw, want) in [
            ("//", "/"),
            ("/../relcg-escape", "/relcg-escape"),
            ("a/./b//c/", "/a/b/c"),
            ("../../../../x/../y", "/y"),
            ("/a/b/../../..", "/"),
            ("", "/"),
        ] {
            assert_eq!(clean(Path::new(raw)), Path::new(want), "{raw}");
        }
    }

    #[test]
    fn a_root_or_an_escape_is_refused_naming_the_path() {
        let root = Path::new("/");
        for raw in ["//", "/", "/..", "/a/..", ".", ""] {
            let err = confine(Path::new(raw), root).unwrap_err().to_string();
            assert!(
                err.contains("cgroup root") && err.contains(&format!("{raw:?}")),
                "{err}"
            );
        }
        assert_eq!(
            confine(Path::new("/../relcg-escape"), root).unwrap(),
            Path::new("/relcg-escape")
        );
        let parent = Path::new("/kubepods");
        assert_eq!(
            confine(Path::new("/kubepods/pod1/c"), parent).unwrap(),
            Path::new("/kubepods/pod1/c")
        );
        for raw in ["/kubepods", "/kubepods/../system.slice/x", "/kubepodsX/c", "/other"] {
            let err = confine(Path::new(raw), parent).unwrap_err().to_string();
            assert!(err.contains("not below") && err.contains("/kubepods"), "{err}");
            assert_eq!(err.lines().count(), 1);
        }
    }

    #[test]
    fn only_absent_directories_are_made_and_recorded() {
        let t = tempfile::tempdir().unwrap();
        let (a, b) = (t.path().join("h1/x/c"), t.path().join("h2/x/c"));
        fs::create_dir_all(&b).unwrap();
        let mut recorded = Vec::new();
        let made = make(&[a.clone(), b.clone()], &mut |d| {
            recorded.push(d.to_vec());
            Ok(())
        })
        .unwrap();
        assert_eq!(made, vec![a.clone()]);
        assert_eq!(recorded, vec![vec![a.clone()]], "recorded once, before the mkdir");
        // Not in a cgroup hierarchy: refused, and left.
        assert!(remove(&made)
            .unwrap_err()
            .to_string()
            .contains("not below a cgroup hierarchy"));
        assert!(a.is_dir() && b.is_dir());
        assert!(confined(&a, &[t.path().join("h1")]) == on_cgroupfs(t.path()));
        assert!(!confined(&t.path().join("h1/../h2/x/c"), &[t.path().join("h1")]));
        assert!(
            !confined(&t.path().join("h1"), &[t.path().join("h1")]),
            "a hierarchy's root"
        );
        assert!(!confined(&a, &[t.path().join("h2")]), "outside every hierarchy");
    }

    #[test]
    fn directories_outside_cgroupfs_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let err = check_on_cgroupfs(&[t.path().join("c")], Path::new("/c"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("outside cgroupfs"), "{err}");
    }
}
