//! Reading input files (config.json, process.json, policies, seccomp
//! profiles) with a size bound and only from regular files: a path such as
//! /dev/zero or a FIFO would otherwise make `read` grow memory forever or
//! block forever (issue 11: `seccomp.profile = "/dev/zero"`).

use std::fs::File;
use std::io::{Error, ErrorKind, Read, Result};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// A config.json or a process.json: engines write a few hundred KiB at most.
pub const SPEC_LIMIT: u64 = 16 << 20;
/// A policy file.
pub const POLICY_LIMIT: u64 = 1 << 20;
/// A seccomp profile (Docker's default is about 20 KiB).
pub const PROFILE_LIMIT: u64 = 4 << 20;

/// The whole content of the regular file at `path` (symlinks followed), or an
/// error when it is anything else or holds more than `limit` bytes.
pub fn read(path: &Path, limit: u64) -> Result<Vec<u8>> {
    // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(Error::new(ErrorKind::InvalidInput, "it is not a regular file"));
    }
    if meta.len() > limit {
        return Err(too_large(limit));
    }
    let mut out = Vec::with_capacity(meta.len() as usize);
    // The file may grow while it is read: read one byte past the limit to tell.
    File::take(file, limit + 1).read_to_end(&mut out)?;
    if out.len() as u64 > limit {
        return Err(too_large(limit));
    }
    Ok(out)
}

/// Like `read`, as UTF-8 text.
pub fn read_to_string(path: &Path, limit: u64) -> Result<String> {
    String::from_utf8(read(path, limit)?).map_err(|_| Error::new(ErrorKind::InvalidData, "it is not UTF-8 text"))
}

fn too_large(limit: u64) -> Error {
    Error::new(
        ErrorKind::InvalidInput,
        format!(
            "it is larger than {} KiB, more than such a file ever needs",
            limit >> 10
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_devices_fifos_and_directories_without_blocking() {
        let err = read(Path::new("/dev/zero"), 1024).unwrap_err();
        assert_eq!(err.to_string(), "it is not a regular file");
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert_eq!(read(&fifo, 1024).unwrap_err().to_string(), "it is not a regular file");
        assert_eq!(
            read(dir.path(), 1024).unwrap_err().to_string(),
            "it is not a regular file"
        );
    }

    #[test]
    fn reads_regular_files_up_to_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"12345").unwrap();
        assert_eq!(read(&f, 5).unwrap(), b"12345");
        let err = read(&f, 4).unwrap_err().to_string();
        assert!(err.contains("larger than"), "{err}");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&f, &link).unwrap();
        assert_eq!(read_to_string(&link, 5).unwrap(), "12345");
    }
}
