//! What a compile is given besides the policy: the machine, seen through
//! `HostView` (the binary implements it with std::fs, the tests with a fake),
//! and the `Invocation` of one run. Every pass reads them through `Ctx`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// What `lstat` says of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathKind {
    Dir,
    File,
    /// A symlink and its target as stored (relative or absolute).
    Symlink(PathBuf),
    /// A socket, fifo or device.
    Other,
}

/// Who owns a path and its permission bits, as `lstat` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
    /// The permission bits (`st_mode & 0o7777`).
    pub mode: u32,
}

/// The machine as the compiler needs to see it; the binary implements it with
/// std::fs (and a fake implements it in tests).
pub trait HostView {
    /// `lstat(path)`; None when it does not exist (or cannot be reached).
    fn kind(&self, path: &Path) -> Option<PathKind>;
    /// The entries of a directory (for the host's `/`), without `.` and `..`.
    fn read_dir(&self, path: &Path) -> std::io::Result<Vec<(OsString, PathKind)>>;
    /// Entries under `root` whose name satisfies `matches` (files,
    /// directories and symlinks, each with what `kind` says of it), at most
    /// `max_depth` levels down and at most `max_entries` of them, not
    /// descending into `.git`, `.hg`, `node_modules` or `target` and not
    /// following symlinks. A compile makes one such search, always with the
    /// same matcher (`.env` files and the host-run names), so the binary may
    /// keep an index of it from one run to the next.
    fn find(
        &self,
        root: &Path,
        matches: &dyn Fn(&str) -> bool,
        max_depth: usize,
        max_entries: usize,
    ) -> std::io::Result<Vec<(PathBuf, PathKind)>>;
    /// The same search complete: every depth, into `node_modules` and
    /// `target` too (only a repository's own `.git` or `.hg` is not
    /// entered), no cap. The picture of what the host runs at start, which
    /// the exit's search (as complete) compares against.
    fn find_all(&self, root: &Path, matches: &dyn Fn(&str) -> bool) -> std::io::Result<Vec<(PathBuf, PathKind)>> {
        self.find(root, matches, usize::MAX, usize::MAX)
    }
    /// The content of a file (a custom seccomp profile, a repository's
    /// `.git/config`), bounded in size; only regular files are read.
    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>>;
    /// The socket census: the absolute paths the host's pathname unix
    /// sockets are bound at (every network namespace the caller can see),
    /// deduplicated, as bound (not resolved, not checked to exist).
    fn unix_sockets(&self) -> std::io::Result<Vec<PathBuf>>;
    /// `lstat(path)`'s owner and mode; None when it does not exist (the
    /// working directory's owner is who a root caller's sandbox runs as).
    fn owner(&self, path: &Path) -> Option<Owner>;
    /// What "others" may not read under `root`, at most `max_depth` levels
    /// down, not following symlinks, leaving out names `skip` accepts: regular
    /// files its owner or group may read and others may not, and directories
    /// without o+r or o+x (listed, not entered). Looking at more than
    /// `max_entries` entries is an error.
    fn root_only(
        &self,
        root: &Path,
        max_depth: usize,
        max_entries: usize,
        skip: &dyn Fn(&str) -> bool,
    ) -> std::io::Result<Vec<PathBuf>>;
}

/// Who runs what, where: everything of one run that is not in the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The working directory: absolute, symlinks resolved; writable inside.
    pub workdir: PathBuf,
    /// The caller's home (what `~` means in the policy).
    pub home: PathBuf,
    /// The caller's ids (for root invoked through sudo, root: 0). A root
    /// caller's sandbox runs as the working directory's owner (see `RunAs`).
    pub uid: u32,
    pub gid: u32,
    /// The caller has no root privileges (decides `user_namespace = "auto"`).
    pub unprivileged: bool,
    /// The caller's environment; the policy decides what passes.
    pub env: Vec<(String, String)>,
    /// The command to run.
    pub args: Vec<String>,
    /// Give the process a new pseudo-terminal.
    pub terminal: bool,
    /// `--rootfs`: overrides the policy's `filesystem.root`.
    pub rootfs: Option<PathBuf>,
}
