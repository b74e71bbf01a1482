//! CVE-2019-5736: a container process that can reach the runtime's
//! /proc/<pid>/exe (during `exec`, or as the init before its execve) could
//! reopen it for writing and replace the runtime binary on the host. Verbs that
//! put a process into a container first re-execute claude-shim from a copy
//! that cannot be written:
//!
//! - as root, from a read-only overlayfs mount of the binary's directory that
//!   is never attached anywhere (fsopen, fsconfig, fsmount, execveat): opening
//!   /proc/<pid>/exe for writing gives EROFS, and nothing is copied;
//! - otherwise (no CAP_SYS_ADMIN, or no overlayfs), from a sealed memfd copy
//!   (pentacle, as youki does): immutable, at the cost of copying the binary.
//!
//! Verbs that only read state or send signals skip it.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};

/// The path of the binary on disk, kept across the re-exec for the verbs that
/// need to show the real binary to a container (the probe of `verify`).
pub const EXE_ENV: &str = "CLAUDE_SHIM_EXE";

/// Set across the overlay re-exec: if the new process does not find itself
/// on a read-only overlay, it takes the memfd path instead of looping.
const OVERLAY_TRIED_ENV: &str = "CLAUDE_SHIM_SEAL_OVERLAY";

pub fn ensure_sealed() -> Result<()> {
    let tried = std::env::var_os(OVERLAY_TRIED_ENV).is_some();
    if tried {
        // SAFETY: single-threaded at this point: nothing else reads the environment.
        unsafe { std::env::remove_var(OVERLAY_TRIED_ENV) };
        if on_read_only_overlay(Path::new("/proc/self/exe")) {
            return Ok(());
        }
        tracing::warn!("the overlay re-exec did not land on a read-only overlay; using a sealed memfd copy");
    } else if pentacle::is_sealed() {
        return Ok(());
    }
    let exe = exe_on_disk()?;
    if std::env::var_os(EXE_ENV).is_none() {
        // SAFETY: single-threaded at this point: nothing else reads the environment.
        unsafe { std::env::set_var(EXE_ENV, &exe) };
    }
    if !tried && nix::unistd::geteuid().is_root() {
        // Returns only on failure.
        let e = exec_from_overlay(&exe);
        tracing::debug!("re-execute from a read-only overlay: {e:#}; using a sealed memfd copy");
    }
    pentacle::ensure_sealed().context("re-execute from a sealed copy of /proc/self/exe (CVE-2019-5736 defence)")
}

/// The binary on disk (not the sealed copy).
pub fn exe_on_disk() -> Result<PathBuf> {
    match std::env::var_os(EXE_ENV) {
        Some(p) => Ok(p.into()),
        None => std::fs::canonicalize("/proc/self/exe").context("resolve /proc/self/exe"),
    }
}

/// Whether `path` lives on a read-only overlayfs mount: the running state,
/// not a marker.
pub fn on_read_only_overlay(path: &Path) -> bool {
    let overlay = nix::sys::statfs::statfs(path)
        .map(|s| s.filesystem_type() == nix::sys::statfs::OVERLAYFS_SUPER_MAGIC)
        .unwrap_or(false);
    let read_only = nix::sys::statvfs::statvfs(path)
        .map(|s| s.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
        .unwrap_or(false);
    overlay && read_only
}

/// A detached read-only overlay of `exe`'s directory; the binary opened in it.
fn open_in_overlay(exe: &Path) -> Result<std::os::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    use rustix::mount::{
        fsconfig_create, fsconfig_set_string, fsmount, fsopen, FsMountFlags, FsOpenFlags, MountAttrFlags,
    };
    let dir = exe
        .parent()
        .ok_or_else(|| anyhow!("{} has no directory", exe.display()))?;
    let name = exe
        .file_name()
        .ok_or_else(|| anyhow!("{} has no file name", exe.display()))?;
    let fs = fsopen("overlay", FsOpenFlags::FSOPEN_CLOEXEC).context("fsopen overlay")?;
    // No upper layer, so read-only; overlayfs then wants two lower layers:
    // the binary's directory over an empty tmpfs attached nowhere.
    let empty = fsopen("tmpfs", FsOpenFlags::FSOPEN_CLOEXEC).context("fsopen tmpfs")?;
    fsconfig_create(&empty).context("create an empty tmpfs")?;
    let empty = fsmount(&empty, FsMountFlags::FSMOUNT_CLOEXEC, MountAttrFlags::MOUNT_ATTR_RDONLY)
        .context("fsmount the empty tmpfs")?;
    fsconfig_set_string(&fs, "lowerdir+", dir).with_context(|| format!("add lower layer {}", dir.display()))?;
    fsconfig_set_string(&fs, "lowerdir+", format!("/proc/self/fd/{}", empty.as_raw_fd()))
        .context("add the empty lower layer")?;
    fsconfig_create(&fs).with_context(|| format!("create an overlay of {}", dir.display()))?;
    let mnt = fsmount(
        &fs,
        FsMountFlags::FSMOUNT_CLOEXEC,
        MountAttrFlags::MOUNT_ATTR_RDONLY | MountAttrFlags::MOUNT_ATTR_NODEV | MountAttrFlags::MOUNT_ATTR_NOSUID,
    )
    .context("fsmount the overlay")?;
    rustix::fs::openat(&mnt, name, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
        .with_context(|| format!("open {} in the overlay", name.to_string_lossy()))
}

/// Re-executes the binary from its overlay copy, with the same arguments and
/// environment; the new process checks where it landed (`ensure_sealed`).
/// Returns only on failure.
fn exec_from_overlay(exe: &Path) -> anyhow::Error {
    use std::os::unix::process::CommandExt;
    let file = match open_in_overlay(exe) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_else(|| exe.as_os_str().to_owned());
    // The kernel resolves the path before it closes the CLOEXEC descriptor.
    let err = std::process::Command::new(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .arg0(argv0)
        .args(args)
        .env(OVERLAY_TRIED_ENV, "1")
        .exec();
    anyhow!("execute the overlay copy: {err}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overlay_copy_cannot_be_written() {
        assert!(
            nix::unistd::geteuid().is_root(),
            "this test needs root: fsmount wants CAP_SYS_ADMIN"
        );
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::write(&bin, b"#!/bin/sh\n").unwrap();
        let file = open_in_overlay(&bin).unwrap();
        let path = format!("/proc/self/fd/{}", file.as_raw_fd());
        assert!(on_read_only_overlay(Path::new(&path)));
        let err = std::fs::OpenOptions::new().write(true).open(&path).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EROFS), "{err}");
        assert!(!on_read_only_overlay(&bin));
    }
}
