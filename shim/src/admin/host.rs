//! The machine as `tighten` sees it: a trait, so the rules run against a fake
//! host in the tests, and the real one. Below the rules that ask it.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// What `tighten` needs to know about the machine.
pub trait Host {
    /// Whether the namespace file `path` is this process's own namespace of
    /// kind `ns` (`net`, `pid`...), i.e. the host's.
    fn is_ours(&self, ns: &str, path: &Path) -> Result<bool>;
    /// `path` with every symlink resolved; None when it does not exist.
    fn resolve(&self, path: &Path) -> Option<PathBuf>;
    /// What `path` is (symlinks followed).
    fn kind(&self, path: &Path) -> Option<FileKind>;
    /// The home directory of the user claude-shim runs as (what `~` means).
    fn home(&self) -> PathBuf;
    /// A policy's own seccomp profile file.
    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>>;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Dir,
    File,
    Socket,
    /// A character device: major, minor.
    CharDevice(u64, u64),
    BlockDevice,
    Other,
}

pub(super) struct RealHost;

impl Host for RealHost {
    fn is_ours(&self, ns: &str, path: &Path) -> Result<bool> {
        let theirs = fs::metadata(path).with_context(|| format!("stat namespace {}", path.display()))?;
        let ours = fs::metadata(format!("/proc/self/ns/{ns}")).with_context(|| format!("stat /proc/self/ns/{ns}"))?;
        Ok(theirs.dev() == ours.dev() && theirs.ino() == ours.ino())
    }

    fn resolve(&self, path: &Path) -> Option<PathBuf> {
        fs::canonicalize(path).ok()
    }

    fn kind(&self, path: &Path) -> Option<FileKind> {
        let m = fs::metadata(path).ok()?;
        let t = m.file_type();
        Some(if t.is_dir() {
            FileKind::Dir
        } else if t.is_file() {
            FileKind::File
        } else if t.is_socket() {
            FileKind::Socket
        } else if t.is_char_device() {
            FileKind::CharDevice(nix::sys::stat::major(m.rdev()), nix::sys::stat::minor(m.rdev()))
        } else if t.is_block_device() {
            FileKind::BlockDevice
        } else {
            FileKind::Other
        })
    }

    fn home(&self) -> PathBuf {
        nix::unistd::User::from_uid(nix::unistd::geteuid())
            .ok()
            .flatten()
            .map(|u| u.dir)
            .unwrap_or_else(|| PathBuf::from("/root"))
    }

    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        crate::bounded::read(path, crate::bounded::PROFILE_LIMIT)
    }
}
