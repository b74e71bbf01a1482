//! Putting a freshly written file in place of an old one, atomically.
//!
//! A plain rename over an existing file is atomic too, but on ext4 (where
//! /run lives when systemd does not mount a tmpfs there) it forces the new
//! file's blocks to be allocated (auto_da_alloc) and frees the old file's,
//! which a `discard` mount turns into a synchronous discard: about 0.15 ms
//! per state write, a dozen times per sandbox. Exchanging the two names
//! (RENAME_EXCHANGE) and unlinking the old file does neither for files that
//! live shorter than the writeback delay, and readers still only ever see a
//! whole file at `path`.

// One implementation, beside libcontainer's own state.json (vendor/README.md).
pub use libcontainer::utils::replace_file as replace;

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

/// The bytes of a cache file `store_json` wrote, if it is still the
/// caller's own: a regular file reached without a link, owned by this
/// user, writable by no one else, at most `limit` bytes. Anything else is
/// ignored (the cache is made again), with `what` in the debug log.
pub fn load_own(path: &Path, limit: u64, what: &str) -> Option<Vec<u8>> {
    load_own_dated(path, limit, what).map(|(raw, _)| raw)
}

/// `load_own`, with the file's modification time (which `store_json_dated`
/// sets), read from the same open file as the bytes.
pub fn load_own_dated(path: &Path, limit: u64, what: &str) -> Option<(Vec<u8>, std::time::SystemTime)> {
    use std::io::Read as _;
    use std::os::unix::fs::MetadataExt as _;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    let m = f.metadata().ok()?;
    if !m.is_file() || m.uid() != nix::unistd::geteuid().as_raw() || m.mode() & 0o022 != 0 || m.len() > limit {
        tracing::debug!("ignore {what} {}: not the caller's own", path.display());
        return None;
    }
    // Read whole, then parsed: serde_json parses a slice several times
    // faster than a reader.
    let mut raw = Vec::with_capacity(m.len() as usize);
    (&f).read_to_end(&mut raw).ok()?;
    Some((raw, m.modified().ok()?))
}

/// `value` as JSON at `path` (a cache of claude-shim's own, mode 0600): written
/// to a new file beside it, never through a link, then put in place; a
/// failed write leaves no temporary file.
pub fn store_json(path: &Path, value: &impl serde::Serialize) -> std::io::Result<()> {
    store_json_dated(path, value, None)
}

/// `store_json`, the file put in place already bearing `modified` as its
/// modification time when given (a reader never sees it with another).
pub fn store_json_dated(
    path: &Path,
    value: &impl serde::Serialize,
    modified: Option<std::time::SystemTime>,
) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)?;
    let data = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    let r = f
        .write_all(&data)
        .and_then(|()| modified.map_or(Ok(()), |t| f.set_modified(t)))
        .and_then(|()| replace(&tmp, path));
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// Sets the modification time of a cache file of the caller's own, never
/// through a link: a cache found still right is dated again, not rewritten.
pub fn redate(path: &Path, modified: std::time::SystemTime) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?
        .set_modified(modified)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_and_creates() {
        let d = tempfile::tempdir().unwrap();
        let (tmp, path) = (d.path().join("f.tmp"), d.path().join("f"));
        std::fs::write(&tmp, "one").unwrap();
        replace(&tmp, &path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one");
        assert!(!tmp.exists());
        std::fs::write(&tmp, "two").unwrap();
        replace(&tmp, &path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        assert!(!tmp.exists(), "the old file is gone");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_missing_tmp_is_an_error_and_leaves_the_file() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("f");
        std::fs::write(&path, "kept").unwrap();
        assert!(replace(&d.path().join("absent"), &path).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "kept");
    }
}
