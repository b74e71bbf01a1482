//! claude-shim: `tmpcopyup`, the mount option podman puts on the tmpfs it adds
//! for `--read-only` (/tmp, /run, /var/tmp) and for `--tmpfs`: the directory
//! the tmpfs is about to cover is copied into it first, as runc does, so the
//! image's files stay visible.
//!
//! Every step works on directory handles, never on a path string: the source
//! is the destination as resolved inside the rootfs (a pathrs handle), the
//! target is the new tmpfs, still detached (fsmount), so nothing else can see
//! or change it. Each entry is looked up by its one-component name relative to
//! its parent's handle, with O_NOFOLLOW, so a symlink in the image is copied as
//! a symlink and never followed out of the rootfs (runc 1.1's copy walks host
//! paths before pivot_root). Regular files are checked again on the opened
//! handle, so an entry swapped for a FIFO or a directory is refused, not read.
//!
//! As in runc: files, directories, symlinks and device, FIFO and socket nodes
//! keep their owner and mode (set after the contents, chown before chmod so
//! setuid bits survive); timestamps are not kept; hard links become separate
//! files. The image is untrusted, so the copy is bounded: more bytes, entries
//! or nesting than `Limits` allows is refused with one line naming the mount.

use std::ffi::{CStr, OsStr};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, readlinkat};
use nix::sys::stat::{FchmodatFlags, FileStat, Mode, SFlag, fchmod, fchmodat, fstat, mkdirat, mknodat};
use nix::unistd::{Gid, Uid, fchown, fchownat, symlinkat};

/// How much one tmpcopyup may copy. A real image's /tmp or /run holds a few
/// files; these leave room for `--tmpfs` over a large directory while keeping
/// a hostile image from filling memory or running the copy for long.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Bytes of regular-file data.
    pub bytes: u64,
    /// Entries of any kind.
    pub entries: u64,
    /// Directories nested below the copied one (each level holds two handles).
    pub depth: usize,
}

pub const LIMITS: Limits = Limits {
    bytes: 1 << 30,
    entries: 1 << 16,
    depth: 64,
};

/// Copies the contents of the directory `src` into the directory `dst` (the
/// root of a detached tmpfs). `dest` is the mount's destination, for errors.
pub fn copy_up(src: BorrowedFd<'_>, dst: BorrowedFd<'_>, dest: &Path, limits: Limits) -> io::Result<()> {
    let mut copy = Copy {
        limits,
        bytes: 0,
        entries: 0,
    };
    let result = (|| {
        let src = open_dir(src, c".").map_err(|e| (PathBuf::new(), Failure::Sys(e)))?;
        let dst = open_dir(dst, c".").map_err(|e| (PathBuf::new(), Failure::Sys(e)))?;
        copy.dir(src.as_fd(), dst.as_fd(), Path::new(""), 0)
    })();
    result.map_err(|(at, failure)| {
        let place = if at.as_os_str().is_empty() {
            String::new()
        } else {
            format!(" at {}", at.display())
        };
        match failure {
            Failure::Sys(errno) => io::Error::new(
                io::Error::from(errno).kind(),
                format!("tmpcopyup of {}{place}: {}", dest.display(), errno.desc()),
            ),
            Failure::Io(e) => io::Error::new(e.kind(), format!("tmpcopyup of {}{place}: {e}", dest.display())),
            Failure::Refused(why) => io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("tmpcopyup of {}{place}: refused: {why}", dest.display()),
            ),
        }
    })
}

enum Failure {
    Sys(Errno),
    Io(io::Error),
    Refused(String),
}

type Step<T> = std::result::Result<T, (PathBuf, Failure)>;

struct Copy {
    limits: Limits,
    bytes: u64,
    entries: u64,
}

fn open_dir(parent: BorrowedFd<'_>, name: &CStr) -> nix::Result<OwnedFd> {
    open(parent, name, OFlag::O_RDONLY | OFlag::O_DIRECTORY)
}

fn open(parent: BorrowedFd<'_>, name: &CStr, flags: OFlag) -> nix::Result<OwnedFd> {
    let fd = openat(
        Some(parent.as_raw_fd()),
        name,
        flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NOCTTY,
        Mode::empty(),
    )?;
    // SAFETY: openat just returned this descriptor and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn perm(st: &FileStat) -> Mode {
    Mode::from_bits_truncate(st.st_mode & 0o7777)
}

fn owner(st: &FileStat) -> (Option<Uid>, Option<Gid>) {
    (Some(Uid::from_raw(st.st_uid)), Some(Gid::from_raw(st.st_gid)))
}

impl Copy {
    fn dir(&mut self, src: BorrowedFd<'_>, dst: BorrowedFd<'_>, rel: &Path, depth: usize) -> Step<()> {
        let sys = |e: Errno| (rel.to_path_buf(), Failure::Sys(e));
        // Dir owns the descriptor it reads; `src` itself stays for the *at calls.
        let listing = nix::unistd::dup(src.as_raw_fd()).map_err(sys)?;
        let mut entries = Dir::from_fd(listing).map_err(sys)?;
        for entry in entries.iter() {
            let entry = entry.map_err(sys)?;
            let name = entry.file_name();
            if name.to_bytes() == b"." || name.to_bytes() == b".." {
                continue;
            }
            let path = rel.join(OsStr::from_bytes(name.to_bytes()));
            self.entries += 1;
            if self.entries > self.limits.entries {
                return Err((
                    path,
                    Failure::Refused(format!("more than {} entries to copy", self.limits.entries)),
                ));
            }
            self.entry(src, dst, name, &path, depth)?;
        }
        Ok(())
    }

    fn entry(&mut self, src: BorrowedFd<'_>, dst: BorrowedFd<'_>, name: &CStr, path: &Path, depth: usize) -> Step<()> {
        let sys = |e: Errno| (path.to_path_buf(), Failure::Sys(e));
        let st = nix::sys::stat::fstatat(Some(src.as_raw_fd()), name, AtFlags::AT_SYMLINK_NOFOLLOW).map_err(sys)?;
        let (uid, gid) = owner(&st);
        match SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) {
            SFlag::S_IFDIR => {
                if depth + 1 > self.limits.depth {
                    return Err((
                        path.to_path_buf(),
                        Failure::Refused(format!("directories nested deeper than {}", self.limits.depth)),
                    ));
                }
                let from = open(src, name, OFlag::O_RDONLY | OFlag::O_DIRECTORY).map_err(sys)?;
                let st = fstat(from.as_raw_fd()).map_err(sys)?;
                mkdirat(Some(dst.as_raw_fd()), name, Mode::S_IRWXU).map_err(sys)?;
                let to = open(dst, name, OFlag::O_RDONLY | OFlag::O_DIRECTORY).map_err(sys)?;
                let (uid, gid) = owner(&st);
                self.dir(from.as_fd(), to.as_fd(), path, depth + 1)?;
                fchown(to.as_raw_fd(), uid, gid).map_err(sys)?;
                fchmod(to.as_raw_fd(), perm(&st)).map_err(sys)?;
            }
            SFlag::S_IFREG => {
                // O_NONBLOCK: should the entry have become a FIFO since the
                // fstatat, opening it must not wait for a writer.
                let from = open(src, name, OFlag::O_RDONLY | OFlag::O_NONBLOCK).map_err(sys)?;
                let st = fstat(from.as_raw_fd()).map_err(sys)?;
                if SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) != SFlag::S_IFREG {
                    return Err((
                        path.to_path_buf(),
                        Failure::Refused("the entry changed type while being copied".into()),
                    ));
                }
                let left = self.limits.bytes - self.bytes;
                if st.st_size as u64 > left {
                    return Err((path.to_path_buf(), self.too_many_bytes()));
                }
                let to = open(dst, name, OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL).map_err(sys)?;
                let mut reader = File::from(from).take(left + 1);
                let mut writer = File::from(to);
                let copied = io::copy(&mut reader, &mut writer).map_err(|e| (path.to_path_buf(), Failure::Io(e)))?;
                if copied > left {
                    return Err((path.to_path_buf(), self.too_many_bytes()));
                }
                self.bytes += copied;
                fchown(writer.as_raw_fd(), uid, gid).map_err(sys)?;
                fchmod(writer.as_raw_fd(), perm(&st)).map_err(sys)?;
            }
            SFlag::S_IFLNK => {
                let target = readlinkat(Some(src.as_raw_fd()), name).map_err(sys)?;
                symlinkat(target.as_os_str(), Some(dst.as_raw_fd()), name).map_err(sys)?;
                fchownat(Some(dst.as_raw_fd()), name, uid, gid, AtFlags::AT_SYMLINK_NOFOLLOW).map_err(sys)?;
            }
            kind @ (SFlag::S_IFCHR | SFlag::S_IFBLK | SFlag::S_IFIFO | SFlag::S_IFSOCK) => {
                mknodat(Some(dst.as_raw_fd()), name, kind, perm(&st), st.st_rdev).map_err(sys)?;
                fchownat(Some(dst.as_raw_fd()), name, uid, gid, AtFlags::AT_SYMLINK_NOFOLLOW).map_err(sys)?;
                // The node was made just now in a tmpfs no one else can reach
                // yet, so the name cannot have become a symlink; chmod after
                // chown, as for files, and past the umask.
                fchmodat(Some(dst.as_raw_fd()), name, perm(&st), FchmodatFlags::FollowSymlink).map_err(sys)?;
            }
            _ => {
                return Err((
                    path.to_path_buf(),
                    Failure::Refused(format!("unknown file type {:o}", st.st_mode)),
                ));
            }
        }
        Ok(())
    }

    fn too_many_bytes(&self) -> Failure {
        Failure::Refused(format!("more than {} bytes to copy", self.limits.bytes))
    }
}
