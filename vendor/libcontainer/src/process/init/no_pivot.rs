//! `--no-pivot` (claude-shim, issue 25): before the rootfs is moved over "/"
//! and chrooted into, every full procfs and sysfs mount that the container's
//! mount namespace copied from the host is detached, or covered where it
//! cannot be, not only the ones at /proc and /sys.
//!
//! Without pivot_root the host's mounts stay in the namespace, below the
//! chroot. The kernel lets a process that makes a user namespace mount a
//! fresh, unmasked procfs or sysfs when a full one (its root mounted, nothing
//! locked on top) is anywhere in its mount namespace (`mount_too_revealing`
//! in fs/namespace.c), so one host procfs beside /proc was enough. runc does
//! the same before its MS_MOVE.

use std::io::Read;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::mount::{MntFlags, MsFlags};
use pathrs::flags::OpenFlags;
use pathrs::procfs::{ProcfsBase, ProcfsHandle};

use super::Result;
use super::error::InitProcessError;
use crate::syscall::{Syscall, SyscallError};

/// Detaches or covers each full procfs and sysfs outside `rootfs`, as this
/// process's mountinfo lists them (parents before children).
pub(super) fn hide_host_proc_and_sys(syscall: &dyn Syscall, rootfs: &Path) -> Result<()> {
    let mut mountinfo = String::new();
    ProcfsHandle::new()?
        .open(ProcfsBase::ProcSelf, "mountinfo", OpenFlags::O_RDONLY)?
        .read_to_string(&mut mountinfo)
        .map_err(InitProcessError::Io)?;
    for target in full_proc_and_sys_mounts(&mountinfo, rootfs) {
        tracing::debug!(?target, "hiding the host's procfs or sysfs before the move");
        // Slave first, so that the unmount cannot reach the host through a
        // shared peer group (rootfsPropagation "shared").
        match syscall.mount(None, &target, None, MsFlags::MS_SLAVE | MsFlags::MS_REC, None) {
            Ok(()) => {}
            // Gone with a parent detached before it: nothing left to hide.
            Err(SyscallError::Nix(Errno::ENOENT | Errno::EINVAL)) => continue,
            Err(err) => return Err(InitProcessError::SyscallOther(err)),
        }
        unmount_or_hide(syscall, &target)?;
    }
    Ok(())
}

/// Unmounts `target`; where the kernel refuses (a mount locked by a user
/// namespace: EINVAL; no privilege: EPERM), covers it with an empty read-only
/// tmpfs, which hides the filesystem's root from `mount_too_revealing`.
fn unmount_or_hide(syscall: &dyn Syscall, target: &Path) -> Result<()> {
    match syscall.umount2(target, MntFlags::MNT_DETACH) {
        Ok(()) => Ok(()),
        Err(SyscallError::Nix(Errno::EINVAL | Errno::EPERM)) => syscall
            .mount(
                None,
                target,
                Some("tmpfs"),
                MsFlags::MS_RDONLY,
                Some("size=0k"),
            )
            .map_err(InitProcessError::SyscallOther),
        Err(err) => Err(InitProcessError::SyscallOther(err)),
    }
}

/// The mount points of full (root "/") procfs and sysfs mounts outside
/// `rootfs`, in mountinfo's order.
fn full_proc_and_sys_mounts(mountinfo: &str, rootfs: &Path) -> Vec<PathBuf> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            // mountinfo(5): id parent maj:min root mount-point options
            // [optional fields...] - fstype source super-options
            let sep = fields.iter().position(|f| *f == "-")?;
            let (root, point, fstype) = (fields.get(3)?, fields.get(4)?, fields.get(sep + 1)?);
            if *root != "/" || !matches!(*fstype, "proc" | "sysfs") {
                return None;
            }
            let point = unescape(point);
            (!point.starts_with(rootfs)).then_some(point)
        })
        .collect()
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (bytes[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
23 27 0:22 / /sys rw,relatime shared:7 - sysfs sysfs rw
27 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
40 22 0:35 / /proc/sys/fs/binfmt_misc rw - binfmt_misc binfmt_misc rw
41 27 0:21 / /tmp/second\\040proc rw - proc proc rw
42 27 0:22 /devices /tmp/sys-subtree rw - sysfs sysfs rw
50 27 0:50 / /run/c/rootfs/proc rw - proc proc rw
51 27 0:51 / /run/c/rootfs/sys ro - sysfs sysfs ro
52 27 0:52 / /run/c/rootfs2/proc rw - proc proc rw
";

    #[test]
    fn every_full_host_procfs_and_sysfs_outside_the_rootfs_is_listed() {
        assert_eq!(
            full_proc_and_sys_mounts(MOUNTINFO, Path::new("/run/c/rootfs")),
            [
                "/proc",
                "/sys",
                "/tmp/second proc",
                // A sibling whose name starts with the rootfs's is not inside it.
                "/run/c/rootfs2/proc",
            ]
            .map(PathBuf::from)
        );
    }

    #[test]
    fn unescape_reads_mountinfo_octal() {
        assert_eq!(unescape("/a\\040b\\011c\\134d"), PathBuf::from("/a b\tc\\d"));
        assert_eq!(unescape("/trailing\\04"), PathBuf::from("/trailing\\04"));
    }
}
