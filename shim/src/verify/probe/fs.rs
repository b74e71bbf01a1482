//! Filesystem and socket checks: hidden paths read as absent or empty,
//! read-only paths refuse writes with the expected errno (and must exist, so a
//! missing path cannot pass for a protected one), writable paths take a file,
//! pinned directories cannot be renamed, and host sockets do not accept a
//! connection.

use std::fs;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use nix::errno::Errno;
use nix::sys::socket::{connect, socket, AddressFamily, SockFlag, SockType, UnixAddr};

use crate::verify::expect::{errno_name, Errnos};
use crate::verify::outcome::Finding;

fn io_errno(e: &std::io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

/// A name no one else uses, for the file a write check creates.
fn scratch_name(dir: &Path) -> std::path::PathBuf {
    dir.join(format!(".claude-shim-probe-{}", std::process::id()))
}

pub fn hidden(path: &Path) -> Finding {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Finding::pass("absent"),
        Err(e) => return Finding::pass(format!("not reachable: {}", errno_name(io_errno(&e)))),
    };
    let ft = meta.file_type();
    if ft.is_dir() {
        return match fs::read_dir(path) {
            Ok(entries) => {
                let names: Vec<String> = entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                if names.is_empty() {
                    Finding::pass("empty directory")
                } else {
                    let shown: Vec<&str> = names.iter().take(5).map(String::as_str).collect();
                    Finding::fail(format!("directory with {} entries: {}", names.len(), shown.join(", ")))
                }
            }
            Err(e) => Finding::pass(format!("directory not listable: {}", errno_name(io_errno(&e)))),
        };
    }
    if ft.is_fifo() || ft.is_socket() {
        return Finding::fail(format!("a {}", if ft.is_fifo() { "fifo" } else { "socket" }));
    }
    // Regular files, device nodes (/dev/null over a masked file), and what a
    // symlink leads to: the first read must find nothing. Non-blocking, so a
    // device cannot hang the probe; one page, so /proc/kcore is not read whole.
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path);
    match file {
        Ok(mut f) => {
            let mut buf = [0u8; 4096];
            match f.read(&mut buf) {
                Ok(0) => Finding::pass(if ft.is_char_device() {
                    "character device, reads empty"
                } else {
                    "reads empty"
                }),
                Ok(n) => Finding::fail(format!("readable: {n}+ bytes")),
                Err(e) => Finding::pass(format!("not readable: {}", errno_name(io_errno(&e)))),
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Finding::pass("dangling symlink"),
        Err(e) => Finding::pass(format!("not readable: {}", errno_name(io_errno(&e)))),
    }
}

pub fn read_only(path: &Path, refused_with: &Errnos) -> Finding {
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) => {
            return Finding::fail(format!(
                "cannot check: {} ({})",
                errno_name(io_errno(&e)),
                "a read-only path must exist"
            ))
        }
    };
    let (what, result) = if meta.is_dir() {
        let scratch = scratch_name(path);
        let r = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&scratch);
        if r.is_ok() {
            let _ = fs::remove_file(&scratch);
        }
        ("created a file in it (removed)", r.map(drop))
    } else {
        // Opening for writing is the permission check; nothing is written
        // and nothing truncated.
        let r = fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path);
        ("opened for writing (nothing written)", r.map(drop))
    };
    let errno = match result {
        Ok(()) => return Finding::fail(format!("writable: {what}")),
        Err(e) => io_errno(&e),
    };
    if refused_with.contains(errno) {
        return Finding::pass(format!("refused: {}", errno_name(errno)));
    }
    // Some filesystems refuse regular files on a writable mount (cgroupfs
    // says EACCES) yet take directories: a new cgroup is a write too.
    if meta.is_dir() {
        let scratch = scratch_name(path);
        if fs::create_dir(&scratch).is_ok() {
            let _ = fs::remove_dir(&scratch);
            return Finding::fail(format!(
                "writable: a file is refused ({}) but a directory was created (removed)",
                errno_name(errno)
            ));
        }
    }
    Finding::fail(format!("refused: {}", errno_name(errno)))
}

pub fn writable(path: &Path) -> Finding {
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) => return Finding::fail(format!("cannot check: {}", errno_name(io_errno(&e)))),
    };
    if !meta.is_dir() {
        let r = fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path);
        return match r {
            Ok(_) => Finding::pass("opens for writing (nothing written)"),
            Err(e) => Finding::fail(format!("refused: {}", errno_name(io_errno(&e)))),
        };
    }
    let scratch = scratch_name(path);
    let r = (|| -> std::io::Result<bool> {
        fs::write(&scratch, b"claude-shim probe\n")?;
        let back = fs::read(&scratch)?;
        fs::remove_file(&scratch)?;
        Ok(back == b"claude-shim probe\n")
    })();
    match r {
        Ok(true) => Finding::pass("created, read back and removed a file"),
        Ok(false) => Finding::fail("a file written there read back different"),
        Err(e) => {
            let _ = fs::remove_file(&scratch);
            Finding::fail(format!("refused: {}", errno_name(io_errno(&e))))
        }
    }
}

/// A directory that is a mount point of its own cannot be renamed (rename(2):
/// EBUSY), so it cannot be moved aside with what is mounted in it and
/// replaced. Checked without moving anything: the rename is aimed at a
/// non-empty scratch directory beside it, which the kernel refuses either
/// way, with EBUSY for a mount point and ENOTEMPTY (from the filesystem,
/// after the mount point check) for any other directory.
pub fn pinned(path: &Path) -> Finding {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Finding::fail("cannot check: not a directory"),
        Err(e) => {
            return Finding::fail(format!(
                "cannot check: {} (a pinned directory must exist)",
                errno_name(io_errno(&e))
            ))
        }
    }
    let Some(parent) = path.parent() else {
        return Finding::fail("cannot check: no parent directory");
    };
    let scratch = scratch_name(parent).with_extension("pin");
    let inside = scratch.join("keep");
    if let Err(e) = fs::create_dir(&scratch).and_then(|()| fs::create_dir(&inside)) {
        let _ = fs::remove_dir(&scratch);
        return match io_errno(&e) {
            // Its folder is read-only: no rename there at all.
            Errno::EROFS => Finding::pass("refused: EROFS (its folder is read-only)"),
            errno => Finding::fail(format!("cannot check: {}", errno_name(errno))),
        };
    }
    let r = fs::rename(path, &scratch);
    if r.is_ok() {
        // Not possible onto a non-empty directory; put it back if it happened.
        let _ = fs::rename(&scratch, path);
    }
    let _ = fs::remove_dir(&inside);
    let _ = fs::remove_dir(&scratch);
    match r {
        Err(e) if io_errno(&e) == Errno::EBUSY => Finding::pass("refused: EBUSY"),
        Err(e) if matches!(io_errno(&e), Errno::ENOTEMPTY | Errno::EEXIST) => {
            Finding::fail("renamable: not a mount point of its own (refused only for its non-empty target)")
        }
        Err(e) => Finding::fail(format!("refused: {}", errno_name(io_errno(&e)))),
        Ok(()) => Finding::fail("renamed (and put back)"),
    }
}

fn try_connect(addr: &UnixAddr) -> Finding {
    let sock = match socket(AddressFamily::Unix, SockType::Stream, SockFlag::SOCK_CLOEXEC, None) {
        Ok(s) => s,
        Err(e) => return Finding::fail(format!("cannot check: socket(AF_UNIX): {}", errno_name(e))),
    };
    match connect(sock.as_raw_fd(), addr) {
        Ok(()) => Finding::fail("connected"),
        Err(e) => Finding::pass(format!("refused: {}", errno_name(e))),
    }
}

/// The home the policy empties: a directory holding only what the policy
/// binds back (the host's own files would show as other names).
pub fn empty_home(path: &Path, kept: &[String]) -> Finding {
    let entries = match fs::read_dir(path) {
        Ok(e) => e,
        Err(e) => return Finding::fail(format!("not listable: {}", errno_name(io_errno(&e)))),
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let (bound, other): (Vec<String>, Vec<String>) = names.into_iter().partition(|n| kept.contains(n));
    if !other.is_empty() {
        let shown: Vec<&str> = other.iter().take(5).map(String::as_str).collect();
        return Finding::fail(format!("{} entries not bound back: {}", other.len(), shown.join(", ")));
    }
    if bound.is_empty() {
        Finding::pass("empty")
    } else {
        Finding::pass(format!("only {}", bound.join(", ")))
    }
}

pub fn unix_socket(path: &Path) -> Finding {
    match UnixAddr::new(path) {
        Ok(addr) => try_connect(&addr),
        Err(e) => Finding::fail(format!("cannot check: {}", errno_name(e))),
    }
}

pub fn abstract_socket(name: &str) -> Finding {
    match UnixAddr::new_abstract(name.as_bytes()) {
        Ok(addr) => try_connect(&addr),
        Err(e) => Finding::fail(format!("cannot check: {}", errno_name(e))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_home_holds_only_what_is_bound_back() {
        let d = tempfile::tempdir().unwrap();
        let kept = [".cargo".to_owned()];
        assert_eq!(empty_home(d.path(), &kept).observed, "empty");
        fs::create_dir(d.path().join(".cargo")).unwrap();
        let f = empty_home(d.path(), &kept);
        assert_eq!((f.pass, f.observed.as_str()), (Some(true), "only .cargo"));
        fs::write(d.path().join(".bashrc"), b"").unwrap();
        let f = empty_home(d.path(), &kept);
        assert_eq!(f.pass, Some(false), "{}", f.observed);
        assert!(f.observed.contains(".bashrc"));
        assert_eq!(empty_home(&d.path().join("none"), &kept).pass, Some(false));
    }

    #[test]
    fn hidden_means_absent_or_empty() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(hidden(&d.path().join("nope")).pass, Some(true));
        assert_eq!(hidden(d.path()).observed, "empty directory");
        fs::write(d.path().join("empty"), b"").unwrap();
        assert_eq!(hidden(&d.path().join("empty")).pass, Some(true));
        fs::write(d.path().join("key"), b"SECRET").unwrap();
        let f = hidden(&d.path().join("key"));
        assert_eq!(f.pass, Some(false));
        assert!(!f.observed.contains("SECRET"), "contents are never shown");
        assert_eq!(hidden(d.path()).pass, Some(false));
        assert_eq!(hidden(Path::new("/dev/null")).pass, Some(true));
    }

    #[test]
    fn read_only_needs_an_existing_path_and_the_right_errno() {
        let d = tempfile::tempdir().unwrap();
        let erofs = Errnos::of(&[Errno::EROFS]);
        let f = read_only(&d.path().join("nope"), &erofs);
        assert_eq!(f.pass, Some(false), "{f:?}");
        let f = read_only(d.path(), &erofs);
        assert_eq!(f.pass, Some(false), "{f:?}");
        assert_eq!(
            fs::read_dir(d.path()).unwrap().count(),
            0,
            "the scratch file is removed"
        );
        fs::write(d.path().join("config"), b"x").unwrap();
        assert_eq!(read_only(&d.path().join("config"), &erofs).pass, Some(false));
        assert_eq!(fs::read(d.path().join("config")).unwrap(), b"x", "nothing written");
    }

    #[test]
    fn writable_leaves_nothing_behind() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(writable(d.path()).pass, Some(true));
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 0);
        assert_eq!(writable(&d.path().join("nope")).pass, Some(false));
    }

    #[test]
    fn a_directory_that_is_no_mount_point_is_not_pinned() {
        let d = tempfile::tempdir().unwrap();
        let git = d.path().join(".git");
        fs::create_dir(&git).unwrap();
        fs::write(git.join("config"), b"x").unwrap();
        let f = pinned(&git);
        assert_eq!(f.pass, Some(false), "{f:?}");
        assert!(f.observed.starts_with("renamable"), "{f:?}");
        assert_eq!(fs::read(git.join("config")).unwrap(), b"x", "left in place");
        assert_eq!(
            fs::read_dir(d.path()).unwrap().count(),
            1,
            "the scratch directory is removed"
        );
        assert_eq!(pinned(&d.path().join("none")).pass, Some(false));
        assert_eq!(pinned(&git.join("config")).pass, Some(false));
    }

    #[test]
    fn a_listening_socket_is_reachable() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("s.sock");
        let _l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        assert_eq!(unix_socket(&path).pass, Some(false));
        assert_eq!(unix_socket(&d.path().join("none.sock")).pass, Some(true));
        let name = format!("claude-shim-unit-{}", std::process::id());
        let addr =
            <std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(name.as_bytes())
                .unwrap();
        let _a = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
        assert_eq!(abstract_socket(&name).pass, Some(false));
        assert_eq!(abstract_socket("claude-shim-nobody-listens").pass, Some(true));
    }
}
