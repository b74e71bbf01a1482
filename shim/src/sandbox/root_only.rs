//! The search behind `HostView::root_only`: what "others" may not read in a
//! host tree (/etc, /var/log, /proc...), which a sandbox running as uid 0
//! gets masked (bundle/src/compile/mounts/root_only.rs). A walk reads each
//! directory once and `fstatat`s each regular file and directory in it,
//! relative to the directory; links and special files are told apart by the
//! directory entry's type and never looked at.
//!
//! The walk costs about 1.3 ms for a small /etc, more on a big host, on every
//! start of a root sandbox; so its result is kept in an index, per tree, in
//! the runtime's state directory, as `sandbox/env_index.rs` keeps the .env
//! search's. A start then stats the directories of the index (relative to the
//! tree, one `statx` each) and reads again only those whose inode, ctime or
//! mtime changed: an entry created, removed or renamed changes its
//! directory's, and a directory's own chmod changes its own. What no stamp
//! shows is a chmod of a file in place: so the index is dropped and the tree
//! walked again once it is `MAX_AGE` old. A file made root-only by chmod may
//! stay readable to a root sandbox that long (it was readable to every local
//! user until then).
//!
//! When the tree was last walked whole is the index file's modification time
//! (set before the file is put in place). A walk that finds every record as
//! the old index had it only dates the file again: rewriting it cost a new
//! file and, on this ext4 `/run` mounted with `discard`, a synchronous
//! discard of the old one's blocks, for each of the trees, whenever a start
//! came a minute after the last walk.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use serde::{Deserialize, Serialize};

/// How long an index is trusted before the tree is walked again.
const MAX_AGE: Duration = Duration::from_secs(60);
/// Directories changed this shortly before they were read are read again
/// next time (a change in the same timestamp tick would not show).
const SETTLE: Duration = Duration::from_secs(2);
/// Where the index files are named from (gc keeps them).
pub const INDEX_PREFIX: &str = ".root-only-index-";

/// Regular files their owner or group may read and others may not (a
/// write-only file such as /proc/sysrq-trigger has nothing to hide), and
/// directories without o+r or o+x.
fn unreadable(is_dir: bool, mode: u32) -> bool {
    if is_dir {
        mode & 0o005 != 0o005
    } else {
        mode & 0o004 == 0 && mode & 0o440 != 0
    }
}

/// dev, inode, ctime and mtime (seconds, nanoseconds) as one array.
type Stamp = [i64; 6];

fn stamp(st: &rustix::fs::Stat) -> Stamp {
    // dev and ino are u64s kept bit for bit in an i64.
    [
        st.st_dev as i64,
        st.st_ino as i64,
        st.st_ctime,
        st.st_ctime_nsec as i64,
        st.st_mtime,
        st.st_mtime_nsec as i64,
    ]
}

fn settled(s: &Stamp, read_at: SystemTime) -> bool {
    let newest = (s[2], s[3]).max((s[4], s[5]));
    let changed = SystemTime::UNIX_EPOCH.checked_add(Duration::new(
        newest.0.max(0) as u64,
        newest.1.clamp(0, 999_999_999) as u32,
    ));
    changed.is_some_and(|c| c + SETTLE <= read_at)
}

/// One directory, as read.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct Record {
    #[serde(rename = "s")]
    stamp: Stamp,
    /// Entries looked at (the walk's bound counts them).
    #[serde(rename = "n")]
    looked_at: usize,
    /// Names of the root-only entries.
    #[serde(rename = "h", default, skip_serializing_if = "Vec::is_empty")]
    hidden: Vec<PathBuf>,
    /// Subdirectories others may enter.
    #[serde(rename = "d", default, skip_serializing_if = "Vec::is_empty")]
    dirs: Vec<PathBuf>,
}

#[derive(Serialize, Deserialize, Default)]
struct Index {
    /// The tree and depth the records were made for.
    key: String,
    /// Directories relative to the tree.
    dirs: HashMap<PathBuf, Record>,
}

fn index_path(dir: &Path, key: &str) -> PathBuf {
    use std::hash::Hasher;
    let mut h = fnv::FnvHasher::default();
    h.write(key.as_bytes());
    dir.join(format!("{INDEX_PREFIX}{:016x}.json", h.finish()))
}

/// The index at `path` if it is the caller's own and for `key`, with when
/// the tree was last walked whole (the file's modification time).
fn load(path: &Path, key: &str) -> Option<(Index, SystemTime)> {
    let (raw, made) = crate::replace::load_own_dated(path, 4 << 20, "root-only index")?;
    let index: Index = serde_json::from_slice(&raw).ok()?;
    (index.key == key).then_some((index, made))
}

/// Whether a walk made at `made` is still trusted at `now` (one dated in
/// the future is not: the clock went back).
fn young(made: SystemTime, now: SystemTime) -> bool {
    now.duration_since(made).is_ok_and(|age| age < MAX_AGE)
}

/// Reads one directory: its root-only entries and the subdirectories to enter.
fn read(dir: &Path, stamp: Stamp, skip: &dyn Fn(&str) -> bool) -> io::Result<Record> {
    let mut r = Record {
        stamp,
        looked_at: 0,
        hidden: Vec::new(),
        dirs: Vec::new(),
    };
    for e in fs::read_dir(dir)? {
        let e = e?;
        r.looked_at += 1;
        let ft = e.file_type()?;
        let name = e.file_name();
        if !(ft.is_file() || ft.is_dir()) || name.to_str().is_some_and(skip) {
            continue;
        }
        // fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW).
        let meta = match e.metadata() {
            Ok(m) => m,
            Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
            Err(err) => return Err(err),
        };
        if unreadable(meta.is_dir(), meta.permissions().mode()) {
            r.hidden.push(PathBuf::from(name));
        } else if meta.is_dir() {
            r.dirs.push(PathBuf::from(name));
        }
    }
    Ok(r)
}

/// See `HostView::root_only`; with `index_dir`, through the index kept there.
/// `skip` must be the same for every search of one `root` (the index does not
/// know it).
pub fn find(
    root: &Path,
    max_depth: usize,
    max_entries: usize,
    skip: &dyn Fn(&str) -> bool,
    index_dir: Option<&Path>,
) -> io::Result<Vec<PathBuf>> {
    find_at(root, max_depth, max_entries, skip, index_dir, SystemTime::now())
}

fn find_at(
    root: &Path,
    max_depth: usize,
    max_entries: usize,
    skip: &dyn Fn(&str) -> bool,
    index_dir: Option<&Path>,
    now: SystemTime,
) -> io::Result<Vec<PathBuf>> {
    // v2: write-only files are not root-only; v3: dated by the file's mtime.
    let key = format!("v3\n{max_depth}\n{}", root.display());
    let path = index_dir.map(|d| index_path(d, &key));
    // A young index is used; an old one only tells whether the whole walk
    // below found anything new.
    let (mut old, made, stale) = match path.as_deref().and_then(|p| load(p, &key)) {
        Some((index, made)) if young(made, now) => (Some(index), made, None),
        Some((index, _)) => (None, now, Some(index)),
        None => (None, now, None),
    };
    let mut new = Index {
        key: key.clone(),
        dirs: HashMap::new(),
    };
    let mut changed = old.is_none();
    let root_fd = rustix::fs::open(root, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    let mut out = Vec::new();
    let mut seen = 0usize;
    let mut stack = vec![(PathBuf::new(), 0usize)];
    while let Some((rel, depth)) = stack.pop() {
        let at = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel.as_path()
        };
        let Ok(st) = rustix::fs::statat(&root_fd, at, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            continue;
        }
        // A directory its parent's record says to enter, made root-only since.
        if depth > 0 && unreadable(true, st.st_mode) {
            out.push(root.join(&rel));
            changed = true;
            continue;
        }
        let s = stamp(&st);
        // Taken out of the old index, not copied: each directory is visited once.
        let kept = old.as_mut().and_then(|o| o.dirs.remove(&rel)).filter(|r| r.stamp == s);
        let reused = kept.is_some();
        let record = match kept {
            Some(r) => r,
            None => match read(&root.join(&rel), s, skip) {
                Ok(r) => r,
                // Gone meanwhile, or not a directory any more.
                Err(e) if depth > 0 && matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => continue,
                Err(e) => return Err(e),
            },
        };
        seen += record.looked_at;
        if seen > max_entries {
            return Err(io::Error::other(format!("more than {max_entries} entries")));
        }
        out.extend(record.hidden.iter().map(|h| root.join(&rel).join(h)));
        if depth + 1 < max_depth {
            stack.extend(record.dirs.iter().map(|d| (rel.join(d), depth + 1)));
        }
        changed |= !reused;
        if settled(&record.stamp, now) {
            new.dirs.insert(rel, record);
        }
    }
    if let (Some(p), true) = (&path, changed) {
        // A young index's date stays: its untouched records were not checked again.
        let r = match stale {
            Some(s) if s.dirs == new.dirs => crate::replace::redate(p, made),
            _ => crate::replace::store_json_dated(p, &new, Some(made)),
        };
        if let Err(e) = r {
            tracing::debug!("store root-only index {}: {e}", p.display());
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn mode(p: &Path, m: u32) {
        fs::set_permissions(p, fs::Permissions::from_mode(m)).unwrap();
    }

    fn tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        for d in ["a/b/c", "closed/inner", "listable", "proc/1"] {
            fs::create_dir_all(r.join(d)).unwrap();
        }
        for f in [
            "open",
            "secret",
            "a/b/deep",
            "a/b/c/too-deep",
            "closed/inner/x",
            "proc/1/environ",
            "trigger",
        ] {
            fs::write(r.join(f), "x").unwrap();
        }
        // Write-only: nothing in it to read.
        mode(&r.join("trigger"), 0o200);
        mode(&r.join("secret"), 0o640);
        mode(&r.join("a/b/deep"), 0o600);
        mode(&r.join("a/b/c/too-deep"), 0o600);
        mode(&r.join("closed/inner/x"), 0o600);
        mode(&r.join("closed"), 0o700);
        mode(&r.join("listable"), 0o711);
        mode(&r.join("proc/1/environ"), 0o400);
        // A link to a root-only file is not one: its target is looked at where it lies.
        symlink(r.join("secret"), r.join("link")).unwrap();
        t
    }

    fn rel(v: Vec<PathBuf>, r: &Path) -> Vec<String> {
        v.iter()
            .map(|p| p.strip_prefix(r).unwrap().display().to_string())
            .collect()
    }

    #[test]
    fn finds_what_others_cannot_read_without_entering_or_following() {
        let t = tree();
        let r = t.path();
        let got = find(r, 3, 100, &|n| n == "proc", None).unwrap();
        assert_eq!(rel(got, r), ["a/b/deep", "closed", "listable", "secret"]);
        assert!(find(r, 3, 5, &|_| false, None).is_err(), "more entries than allowed");
        assert!(find(&r.join("nowhere"), 3, 100, &|_| false, None).is_err());
    }

    #[test]
    fn the_index_sees_new_entries_and_directory_modes_and_ages() {
        let t = tree();
        let state = tempfile::tempdir().unwrap();
        let r = t.path();
        // Searched later than the settle time after every change.
        let now = SystemTime::now() + Duration::from_secs(10);
        let search = |at: SystemTime| rel(find_at(r, 3, 100, &|n| n == "proc", Some(state.path()), at).unwrap(), r);
        let want = ["a/b/deep", "closed", "listable", "secret"];
        assert_eq!(search(now), want);
        let index = fs::read_dir(state.path()).unwrap().next().unwrap().unwrap().path();
        assert!(index.file_name().unwrap().to_str().unwrap().starts_with(INDEX_PREFIX));
        let held: Index = serde_json::from_slice(&fs::read(&index).unwrap()).unwrap();
        assert_eq!(held.dirs.len(), 3, "{:?}", held.dirs.keys());
        assert_eq!(search(now), want, "from the index");

        // A new root-only file: its directory's stamp changed.
        fs::write(r.join("a/new-key"), "k").unwrap();
        mode(&r.join("a/new-key"), 0o600);
        assert_eq!(search(now), ["a/b/deep", "a/new-key", "closed", "listable", "secret"]);
        // A directory closed in place: its own stamp changed.
        mode(&r.join("a/b"), 0o700);
        assert_eq!(search(now), ["a/b", "a/new-key", "closed", "listable", "secret"]);
        // A file closed in place shows only once the index is too old.
        mode(&r.join("open"), 0o600);
        assert!(!search(now).contains(&"open".to_owned()));
        assert!(search(now + MAX_AGE).contains(&"open".to_owned()));

        // A whole walk that finds the records as they were dates the file
        // again instead of writing a new one.
        use std::os::unix::fs::MetadataExt;
        mode(&r.join("open"), 0o644);
        let reopened = search(now + MAX_AGE * 2);
        assert!(!reopened.contains(&"open".to_owned()));
        let written = fs::metadata(&index).unwrap();
        let later = now + MAX_AGE * 3;
        assert_eq!(search(later), reopened);
        let dated = fs::metadata(&index).unwrap();
        assert_eq!(dated.ino(), written.ino(), "the index was rewritten");
        assert_eq!(dated.modified().unwrap(), later);
        // A partial update keeps the date of the last whole walk.
        fs::write(r.join("a/newer"), "k").unwrap();
        search(later + Duration::from_secs(1));
        let partial = fs::metadata(&index).unwrap();
        assert_ne!(partial.ino(), written.ino(), "a changed record is written");
        assert_eq!(partial.modified().unwrap(), later);

        // An index someone else could have written is not read.
        mode(&index, 0o666);
        assert!(load(&index, &held.key).is_none());
    }
}
