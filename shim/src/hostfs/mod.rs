//! Files claude-shim touches on the host in places a sandbox can write: the
//! agent's configuration directory, placeholders in the working directory,
//! the per-command temp directories, the logs in the state directory. Each
//! path is resolved below a directory handle taken before the sandbox ran,
//! one component at a time, and a symbolic link anywhere on the way is an
//! error naming the path, never followed (pathrs with RESOLVE_NO_SYMLINKS:
//! openat2 underneath, an O_PATH walk where the kernel lacks it). What is
//! read here is the sandbox's data: regular files only, bounded.

use std::ffi::{OsStr, OsString};
use std::fs::{File, Permissions};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use pathrs::flags::{OpenFlags, RenameFlags, ResolverFlags};
use pathrs::{InodeType, Root};

#[cfg(test)]
mod tests;
mod tree;

/// What went wrong with one path, as one line: `OP PATH: CAUSE`.
#[derive(Debug)]
pub struct Error {
    op: &'static str,
    path: PathBuf,
    source: io::Error,
}

impl Error {
    pub fn kind(&self) -> io::ErrorKind {
        self.source.kind()
    }

    pub fn is_not_found(&self) -> bool {
        self.kind() == io::ErrorKind::NotFound
    }

    pub fn is_exists(&self) -> bool {
        self.kind() == io::ErrorKind::AlreadyExists
    }

    /// A symbolic link was where a file or a directory was expected.
    pub fn is_link(&self) -> bool {
        self.source.raw_os_error() == Some(libc::ELOOP)
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: ", self.op, self.path.display())?;
        if self.is_link() {
            f.write_str("a symbolic link is in the way (claude-shim follows none where a sandbox can write)")
        } else {
            write!(f, "{}", self.source)
        }
    }
}

// No source(): the cause is already in the one line.
impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// What is at a path, the last component not followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Link,
    Other,
}

#[derive(Debug, Clone, Copy)]
pub struct Stat {
    pub kind: Kind,
    pub len: u64,
    pub nlink: u64,
    #[allow(dead_code, reason = "what the quarantine at exit (issue 23) tells entries apart by")]
    pub dev: u64,
    #[allow(dead_code, reason = "what the quarantine at exit (issue 23) tells entries apart by")]
    pub ino: u64,
    /// Permission bits only.
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// The last modification, in nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// The last change of content or metadata (which no caller can set), in
    /// nanoseconds since the epoch.
    pub ctime_ns: i128,
}

impl Stat {
    fn of(st: &rustix::fs::Stat) -> Stat {
        use rustix::fs::FileType as T;
        let kind = match T::from_raw_mode(st.st_mode) {
            T::RegularFile => Kind::File,
            T::Directory => Kind::Dir,
            T::Symlink => Kind::Link,
            _ => Kind::Other,
        };
        Stat {
            kind,
            len: st.st_size as u64,
            nlink: st.st_nlink,
            dev: st.st_dev,
            ino: st.st_ino,
            mode: st.st_mode & 0o7777,
            uid: st.st_uid,
            gid: st.st_gid,
            mtime_ns: st.st_mtime as i128 * 1_000_000_000 + st.st_mtime_nsec as i128,
            ctime_ns: st.st_ctime as i128 * 1_000_000_000 + st.st_ctime_nsec as i128,
        }
    }
}

/// A directory handle: every path given to it is relative, made of plain
/// names (no `..`), and resolved below it without following a link.
pub struct Dir {
    root: Root,
    path: PathBuf,
}

fn flags() -> ResolverFlags {
    ResolverFlags::NO_SYMLINKS
}

/// pathrs's error as the system's, so that callers can tell a missing file
/// from a link.
fn os(e: pathrs::error::Error) -> io::Error {
    use pathrs::error::ErrorKind as K;
    match e.kind() {
        K::OsError(Some(n)) => io::Error::from_raw_os_error(n),
        K::SafetyViolation => io::Error::other("it changed while it was resolved"),
        _ => io::Error::other(e.to_string()),
    }
}

/// A relative path of plain names; `""` is the directory itself.
fn check(rel: &Path) -> io::Result<()> {
    if rel.components().all(|c| matches!(c, Component::Normal(_))) {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a path of plain names below its directory",
        ))
    }
}

fn split(rel: &Path) -> io::Result<(&Path, &OsStr)> {
    check(rel)?;
    match (rel.parent(), rel.file_name()) {
        (Some(p), Some(n)) => Ok((p, n)),
        _ => Err(io::Error::new(io::ErrorKind::InvalidInput, "names no file")),
    }
}

/// `rel`, or `.` for the directory itself.
fn here(rel: &Path) -> &Path {
    if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    }
}

/// A resolved handle as the root of a `Dir`, if it is a directory.
fn dir_root(h: pathrs::Handle) -> io::Result<Root> {
    if rustix::fs::fstat(h.as_fd())?.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
    }
    Ok(Root::from_fd(OwnedFd::from(h)).with_resolver_flags(flags()))
}

/// A name for a new file beside `rel` that nobody else picks.
fn temp_name(rel: &Path, n: u32) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNT: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    let name = rel.file_name().unwrap_or_default().to_string_lossy();
    let seq = COUNT.fetch_add(1, Ordering::Relaxed);
    rel.with_file_name(format!(
        ".{name}.claude-shim-{}-{nanos:x}-{seq}-{n}.tmp",
        std::process::id()
    ))
}

impl Dir {
    /// The directory at `path`, which the caller trusts (taken before any
    /// sandbox ran, or named by the user): links in `path` itself are followed.
    pub fn open(path: &Path) -> Result<Dir> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(path)
            .map_err(|source| Error {
                op: "open",
                path: path.to_path_buf(),
                source,
            })?;
        Ok(Dir {
            root: Root::from_fd(OwnedFd::from(file)).with_resolver_flags(flags()),
            path: path.to_path_buf(),
        })
    }

    /// `anchor` (trusted, as in `open`), then `rel` below it created where
    /// missing, without following a link.
    pub fn create_beneath(anchor: &Path, rel: &Path, mode: u32) -> Result<Dir> {
        let base = Dir::open(anchor)?;
        if rel.as_os_str().is_empty() {
            return Ok(base);
        }
        base.create_dir_all(rel, mode)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of `rel`, for messages.
    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.path.join(rel)
    }

    fn err(&self, op: &'static str, rel: &Path, source: io::Error) -> Error {
        Error {
            op,
            path: self.join(rel),
            source,
        }
    }

    fn at<T>(&self, op: &'static str, rel: &Path, f: impl FnOnce() -> io::Result<T>) -> Result<T> {
        check(rel).and_then(|()| f()).map_err(|e| self.err(op, rel, e))
    }

    /// A handle on the directory `rel` below this one.
    pub fn sub(&self, rel: &Path) -> Result<Dir> {
        let root = self.at("open", rel, || {
            let h = self.root.resolve(here(rel)).map_err(os)?;
            dir_root(h)
        })?;
        Ok(Dir {
            root,
            path: self.join(rel),
        })
    }

    /// What is at `rel`, a link there not followed; None if nothing is.
    pub fn stat(&self, rel: &Path) -> Result<Option<Stat>> {
        let r = self.at("stat", rel, || {
            let h = self.root.resolve_nofollow(here(rel)).map_err(os)?;
            Ok(Stat::of(&rustix::fs::fstat(h.as_fd())?))
        });
        match r {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub fn create_dir(&self, rel: &Path, mode: u32) -> Result<()> {
        self.at("create", rel, || {
            let perm = Permissions::from_mode(mode);
            self.root.create(rel, &InodeType::Directory(perm)).map_err(os)
        })
    }

    /// `rel` and its missing parents; a handle on it.
    pub fn create_dir_all(&self, rel: &Path, mode: u32) -> Result<Dir> {
        let root = self.at("create", rel, || {
            let h = self.root.mkdir_all(rel, &Permissions::from_mode(mode)).map_err(os)?;
            dir_root(h)
        })?;
        Ok(Dir {
            root,
            path: self.join(rel),
        })
    }

    /// A new file at `rel` (O_EXCL: nothing, not even a link, may be there).
    pub fn create_new(&self, rel: &Path, mode: u32) -> Result<File> {
        self.at("create", rel, || {
            let f = OpenFlags::O_WRONLY | OpenFlags::O_EXCL | OpenFlags::O_NOFOLLOW | OpenFlags::O_CLOEXEC;
            self.root.create_file(rel, f, &Permissions::from_mode(mode)).map_err(os)
        })
    }

    /// The regular file at `rel`, open for reading.
    pub fn open_file(&self, rel: &Path) -> Result<File> {
        self.at("read", rel, || {
            // O_NONBLOCK: a FIFO must not wait for a writer; it is refused below.
            let f = OpenFlags::O_RDONLY
                | OpenFlags::O_NOFOLLOW
                | OpenFlags::O_NONBLOCK
                | OpenFlags::O_CLOEXEC
                | OpenFlags::O_NOCTTY;
            let file = self.root.open_subpath(rel, f).map_err(os)?;
            if !file.metadata()?.is_file() {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, "it is not a regular file"));
            }
            Ok(file)
        })
    }

    /// The whole content of the regular file at `rel`, at most `limit` bytes.
    pub fn read(&self, rel: &Path, limit: u64) -> Result<Vec<u8>> {
        let file = self.open_file(rel)?;
        self.at("read", rel, || {
            let mut out = Vec::new();
            // The file may grow while it is read: one byte past the limit tells.
            file.take(limit + 1).read_to_end(&mut out)?;
            if out.len() as u64 > limit {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("it is larger than {} KiB", limit >> 10),
                ));
            }
            Ok(out)
        })
    }

    /// A new file at `rel` holding `content`.
    pub fn write_new(&self, rel: &Path, content: &[u8], mode: u32) -> Result<()> {
        let mut f = self.create_new(rel, mode)?;
        self.at("write", rel, || f.write_all(content))
    }

    /// `rel` replaced by a new file holding `content`: written under a fresh
    /// name beside it, then renamed over it (a rename replaces a link, never
    /// writes through it). Readers see the old file or the new one.
    pub fn replace(&self, rel: &Path, content: &[u8], mode: u32) -> Result<()> {
        self.replace_with(rel, |d, tmp| d.write_new(tmp, content, mode))
    }

    /// `rel` replaced by a new file holding what `src` reads to its end, as
    /// `replace` does (streamed: the file may be large).
    pub fn replace_from(&self, rel: &Path, src: &mut dyn Read, mode: u32) -> Result<()> {
        let src = std::cell::RefCell::new(src);
        self.replace_with(rel, |d, tmp| {
            let mut f = d.create_new(tmp, mode)?;
            d.at("write", tmp, || io::copy(&mut *src.borrow_mut(), &mut f).map(|_| ()))
        })
    }

    /// `rel` replaced by a symbolic link to `target`, as `replace` does.
    pub fn replace_symlink(&self, rel: &Path, target: &Path) -> Result<()> {
        self.replace_with(rel, |d, tmp| {
            d.at("create", tmp, || {
                d.root
                    .create(tmp, &InodeType::Symlink(target.to_path_buf()))
                    .map_err(os)
            })
        })
    }

    fn replace_with(&self, rel: &Path, make: impl Fn(&Dir, &Path) -> Result<()>) -> Result<()> {
        self.at("write", rel, || split(rel).map(|_| ()))?;
        let mut n = 0;
        let tmp = loop {
            let tmp = temp_name(rel, n);
            match make(self, &tmp) {
                Ok(()) => break tmp,
                Err(e) if e.is_exists() && n < 16 => n += 1,
                Err(e) => {
                    let _ = self.remove_file(&tmp);
                    return Err(e);
                }
            }
        };
        let r = self.at("write", rel, || {
            self.root.rename(&tmp, rel, RenameFlags::empty()).map_err(os)
        });
        if r.is_err() {
            let _ = self.remove_file(&tmp);
        }
        r
    }

    /// The target of the link at `rel`; None if nothing or no link is there.
    pub fn read_link(&self, rel: &Path) -> Result<Option<PathBuf>> {
        match self.at("read", rel, || self.root.readlink(rel).map_err(os)) {
            Ok(p) => Ok(Some(p)),
            Err(e) if e.is_not_found() || e.kind() == io::ErrorKind::InvalidInput => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Unlinks what is at `rel` (a link itself, never its target); not a directory.
    pub fn remove_file(&self, rel: &Path) -> Result<()> {
        self.at("remove", rel, || self.root.remove_file(rel).map_err(os))
    }

    /// Removes the empty directory at `rel`.
    pub fn remove_dir(&self, rel: &Path) -> Result<()> {
        self.at("remove", rel, || self.root.remove_dir(rel).map_err(os))
    }

    /// Removes `rel` and everything below it; links are removed, not followed.
    pub fn remove_all(&self, rel: &Path) -> Result<()> {
        self.at("remove", rel, || self.root.remove_all(rel).map_err(os))
    }

    /// Moves `rel` to `to_rel` below `to` (another handle, same filesystem);
    /// nothing may be at `to_rel`.
    pub fn rename_to(&self, rel: &Path, to: &Dir, to_rel: &Path) -> Result<()> {
        let (from_dir, from_name) = self.parent(rel)?;
        let (to_dir, to_name) = to.parent(to_rel)?;
        self.at("move", rel, || {
            rustix::fs::renameat_with(
                from_dir.as_fd(),
                from_name,
                to_dir.as_fd(),
                to_name,
                rustix::fs::RenameFlags::NOREPLACE,
            )
            .map_err(io::Error::from)
        })
    }

    /// A handle on the directory holding `rel`, and `rel`'s last name.
    fn parent<'a>(&self, rel: &'a Path) -> Result<(pathrs::Handle, &'a OsStr)> {
        self.at("open", rel, || {
            let (parent, name) = split(rel)?;
            Ok((self.root.resolve(here(parent)).map_err(os)?, name))
        })
    }

    /// Gives what is at `rel` (a link itself, never its target) to `uid`:`gid`.
    pub fn chown(&self, rel: &Path, uid: u32, gid: u32) -> Result<()> {
        let (dir, name) = self.parent(rel)?;
        self.at("chown", rel, || {
            rustix::fs::chownat(
                dir.as_fd(),
                name,
                Some(rustix::fs::Uid::from_raw(uid)),
                Some(rustix::fs::Gid::from_raw(gid)),
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            )
            .map_err(io::Error::from)
        })
    }

    /// Sets the permission bits of what is at `rel` (a link is refused,
    /// never followed): an entry a sandbox made unreadable or unmovable to
    /// its owner is opened up again by that owner (or root).
    pub fn chmod(&self, rel: &Path, mode: u32) -> Result<()> {
        self.at("chmod", rel, || {
            // O_PATH and the descriptor's /proc link: fchmodat cannot refuse
            // a link by itself on every kernel.
            let h = self.root.resolve_nofollow(here(rel)).map_err(os)?;
            let st = rustix::fs::fstat(h.as_fd())?;
            if rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Symlink {
                return Err(io::Error::from_raw_os_error(libc::ELOOP));
            }
            let proc = PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&h.as_fd())));
            std::fs::set_permissions(&proc, Permissions::from_mode(mode & 0o7777))
        })
    }

    /// A readable descriptor of this directory itself, for a walk of its own
    /// (reached through the handle, not its path).
    pub fn open_fd(&self) -> Result<OwnedFd> {
        self.at("open", Path::new(""), || {
            let h = self.root.resolve(here(Path::new(""))).map_err(os)?;
            let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC;
            Ok(rustix::fs::openat(h.as_fd(), ".", flags, rustix::fs::Mode::empty())?)
        })
    }

    /// The names in the directory `rel` with what each is (not followed).
    pub fn list(&self, rel: &Path) -> Result<Vec<(OsString, Kind)>> {
        self.at("list", rel, || {
            // Resolved first: a link as the last name is then ELOOP, as everywhere.
            let h = self.root.resolve(here(rel)).map_err(os)?;
            let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC;
            let dir = rustix::fs::openat(h.as_fd(), ".", flags, rustix::fs::Mode::empty())?;
            let mut out = Vec::new();
            for e in rustix::fs::Dir::read_from(&dir)? {
                let e = e?;
                let name = e.file_name().to_bytes();
                if name == b"." || name == b".." {
                    continue;
                }
                let name = OsStr::from_bytes(name).to_os_string();
                let st = rustix::fs::statat(&dir, name.as_os_str(), rustix::fs::AtFlags::SYMLINK_NOFOLLOW)?;
                out.push((name, Stat::of(&st).kind));
            }
            out.sort_by(|a, b| a.0.cmp(&b.0));
            Ok(out)
        })
    }
}
