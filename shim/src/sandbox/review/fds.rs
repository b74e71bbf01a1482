//! The descriptor-level reads a review run's layer needs, one name at a
//! time below a directory descriptor, never following a link: what is at a
//! name (`lstat`), its overlay attributes, a directory or a file opened to
//! read. The upper layer is the sandbox's: a file or folder it left
//! unreadable (mode 000) to its owner is opened by lending the owner read
//! access for the open alone (the mode is put back at once, so what the
//! layer says of it does not change).

use std::ffi::OsStr;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};

/// How deep a layer may go; deeper is refused rather than half-read.
pub const MAX_DEPTH: usize = 512;

/// What `lstat` says of a name, as the layer reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    pub file_type: Type,
    /// Permission bits with the set-id and sticky bits (`st_mode & 0o7777`).
    pub mode: u32,
    pub len: u64,
    pub uid: u32,
    pub gid: u32,
    /// The last change of content or metadata, ns since the epoch.
    pub ctime_ns: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Dir,
    File,
    Link,
    /// A character device 0/0: overlayfs's whiteout.
    Whiteout,
    Device,
    Fifo,
    Socket,
}

impl Type {
    pub fn name(self) -> &'static str {
        match self {
            Type::Dir => "dir",
            Type::File => "file",
            Type::Link => "link",
            Type::Whiteout => "whiteout",
            Type::Device => "device",
            Type::Fifo => "fifo",
            Type::Socket => "socket",
        }
    }
}

pub fn meta_of(st: &rfs::Stat) -> Meta {
    let file_type = match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => Type::Dir,
        FileType::RegularFile => Type::File,
        FileType::Symlink => Type::Link,
        FileType::CharacterDevice if st.st_rdev == 0 => Type::Whiteout,
        FileType::CharacterDevice | FileType::BlockDevice => Type::Device,
        FileType::Fifo => Type::Fifo,
        _ => Type::Socket,
    };
    Meta {
        file_type,
        mode: st.st_mode & 0o7777,
        len: st.st_size as u64,
        uid: st.st_uid,
        gid: st.st_gid,
        ctime_ns: st
            .st_ctime
            .saturating_mul(1_000_000_000)
            .saturating_add(st.st_ctime_nsec as i64),
    }
}

/// `lstat` of `name` below `dir`; None when nothing is there (or a file
/// stands where a folder on the way was expected).
pub fn stat_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Option<Meta>> {
    match rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(meta_of(&st))),
        Err(e) if e == rustix::io::Errno::NOENT || e == rustix::io::Errno::NOTDIR => Ok(None),
        Err(e) => Err(e.into()),
    }
}

pub fn fstat(fd: BorrowedFd<'_>) -> io::Result<Meta> {
    Ok(meta_of(&rfs::fstat(fd)?))
}

pub fn read_link_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    let target = rfs::readlinkat(dir, name, Vec::new())?;
    Ok(PathBuf::from(std::ffi::OsString::from_vec(target.into_bytes())))
}

/// The names in a directory, `.` and `..` left out, in byte order. Read
/// through the descriptor itself (a copy of it, from the start), not one
/// opened anew: a folder opened by lending access is closed again by now.
pub fn names(dir: BorrowedFd<'_>) -> io::Result<Vec<std::ffi::OsString>> {
    use std::os::unix::ffi::OsStrExt;
    let mut out = Vec::new();
    let mut d = rfs::Dir::new(dir.try_clone_to_owned()?)?;
    d.rewind();
    for e in d {
        let e = e?;
        let n = e.file_name().to_bytes();
        if n != b"." && n != b".." {
            out.push(OsStr::from_bytes(n).to_os_string());
        }
    }
    out.sort();
    Ok(out)
}

const DIR: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);
/// O_NONBLOCK: a FIFO put where a file was must not wait for a writer.
const FILE: OFlags = OFlags::RDONLY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY)
    .union(OFlags::CLOEXEC);

/// `f` on `name` below `dir`; refused for lack of access to a name this
/// process owns, `f` again with the `lend` bits lent to it for that call.
fn lending<T>(dir: BorrowedFd<'_>, name: &OsStr, lend: u32, f: impl Fn() -> io::Result<T>) -> io::Result<T> {
    match f() {
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {}
        other => return other,
    }
    let handle = rfs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let st = rfs::fstat(&handle)?;
    if st.st_uid != rustix::process::geteuid().as_raw() || FileType::from_raw_mode(st.st_mode) == FileType::Symlink {
        return Err(io::Error::from_raw_os_error(libc::EACCES));
    }
    // The /proc link of an O_PATH descriptor names the inode, not a path.
    let proc = format!("/proc/self/fd/{}", handle.as_raw_fd());
    let mode = st.st_mode & 0o7777;
    rfs::chmod(proc.as_str(), Mode::from_raw_mode(mode | lend))?;
    let r = f();
    let _ = rfs::chmod(proc.as_str(), Mode::from_raw_mode(mode));
    // Still the inode lent to: nothing was swapped in between.
    let now = rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) {
        return Err(io::Error::other("it changed while it was read"));
    }
    r
}

/// Opens `name` below `dir` with `flags`, lending read access as `lending` does.
fn open_lending(dir: BorrowedFd<'_>, name: &OsStr, flags: OFlags, lend: u32) -> io::Result<OwnedFd> {
    let fd = lending(dir, name, lend, || {
        rfs::openat(dir, name, flags, Mode::empty()).map_err(Into::into)
    })?;
    let (a, b) = (rfs::fstat(&fd)?, rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?);
    if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino) {
        return Err(io::Error::other("it changed while it was opened"));
    }
    Ok(fd)
}

/// Whose entry is opened: the layer's (claude-shim's state, where a folder
/// or file the sandbox closed is opened by lending access) or the
/// project's (the user's, never changed, not even for a moment).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Layer,
    Project,
}

fn open_as(side: Side, dir: BorrowedFd<'_>, name: &OsStr, flags: OFlags, lend: u32) -> io::Result<OwnedFd> {
    match side {
        Side::Layer => open_lending(dir, name, flags, lend),
        Side::Project => rfs::openat(dir, name, flags, Mode::empty()).map_err(Into::into),
    }
}

/// The directory `name` below `dir`, open to list and to look below.
pub fn open_dir(side: Side, dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<OwnedFd> {
    open_as(side, dir, name, DIR, 0o500)
}

/// The regular file `name` below `dir`, open to read; anything else refused.
pub fn open_file(side: Side, dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<std::fs::File> {
    let fd = open_as(side, dir, name, FILE, 0o400)?;
    if FileType::from_raw_mode(rfs::fstat(&fd)?.st_mode) != FileType::RegularFile {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "it is not a regular file"));
    }
    Ok(std::fs::File::from(fd))
}

/// The file's whole content, at most `limit` bytes (None past it).
pub fn read_bounded(f: &mut std::fs::File, limit: u64) -> io::Result<Option<Vec<u8>>> {
    let mut out = Vec::new();
    f.take(limit + 1).read_to_end(&mut out)?;
    Ok((out.len() as u64 <= limit).then_some(out))
}

/// Whether two open files hold the same bytes.
pub fn same_bytes(a: &mut std::fs::File, b: &mut std::fs::File) -> io::Result<bool> {
    let (mut x, mut y) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let n = read_full(a, &mut x)?;
        let m = read_full(b, &mut y)?;
        if n != m || x[..n] != y[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }
}

fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// Whether the filesystem of `dir` gives file handles (name_to_handle_at):
/// then overlayfs records in each entry it copies up where it came from
/// (`overlay.origin`), and an upper entry without it was made new.
pub fn gives_file_handles(dir: BorrowedFd<'_>) -> bool {
    let mut handle = libc::file_handle {
        handle_bytes: 0,
        handle_type: 0,
        f_handle: [],
    };
    let mut mount_id = 0;
    // SAFETY: a size query (handle_bytes 0): the kernel writes only the
    // header and the mount id; the path is a static C string.
    let r = unsafe {
        libc::name_to_handle_at(
            std::os::fd::AsRawFd::as_raw_fd(&dir),
            c"".as_ptr(),
            &mut handle,
            &mut mount_id,
            libc::AT_EMPTY_PATH,
        )
    };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EOVERFLOW)
}

/// The value of the extended attribute `attr` of `name` below `dir` (the
/// name itself, never a link's target); None when it has none.
pub fn xattr_at(dir: BorrowedFd<'_>, name: &OsStr, attr: &str) -> io::Result<Option<Vec<u8>>> {
    use std::os::unix::ffi::OsStrExt;
    let mut path = format!("/proc/self/fd/{}/", dir.as_raw_fd()).into_bytes();
    path.extend_from_slice(name.as_bytes());
    let path = OsStr::from_bytes(&path);
    let get = || -> io::Result<Option<Vec<u8>>> {
        let mut buf = [0u8; 256];
        match rfs::lgetxattr(path, attr, &mut buf[..]) {
            Ok(n) => Ok(Some(buf[..n].to_vec())),
            Err(e) if e == rustix::io::Errno::NODATA || e == rustix::io::Errno::NOTSUP => Ok(None),
            // A value longer than any overlayfs writes for these attributes.
            Err(rustix::io::Errno::RANGE) => Ok(Some(b"?".to_vec())),
            Err(e) => Err(e.into()),
        }
    };
    // A user.* attribute of a folder the sandbox closed takes read access.
    lending(dir, name, 0o400, get)
}

/// The overlay attribute `what` (`opaque`, `redirect`...) under both
/// namespaces overlayfs uses: `trusted.` (mounted by root) and `user.`
/// (`userxattr`, in a user namespace).
pub fn overlay_xattr(dir: BorrowedFd<'_>, name: &OsStr, what: &str) -> io::Result<Option<Vec<u8>>> {
    for ns in ["trusted", "user"] {
        if let Some(v) = xattr_at(dir, name, &format!("{ns}.overlay.{what}"))? {
            return Ok(Some(v));
        }
    }
    Ok(None)
}

/// Gives this process's folders under `name` below `dir` (itself included)
/// that lack read, write or search access for their owner (the sandbox
/// closed them, mode 000) that access, parents before children, links
/// never followed. A lookup below a folder takes search access at the time
/// of the lookup, which lending for the open alone cannot give. Returns
/// each folder opened, relative to `name`, with the mode it had.
pub fn open_up(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Vec<(PathBuf, u32)>> {
    let mut out = Vec::new();
    open_up_in(dir, name, PathBuf::new(), 0, &mut out)?;
    Ok(out)
}

fn open_up_in(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    rel: PathBuf,
    depth: usize,
    out: &mut Vec<(PathBuf, u32)>,
) -> io::Result<()> {
    let Some(m) = stat_at(dir, name)? else { return Ok(()) };
    if m.file_type != Type::Dir {
        return Ok(());
    }
    if depth > MAX_DEPTH {
        return Err(io::Error::other("it is nested too deep to open"));
    }
    if m.mode & 0o700 != 0o700 && m.uid == rustix::process::geteuid().as_raw() {
        let handle = rfs::openat(
            dir,
            name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let st = rfs::fstat(&handle)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            return Err(io::Error::other("it changed while it was opened"));
        }
        // The /proc link of an O_PATH descriptor names the inode, not a path.
        let proc = format!("/proc/self/fd/{}", handle.as_raw_fd());
        rfs::chmod(proc.as_str(), Mode::from_raw_mode((st.st_mode & 0o7777) | 0o700))?;
        out.push((rel.clone(), m.mode));
    }
    let sub = rfs::openat(dir, name, DIR, Mode::empty())?;
    for n in names(sub.as_fd())? {
        open_up_in(sub.as_fd(), &n, rel.join(&n), depth + 1, out)?;
    }
    Ok(())
}

/// Removes `name` below `dir` and everything under it, links removed and
/// never followed; a folder of this process's that the sandbox left closed
/// (mode 000) is opened by lending access, as everywhere here.
pub fn remove_all_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    remove_all_in(dir, name, 0)
}

fn remove_all_in(dir: BorrowedFd<'_>, name: &OsStr, depth: usize) -> io::Result<()> {
    let Some(m) = stat_at(dir, name)? else { return Ok(()) };
    if m.file_type != Type::Dir {
        return rfs::unlinkat(dir, name, AtFlags::empty()).map_err(Into::into);
    }
    if depth > MAX_DEPTH {
        return Err(io::Error::other("it is nested too deep to remove"));
    }
    let sub = open_dir(Side::Layer, dir, name)?;
    // Removing entries takes write access to the folder.
    if m.mode & 0o300 != 0o300 && m.uid == rustix::process::geteuid().as_raw() {
        rfs::fchmod(&sub, Mode::from_raw_mode(m.mode | 0o700))?;
    }
    for n in names(sub.as_fd())? {
        remove_all_in(sub.as_fd(), &n, depth + 1)?;
    }
    rfs::unlinkat(dir, name, AtFlags::REMOVEDIR).map_err(Into::into)
}
