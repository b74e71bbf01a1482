//! claude-shim: mounts that land on /proc or /sys, judged by where their
//! destination really resolves inside the rootfs, not by how it is spelled.
//! An image symlink such as `/data -> /proc` would otherwise put a volume over
//! procfs, leaving the masked and read-only protections in the volume and the
//! real procfs unprotected underneath.
//!
//! /proc follows runc's checkProcMount: only a procfs (fresh, or a bind of
//! one) on /proc itself, and below it only the files lxcfs emulates. /sys is
//! the runtime's own too: only a sysfs (fresh, or a bind of one, as rootless
//! podman does) on /sys itself; below it a mount is allowed where the config
//! names that very path (engines mount cgroupfs at /sys/fs/cgroup), never
//! where a symlink redirected it there.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};

use nix::sys::statfs::{FsType, PROC_SUPER_MAGIC, SYSFS_MAGIC, statfs};
use oci_spec::runtime::Mount as SpecMount;
use pathrs::Root;
use pathrs::procfs::{ProcfsBase, ProcfsHandle};

use super::utils::is_bind;
use crate::utils::PathBufExt;

/// The files under /proc that lxcfs emulates, as runc allows them.
const VALID_PROC_MOUNTS: &[&str] = &[
    "/proc/cpuinfo",
    "/proc/diskstats",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/swaps",
    "/proc/uptime",
    "/proc/loadavg",
    "/proc/slabinfo",
    "/proc/net/dev",
    "/proc/sys/kernel/ns_last_pid",
    "/proc/sys/crypto/fips_enabled",
];

fn source_is(m: &SpecMount, fs: FsType) -> bool {
    is_bind(m)
        && m.source()
            .as_ref()
            .and_then(|s| statfs(s.as_path()).ok())
            .is_some_and(|st| st.filesystem_type() == fs)
}

/// Whether mount `m` may land on `resolved`, its destination with every
/// symlink resolved inside the rootfs (an absolute path in the container).
/// The error is one line that names the destination.
pub fn check(resolved: &Path, m: &SpecMount) -> Result<(), String> {
    let dest = m.destination();
    let typ = m.typ().as_deref();
    let proc = Path::new("/proc");
    let sys = Path::new("/sys");
    if resolved == proc {
        if typ == Some("proc") || source_is(m, PROC_SUPER_MAGIC) {
            return Ok(());
        }
        return Err(format!(
            "mount on {}: it resolves to /proc, where only a proc filesystem may be mounted",
            dest.display()
        ));
    }
    if resolved.starts_with(proc) {
        if VALID_PROC_MOUNTS.iter().any(|p| resolved == Path::new(p)) {
            return Ok(());
        }
        return Err(format!(
            "mount on {}: it resolves to {}, inside /proc, where only {} may be mounted",
            dest.display(),
            resolved.display(),
            VALID_PROC_MOUNTS.join(", ")
        ));
    }
    if resolved == sys {
        if typ == Some("sysfs") || source_is(m, SYSFS_MAGIC) {
            return Ok(());
        }
        return Err(format!(
            "mount on {}: it resolves to /sys, where only a sysfs may be mounted",
            dest.display()
        ));
    }
    if resolved.starts_with(sys) && dest.normalize() != resolved {
        return Err(format!(
            "mount on {}: a symlink in the rootfs redirects it to {}, inside /sys",
            dest.display(),
            resolved.display()
        ));
    }
    Ok(())
}

/// Where `dest` (a handle resolved inside `root`) is, as a path in the container.
fn path_in_root(root: &Root, dest: BorrowedFd<'_>) -> Result<PathBuf, String> {
    let procfs = ProcfsHandle::new().map_err(|e| format!("open procfs: {e}"))?;
    let at = |fd: i32| {
        procfs
            .readlink(ProcfsBase::ProcSelf, format!("fd/{fd}"))
            .map_err(|e| format!("read the path of fd {fd}: {e}"))
    };
    let root_path = at(root.as_fd().as_raw_fd())?;
    let dest_path = at(dest.as_raw_fd())?;
    let inside = dest_path.strip_prefix(&root_path).map_err(|_| {
        format!(
            "mount destination {} is outside the rootfs {}",
            dest_path.display(),
            root_path.display()
        )
    })?;
    Ok(Path::new("/").join(inside))
}

/// `check` on the destination as the mount will really use it: the handle
/// it is about to be mounted on, so no symlink flipped in between can matter.
pub(crate) fn check_handle(root: &Root, dest: BorrowedFd<'_>, m: &SpecMount) -> Result<(), String> {
    check(&path_in_root(root, dest)?, m)
}

#[cfg(test)]
mod tests {
    use oci_spec::runtime::MountBuilder;

    use super::*;

    fn mount(dest: &str, typ: &str, source: &str, options: &[&str]) -> SpecMount {
        MountBuilder::default()
            .destination(dest)
            .typ(typ)
            .source(source)
            .options(options.iter().map(|o| o.to_string()).collect::<Vec<_>>())
            .build()
            .unwrap()
    }

    #[test]
    fn proc_follows_runc() {
        let p = |s: &str| PathBuf::from(s);
        assert!(check(&p("/proc"), &mount("/proc", "proc", "proc", &[])).is_ok());
        assert!(check(&p("/proc"), &mount("/proc", "bind", "/proc", &["rbind"])).is_ok());
        let err = check(&p("/proc"), &mount("/data", "bind", "/tmp", &["rbind"])).unwrap_err();
        assert!(err.contains("mount on /data: it resolves to /proc"), "{err}");
        assert!(check(&p("/proc/sys"), &mount("/proc/sys", "tmpfs", "tmpfs", &[])).is_err());
        assert!(check(&p("/proc/cpuinfo"), &mount("/proc/cpuinfo", "bind", "/x", &["bind"])).is_ok());
        assert!(check(&p("/procfoo"), &mount("/procfoo", "tmpfs", "tmpfs", &[])).is_ok());
    }

    #[test]
    fn sys_allows_what_the_config_names() {
        let p = |s: &str| PathBuf::from(s);
        assert!(check(&p("/sys"), &mount("/sys", "sysfs", "sysfs", &[])).is_ok());
        assert!(check(&p("/sys"), &mount("/sys", "bind", "/sys", &["rbind"])).is_ok());
        assert!(check(&p("/sys"), &mount("/sys", "tmpfs", "tmpfs", &[])).is_err());
        assert!(check(&p("/sys/fs/cgroup"), &mount("/sys/fs/cgroup", "cgroup", "cgroup", &[])).is_ok());
        let err = check(&p("/sys/fs/bpf"), &mount("/data", "bind", "/tmp", &["rbind"])).unwrap_err();
        assert!(err.contains("redirects it to /sys/fs/bpf"), "{err}");
    }
}
