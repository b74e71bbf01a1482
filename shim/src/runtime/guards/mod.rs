//! Guards against libcontainer 0.7's known gaps (../shared/NOTES.md). Each
//! takes the spec an engine or a user wrote and returns the spec libcontainer
//! must see so that it does what the OCI spec (and runc) would do, or refuses.
//! They run at `create`, before any container state exists.

use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Context, Result};
use oci_spec::runtime::{PosixRlimitBuilder, Spec};

mod seccomp;

pub use seccomp::{check_syscall_names, deny_clone3, libseccomp_version, swap_masked_eq_operands};

/// Everything `create` needs to know about the caller to adapt a spec.
pub struct Caller {
    /// The effective uid is 0 and no user namespace is requested.
    pub may_raise_rlimits: bool,
}

/// Applies every guard to `spec`; returns warnings to log.
pub fn apply(spec: &mut Spec, caller: &Caller) -> Result<Vec<String>> {
    let mut warnings = Vec::new();
    normalize_no_new_privileges(spec);
    if let Some(seccomp) = spec.linux_mut().as_mut().and_then(|l| l.seccomp_mut().as_mut()) {
        check_syscall_names(seccomp, &mut warnings)?;
        swap_masked_eq_operands(seccomp);
        warnings.extend(deny_clone3(seccomp));
    }
    if !caller.may_raise_rlimits {
        warnings.extend(clamp_rlimits(spec, current_hard_limit)?);
    }
    if wants_read_only_cgroup_mount(spec) && uses_cgroup_v1_mounts()? {
        if has_mount_namespace(spec) {
            read_only_cgroup_v1(spec, &v1_hierarchies()?);
        } else {
            // Read-only paths need a private mount namespace (libcontainer and
            // runc refuse them without one); such a container is only chrooted
            // in the host's mounts anyway, as under runc.
            warnings.push(
                "cgroup v1 hierarchies stay writable in a container without a mount namespace (linux.namespaces has no \"mount\")"
                    .into(),
            );
        }
    }
    Ok(warnings)
}

/// Whether the spec asks for a mount namespace (new or joined).
fn has_mount_namespace(spec: &Spec) -> bool {
    spec.linux()
        .as_ref()
        .and_then(|l| l.namespaces().as_ref())
        .is_some_and(|ns| {
            ns.iter()
                .any(|n| n.typ() == oci_spec::runtime::LinuxNamespaceType::Mount)
        })
}

/// Whether the spec mounts the cgroup filesystem read-only, as every engine's
/// default spec does for an unprivileged container.
fn wants_read_only_cgroup_mount(spec: &Spec) -> bool {
    spec.mounts()
        .iter()
        .flatten()
        .any(|m| m.typ().as_deref() == Some("cgroup") && m.options().iter().flatten().any(|o| o == "ro"))
}

/// libcontainer mounts cgroup v1 (and hybrid) hierarchies its own way, below.
fn uses_cgroup_v1_mounts() -> Result<bool> {
    let setup = libcgroups::common::get_cgroup_setup().context("read the cgroup setup of this machine")?;
    Ok(!matches!(setup, libcgroups::common::CgroupSetup::Unified))
}

/// The host's cgroup v1 mount points, as libcontainer lists them to mount each
/// into the container.
fn v1_hierarchies() -> Result<Vec<PathBuf>> {
    libcgroups::v1::util::list_subsystem_mount_points().context("list the cgroup v1 hierarchies of this machine")
}

/// On cgroup v1, libcontainer 0.7 bind-mounts each hierarchy into the
/// container "rw" whatever the spec's cgroup mount says, so a container's root
/// can rewrite its own limits (pids.max, memory.limit_in_bytes) where runc
/// would give EROFS. Listing the tmpfs and every hierarchy as read-only paths
/// makes libcontainer remount each of them read-only, nosuid, nodev and noexec
/// once all mounts are done (missing ones are skipped).
pub fn read_only_cgroup_v1(spec: &mut Spec, hierarchies: &[PathBuf]) {
    let Some(dest) = spec
        .mounts()
        .iter()
        .flatten()
        .find(|m| m.typ().as_deref() == Some("cgroup") && m.options().iter().flatten().any(|o| o == "ro"))
        .map(|m| m.destination().clone())
    else {
        return;
    };
    let mut paths = vec![dest.clone()];
    for h in hierarchies {
        if let (true, Some(name)) = (h.starts_with("/sys/fs/cgroup"), h.file_name()) {
            paths.push(dest.join(name));
        }
    }
    let Some(linux) = spec.linux_mut() else { return };
    let mut readonly = linux.readonly_paths().clone().unwrap_or_default();
    for p in paths {
        let p = p.to_string_lossy().into_owned();
        if !readonly.contains(&p) {
            readonly.push(p);
        }
    }
    linux.set_readonly_paths(Some(readonly));
}

/// `"noNewPrivileges": false` is the OCI default, but libcontainer takes the
/// field's presence for "true" when it orders seccomp and capability drops,
/// then fails to load the filter without privileges. Dropping the field keeps
/// the meaning and avoids the bug.
pub fn normalize_no_new_privileges(spec: &mut Spec) {
    if let Some(process) = spec.process_mut() {
        if process.no_new_privileges() == Some(false) {
            process.set_no_new_privileges(None);
        }
    }
}

fn current_hard_limit(resource: &str) -> Option<u64> {
    use nix::sys::resource::{getrlimit, Resource};
    let r = match resource {
        "RLIMIT_AS" => Resource::RLIMIT_AS,
        "RLIMIT_CORE" => Resource::RLIMIT_CORE,
        "RLIMIT_CPU" => Resource::RLIMIT_CPU,
        "RLIMIT_DATA" => Resource::RLIMIT_DATA,
        "RLIMIT_FSIZE" => Resource::RLIMIT_FSIZE,
        "RLIMIT_LOCKS" => Resource::RLIMIT_LOCKS,
        "RLIMIT_MEMLOCK" => Resource::RLIMIT_MEMLOCK,
        "RLIMIT_MSGQUEUE" => Resource::RLIMIT_MSGQUEUE,
        "RLIMIT_NICE" => Resource::RLIMIT_NICE,
        "RLIMIT_NOFILE" => Resource::RLIMIT_NOFILE,
        "RLIMIT_NPROC" => Resource::RLIMIT_NPROC,
        "RLIMIT_RSS" => Resource::RLIMIT_RSS,
        "RLIMIT_RTPRIO" => Resource::RLIMIT_RTPRIO,
        "RLIMIT_RTTIME" => Resource::RLIMIT_RTTIME,
        "RLIMIT_SIGPENDING" => Resource::RLIMIT_SIGPENDING,
        "RLIMIT_STACK" => Resource::RLIMIT_STACK,
        _ => return None,
    };
    getrlimit(r).ok().map(|(_, hard)| hard)
}

/// Without CAP_SYS_RESOURCE a hard limit cannot be raised. Engines ask for
/// limits (podman: nofile 1048576) above what such a machine allows; clamp them
/// to the current hard limit and say so, rather than failing every start.
pub fn clamp_rlimits(spec: &mut Spec, hard_limit: impl Fn(&str) -> Option<u64>) -> Result<Vec<String>> {
    let mut warnings = Vec::new();
    let Some(process) = spec.process_mut().as_mut() else {
        return Ok(warnings);
    };
    let Some(mut rlimits) = process.rlimits().clone() else {
        return Ok(warnings);
    };
    for rlimit in rlimits.iter_mut() {
        let name = rlimit.typ().to_string();
        let Some(max) = hard_limit(&name) else { continue };
        if rlimit.hard() <= max && rlimit.soft() <= max {
            continue;
        }
        let (hard, soft) = (rlimit.hard().min(max), rlimit.soft().min(max));
        warnings.push(format!(
            "rlimit {name} {}:{} exceeds the hard limit {max} and CAP_SYS_RESOURCE is missing; clamped to {soft}:{hard}",
            rlimit.soft(),
            rlimit.hard()
        ));
        *rlimit = PosixRlimitBuilder::default()
            .typ(rlimit.typ())
            .soft(soft)
            .hard(hard)
            .build()?;
    }
    process.set_rlimits(Some(rlimits));
    Ok(warnings)
}

/// Resolves `dest` inside `rootfs` the way a mount would, following symlinks,
/// and refuses one whose target climbs out of the rootfs. Absolute link targets
/// are read relative to the rootfs, as the container itself would read them.
/// Returns the resolved path, absolute in the container. This is an early,
/// readable refusal only: libcontainer resolves the destination again, through
/// a handle rooted at the rootfs, when it mounts.
pub fn check_destination(rootfs: &Path, dest: &Path) -> Result<PathBuf> {
    let mut resolved = PathBuf::new(); // relative to rootfs
    let mut pending: Vec<PathBuf> = vec![dest.to_path_buf()];
    let mut links = 0;
    while let Some(path) = pending.pop() {
        let mut comps: Vec<Component> = path.components().collect();
        comps.reverse();
        while let Some(c) = comps.pop() {
            match c {
                Component::RootDir => resolved = PathBuf::new(),
                Component::CurDir | Component::Prefix(_) => {}
                Component::ParentDir => {
                    if !resolved.pop() {
                        bail!(
                            "resolve mount destination {} in rootfs {}: it leads outside the rootfs",
                            dest.display(),
                            rootfs.display()
                        );
                    }
                }
                Component::Normal(name) => {
                    let candidate = resolved.join(name);
                    let full = rootfs.join(&candidate);
                    match std::fs::symlink_metadata(&full) {
                        Ok(meta) if meta.file_type().is_symlink() => {
                            links += 1;
                            if links > 40 {
                                bail!("resolve mount destination {}: too many symlinks", dest.display());
                            }
                            let target = std::fs::read_link(&full)
                                .with_context(|| format!("read symlink {}", full.display()))?;
                            let rest: PathBuf = comps.iter().rev().collect();
                            comps.clear();
                            if target.is_absolute() {
                                resolved = PathBuf::new();
                            }
                            pending.push(rest);
                            pending.push(target);
                            break;
                        }
                        _ => resolved = candidate,
                    }
                }
            }
        }
    }
    Ok(Path::new("/").join(resolved))
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_spec::runtime::{PosixRlimitType, ProcessBuilder};

    #[test]
    fn explicit_false_no_new_privileges_is_dropped() {
        let mut spec = Spec::default();
        spec.set_process(Some(
            ProcessBuilder::default().no_new_privileges(false).build().unwrap(),
        ));
        normalize_no_new_privileges(&mut spec);
        assert_eq!(spec.process().as_ref().unwrap().no_new_privileges(), None);
        spec.set_process(Some(ProcessBuilder::default().no_new_privileges(true).build().unwrap()));
        normalize_no_new_privileges(&mut spec);
        assert_eq!(spec.process().as_ref().unwrap().no_new_privileges(), Some(true));
    }

    #[test]
    fn rlimits_above_the_hard_limit_are_clamped() {
        let mut spec = Spec::default();
        let nofile = PosixRlimitBuilder::default()
            .typ(PosixRlimitType::RlimitNofile)
            .soft(1_048_576u64)
            .hard(1_048_576u64)
            .build()
            .unwrap();
        let core = PosixRlimitBuilder::default()
            .typ(PosixRlimitType::RlimitCore)
            .soft(0u64)
            .hard(0u64)
            .build()
            .unwrap();
        spec.set_process(Some(
            ProcessBuilder::default().rlimits(vec![nofile, core]).build().unwrap(),
        ));
        let warnings = clamp_rlimits(&mut spec, |_| Some(524_288)).unwrap();
        assert_eq!(warnings.len(), 1);
        let rl = spec.process().as_ref().unwrap().rlimits().as_ref().unwrap();
        assert_eq!((rl[0].soft(), rl[0].hard()), (524_288, 524_288));
        assert_eq!((rl[1].soft(), rl[1].hard()), (0, 0));
    }

    #[test]
    fn cgroup_v1_hierarchies_become_read_only_paths() {
        let mut spec = Spec::default();
        let hierarchies: Vec<PathBuf> = ["/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/memory", "/elsewhere/x"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert!(
            wants_read_only_cgroup_mount(&spec),
            "the default spec mounts cgroups ro"
        );
        read_only_cgroup_v1(&mut spec, &hierarchies);
        read_only_cgroup_v1(&mut spec, &hierarchies);
        let ro = spec.linux().as_ref().unwrap().readonly_paths().clone().unwrap();
        let ours: Vec<&String> = ro.iter().filter(|p| p.starts_with("/sys/fs/cgroup")).collect();
        assert_eq!(
            ours,
            ["/sys/fs/cgroup", "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/memory"],
            "once each, host paths outside /sys/fs/cgroup ignored"
        );
    }

    #[test]
    fn rw_cgroup_mount_is_left_alone() {
        let mut spec = Spec::default();
        let mut mounts = spec.mounts().clone().unwrap();
        for m in mounts.iter_mut().filter(|m| m.typ().as_deref() == Some("cgroup")) {
            let opts: Vec<String> = m.options().clone().unwrap().into_iter().filter(|o| o != "ro").collect();
            m.set_options(Some(opts));
        }
        spec.set_mounts(Some(mounts));
        assert!(!wants_read_only_cgroup_mount(&spec));
        let before = spec.linux().as_ref().unwrap().readonly_paths().clone();
        read_only_cgroup_v1(&mut spec, &[PathBuf::from("/sys/fs/cgroup/memory")]);
        assert_eq!(spec.linux().as_ref().unwrap().readonly_paths(), &before);
    }

    #[test]
    fn destinations_are_resolved_inside_the_rootfs() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("run")).unwrap();
        std::fs::create_dir_all(root.join("var")).unwrap();
        std::os::unix::fs::symlink("/run", root.join("var/run")).unwrap();
        std::os::unix::fs::symlink("../../../../etc", root.join("evil")).unwrap();
        std::os::unix::fs::symlink("../run", root.join("var/up")).unwrap();
        std::os::unix::fs::symlink("/proc", root.join("data")).unwrap();
        let resolved = |d: &str| check_destination(root, Path::new(d)).unwrap();
        assert_eq!(resolved("/var/run/secrets"), Path::new("/run/secrets"));
        assert_eq!(resolved("/var/up/x"), Path::new("/run/x"));
        assert_eq!(resolved("/new/dir"), Path::new("/new/dir"));
        assert_eq!(resolved("/data"), Path::new("/proc"));
        let err = check_destination(root, Path::new("/evil/passwd"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("outside the rootfs"), "{err}");
        assert!(check_destination(root, Path::new("/../x")).is_err());
    }
}
