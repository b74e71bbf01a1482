//! The start's one search of the working directory (`.env` files for
//! `hide_env_files`, and the host-run entries: those the compiler protects
//! at start, and the picture the exit's search compares against) without
//! reading the whole tree on every start: an index of the working
//! directory's directories, each with the names it holds that the search
//! wants and its subdirectories, valid while the directory's inode, ctime
//! and mtime are unchanged. A start then costs one stat per directory
//! instead of reading every directory (in a 150k-file tree, 0.2 s per command).
//!
//! The walk is complete (issue 35): every depth, `node_modules` and `target`
//! included, so that an entry the exit finds there is told apart from one
//! that was there at start; only a repository's own directory (`.git`,
//! `.hg`) is not entered, its insides being the git pass's. The compiler's
//! bounded view of it (8 levels, not those folders) is `Walk::bounded`.
//! A directory visited twice (a bind mount of an ancestor) is not entered
//! again, and one that cannot be read is named (`Walk::blind`), never
//! passed over in silence.
//!
//! Trade-offs, written down:
//! - It is O(directories), not O(1): each directory is still stat'ed, since a
//!   `.env` (or a `.claude`) created anywhere must be covered on the next
//!   start. Files are not.
//! - A directory's entries cannot change without changing its ctime, which no
//!   program can set back (unlike mtime, which `touch -d` can), so a record is
//!   stale only if the ctime is. Timestamps come from a coarse clock, so a
//!   directory changed less than `SETTLE` before it was read is read again on
//!   the next start rather than trusted (git's "racily clean" entries).
//! - The index lives in the runtime's state directory, owned by the caller
//!   and out of every sandbox's reach; an index file not owned by the caller,
//!   or writable by others, is ignored and the tree is walked.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

/// Changes younger than this when a directory was read are not trusted later.
const SETTLE: Duration = Duration::from_secs(2);

/// Directories the walk never enters: a repository's own files, which the
/// git pass reads by name.
fn not_entered(name: &OsStr) -> bool {
    matches!(name.as_bytes(), b".git" | b".hg")
}

/// Directories the compiler's bounded view leaves out (a package store, a
/// build tree): the walk enters them, `Walk::bounded` drops what lies there.
pub fn skipped(name: &OsStr) -> bool {
    not_entered(name) || matches!(name.as_bytes(), b"node_modules" | b"target")
}

/// What a name that matched is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    File,
    Dir,
    Symlink,
}

/// Stored as one array of six numbers, not an object with named fields: a
/// big tree's index holds one per directory, and its size is the cost of
/// every start (parsing 1,650 stamps as objects took longer than the stats).
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
#[serde(from = "[i64; 6]", into = "[i64; 6]")]
struct Stamp {
    dev: u64,
    ino: u64,
    ctime: (i64, i64),
    mtime: (i64, i64),
}

impl From<[i64; 6]> for Stamp {
    fn from(a: [i64; 6]) -> Self {
        // dev and ino are u64s kept bit for bit in an i64.
        Self {
            dev: a[0] as u64,
            ino: a[1] as u64,
            ctime: (a[2], a[3]),
            mtime: (a[4], a[5]),
        }
    }
}

impl From<Stamp> for [i64; 6] {
    fn from(s: Stamp) -> Self {
        [s.dev as i64, s.ino as i64, s.ctime.0, s.ctime.1, s.mtime.0, s.mtime.1]
    }
}

impl Stamp {
    fn of_stat(st: &rustix::fs::Stat) -> Self {
        Self {
            dev: st.st_dev,
            ino: st.st_ino,
            ctime: (st.st_ctime, st.st_ctime_nsec as i64),
            mtime: (st.st_mtime, st.st_mtime_nsec as i64),
        }
    }

    /// Whether the directory was last changed at least `settle` before `read_at`.
    fn settled(&self, read_at: SystemTime, settle: Duration) -> bool {
        let newest = self.ctime.max(self.mtime);
        let changed = SystemTime::UNIX_EPOCH.checked_add(Duration::new(
            newest.0.max(0) as u64,
            newest.1.clamp(0, 999_999_999) as u32,
        ));
        changed.is_some_and(|c| c + settle <= read_at)
    }
}

#[derive(Serialize, Deserialize, Clone, Debug)]
struct Record {
    // One-letter names in the file, for the same reason as Stamp's array.
    #[serde(rename = "s")]
    stamp: Stamp,
    /// Names of files that matched.
    #[serde(rename = "f", default, skip_serializing_if = "Vec::is_empty")]
    files: Vec<PathBuf>,
    /// Names of directories that matched (entered or not, as any other).
    #[serde(rename = "m", default, skip_serializing_if = "Vec::is_empty")]
    matched_dirs: Vec<PathBuf>,
    /// Names of symlinks that matched (never followed).
    #[serde(rename = "l", default, skip_serializing_if = "Vec::is_empty")]
    links: Vec<PathBuf>,
    /// Subdirectories (not symlinks), except a repository's own.
    #[serde(rename = "d", default, skip_serializing_if = "Vec::is_empty")]
    dirs: Vec<PathBuf>,
}

/// An index, as loaded (everything owned) or as about to be stored: the
/// records still valid are borrowed from the one loaded, so a start copies
/// no directory's lists; the ones read anew are owned.
#[derive(Serialize, Deserialize, Default)]
struct Index<'a> {
    /// What the records were made for: root, depth and the search's name.
    key: Cow<'a, str>,
    dirs: HashMap<PathBuf, Cow<'a, Record>>,
}

/// Where the index of `root` is kept, under `dir`.
fn index_path(dir: &Path, key: &str) -> PathBuf {
    use std::hash::Hasher;
    let mut h = fnv::FnvHasher::default();
    h.write(key.as_bytes());
    dir.join(format!(".env-index-{:016x}.json", h.finish()))
}

fn load(path: &Path, key: &str) -> Index<'static> {
    let read = || -> Option<Index<'static>> {
        // A big tree's index is a few hundred KiB.
        let raw = crate::replace::load_own(path, 64 << 20, ".env index")?;
        let index: Index<'static> = serde_json::from_slice(&raw).ok()?;
        (index.key == key).then_some(index)
    };
    read().unwrap_or_default()
}

/// Reads one directory: its matching entries and its subdirectories.
fn read(dir: &Path, stamp: Stamp, matches: &dyn Fn(&str) -> bool) -> Option<Record> {
    let entries = fs::read_dir(dir).ok()?;
    let mut r = Record {
        stamp,
        files: Vec::new(),
        matched_dirs: Vec::new(),
        links: Vec::new(),
        dirs: Vec::new(),
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Ok(t) = e.file_type() else { continue };
        let hit = || matches(&name.to_string_lossy());
        if t.is_dir() {
            if hit() {
                r.matched_dirs.push(PathBuf::from(&name));
            }
            if !not_entered(&name) {
                r.dirs.push(PathBuf::from(name));
            }
        } else if t.is_file() && hit() {
            r.files.push(PathBuf::from(name));
        } else if t.is_symlink() && hit() {
            r.links.push(PathBuf::from(name));
        }
    }
    Some(r)
}

/// One name the walk matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub path: PathBuf,
    pub kind: Found,
    /// How many folders below the root the one holding it is.
    pub depth: usize,
    /// Whether a folder on the way is one the bounded view leaves out.
    pub in_skipped: bool,
}

/// What the walk of a tree found.
#[derive(Debug, Default)]
pub struct Walk {
    pub hits: Vec<Hit>,
    /// Directories that could not be read (relative to the root): what lies
    /// in them was not looked at.
    pub blind: Vec<PathBuf>,
}

impl Walk {
    /// The compiler's bounded view: what lies at most `max_depth` levels down
    /// and not in a skipped folder, at most `max_entries` of it.
    pub fn bounded(&self, max_depth: usize, max_entries: usize) -> Vec<(PathBuf, Found)> {
        self.hits
            .iter()
            .filter(|h| h.depth < max_depth && !h.in_skipped)
            .take(max_entries)
            .map(|h| (h.path.clone(), h.kind))
            .collect()
    }
}

/// Entries under `root` whose name `matches` (files, directories and
/// symlinks), at any depth; with `index_dir`, through the index kept there.
/// `search` names the matcher (one index per kind of search).
pub fn walk(
    root: &Path,
    search: &str,
    matches: &dyn Fn(&str) -> bool,
    index_dir: Option<&Path>,
) -> std::io::Result<Walk> {
    walk_settled(root, search, matches, index_dir, SETTLE)
}

fn walk_settled(
    root: &Path,
    search: &str,
    matches: &dyn Fn(&str) -> bool,
    index_dir: Option<&Path>,
    settle: Duration,
) -> std::io::Result<Walk> {
    // v4: stamps (from stat) as arrays, one-letter field names, directories relative to the root.
    // v5: matching directories and symlinks too (the host-run names), .hg not entered.
    // v6: every depth, node_modules and target entered.
    let key = format!("v6\n{search}\n{}", root.display());
    let path = index_dir.map(|d| index_path(d, &key));
    let old = path.as_deref().map(|p| load(p, &key)).unwrap_or_default();
    let mut new = Index {
        key: Cow::Borrowed(&key),
        dirs: HashMap::new(),
    };
    let read_at = SystemTime::now();
    // Whether the stored index differs from what this search would store.
    let mut changed = false;
    let mut out = Walk::default();
    // A directory reached twice (a bind mount of one of its ancestors
    // below the root) is entered once.
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    // Each directory is stat'ed relative to the root, opened once: a path
    // from / would be walked again, component by component, for every one
    // of a big tree's directories.
    let root_fd = rustix::fs::open(
        root,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    // Directories relative to the root, which the key already names: the
    // index is shorter to store and parse, and no path is taken apart again.
    let mut stack = vec![(PathBuf::new(), 0usize, false)];
    while let Some((rel, depth, in_skipped)) = stack.pop() {
        let at = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel.as_path()
        };
        let Ok(st) = rustix::fs::statat(&root_fd, at, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::Directory {
            continue;
        }
        let stamp = Stamp::of_stat(&st);
        if !seen.insert((stamp.dev, stamp.ino)) {
            continue;
        }
        let kept = old.dirs.get(&rel).map(|r| r.as_ref());
        let record = match kept {
            Some(r) if r.stamp == stamp => Cow::Borrowed(r),
            _ => {
                let Some(r) = read(&root.join(&rel), stamp, matches) else {
                    out.blind.push(rel);
                    continue;
                };
                Cow::Owned(r)
            }
        };
        let hits = (record.files.iter().map(|f| (f, Found::File)))
            .chain(record.matched_dirs.iter().map(|d| (d, Found::Dir)))
            .chain(record.links.iter().map(|l| (l, Found::Symlink)));
        for (name, kind) in hits {
            out.hits.push(Hit {
                path: root.join(&rel).join(name),
                kind,
                depth,
                in_skipped,
            });
        }
        for d in &record.dirs {
            stack.push((rel.join(d), depth + 1, in_skipped || skipped(d.as_os_str())));
        }
        // A directory changed just before it was read may change again
        // within the same timestamp tick: keep it out, so it is read next
        // time. (The working directory itself is one such every run: the
        // sandbox's placeholders come and go in it.)
        if record.stamp.settled(read_at, settle) {
            changed |= kept.is_none_or(|k| k.stamp != record.stamp);
            new.dirs.insert(rel, record);
        } else {
            changed |= kept.is_some();
        }
    }
    changed |= new.dirs.len() != old.dirs.len();
    if let (Some(p), true) = (&path, changed) {
        if let Err(e) = crate::replace::store_json(p, &new) {
            tracing::debug!("store .env index {}: {e}", p.display());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_env(n: &str) -> bool {
        n == ".env" || n.starts_with(".env.")
    }

    fn names(v: Vec<(PathBuf, Found)>, root: &Path) -> Vec<String> {
        let mut v: Vec<String> = v
            .iter()
            .map(|(p, _)| p.strip_prefix(root).unwrap().display().to_string())
            .collect();
        v.sort();
        v
    }

    fn set_mtime_back(path: &Path) {
        let old = SystemTime::now() - Duration::from_secs(3600);
        fs::File::open(path).unwrap().set_modified(old).unwrap();
    }

    /// Waits out the timestamp tick, as the 2 s settle time does in use.
    fn tick() {
        std::thread::sleep(Duration::from_millis(30));
    }

    #[test]
    fn the_index_finds_what_a_walk_finds_and_sees_new_files() {
        let tree = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = tree.path();
        fs::create_dir_all(root.join("a/b")).unwrap();
        fs::create_dir_all(root.join("node_modules/x")).unwrap();
        fs::write(root.join("a/.env"), "").unwrap();
        fs::write(root.join("a/b/.env.local"), "").unwrap();
        fs::write(root.join("a/b/env"), "").unwrap();
        fs::write(root.join("node_modules/x/.env"), "").unwrap();
        tick();
        let search = |idx: Option<&Path>| {
            walk_settled(root, "env", &is_env, idx, Duration::from_millis(10))
                .unwrap()
                .bounded(8, 100)
        };
        let want = vec!["a/.env".to_owned(), "a/b/.env.local".to_owned()];
        assert_eq!(names(search(None), root), want);
        assert_eq!(names(search(Some(state.path())), root), want);
        // From the index now (it holds every directory, node_modules' too);
        // a file created since must still be found, even when the
        // directory's mtime is set back.
        let index = fs::read_dir(state.path()).unwrap().next().unwrap().unwrap().path();
        let held: Index<'static> = serde_json::from_slice(&fs::read(&index).unwrap()).unwrap();
        assert_eq!(held.dirs.len(), 5, "{:?}", held.dirs.keys());
        assert_eq!(names(search(Some(state.path())), root), want);
        tick();
        fs::write(root.join("a/b/.env.prod"), "").unwrap();
        set_mtime_back(&root.join("a/b"));
        tick();
        let found = names(search(Some(state.path())), root);
        assert!(found.contains(&"a/b/.env.prod".to_owned()), "{found:?}");
        assert_eq!(found.len(), 3);
    }

    #[test]
    fn directories_and_links_match_and_repositories_are_not_entered() {
        let tree = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = tree.path();
        for d in ["sub/.git/x", "sub/.claude", "a/.hg/store", "node_modules/p/.claude"] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        fs::write(root.join("sub/.git/x/.env"), "").unwrap();
        fs::write(root.join("sub/.claude/.env"), "").unwrap();
        fs::write(root.join("a/.hg/store/.env"), "").unwrap();
        fs::write(root.join("wt.git"), "").unwrap();
        std::os::unix::fs::symlink("sub/.claude", root.join("a/.vscode")).unwrap();
        std::os::unix::fs::symlink("nowhere", root.join("a/.env")).unwrap();
        let wanted = |n: &str| n == ".env" || n == ".git" || n == ".claude" || n == ".vscode" || n == ".hg";
        tick();
        for idx in [None, Some(state.path()), Some(state.path())] {
            let found = walk_settled(root, "t", &wanted, idx, Duration::from_millis(10))
                .unwrap()
                .bounded(8, 100);
            let mut kinds: Vec<(String, Found)> = found
                .into_iter()
                .map(|(p, k)| (p.strip_prefix(root).unwrap().display().to_string(), k))
                .collect();
            kinds.sort_by(|a, b| a.0.cmp(&b.0));
            assert_eq!(
                kinds,
                [
                    ("a/.env".to_owned(), Found::Symlink),
                    ("a/.hg".to_owned(), Found::Dir),
                    ("a/.vscode".to_owned(), Found::Symlink),
                    ("sub/.claude".to_owned(), Found::Dir),
                    ("sub/.claude/.env".to_owned(), Found::File),
                    ("sub/.git".to_owned(), Found::Dir),
                ]
            );
        }
    }

    #[test]
    fn an_index_for_another_root_is_not_used() {
        let state = tempfile::tempdir().unwrap();
        let one = tempfile::tempdir().unwrap();
        let two = tempfile::tempdir().unwrap();
        fs::write(two.path().join(".env"), "").unwrap();
        assert!(walk(one.path(), "env", &is_env, Some(state.path()))
            .unwrap()
            .hits
            .is_empty());
        assert_eq!(
            walk(two.path(), "env", &is_env, Some(state.path())).unwrap().hits.len(),
            1
        );
    }

    /// Issue 35: the walk is complete, deep folders and node_modules
    /// included; only the bounded view leaves them out.
    #[test]
    fn the_walk_goes_every_depth_and_into_package_stores() {
        let tree = tempfile::tempdir().unwrap();
        let root = tree.path();
        let deep = "a/b/c/d/e/f/g/h/i/j";
        for d in [deep, "node_modules/p/.claude", "target/debug/.vscode", "sub/.git/hooks"] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        fs::write(root.join(deep).join(".envrc"), "").unwrap();
        fs::write(root.join("sub/.git/hooks/.envrc"), "").unwrap();
        let wanted = |n: &str| matches!(n, ".envrc" | ".claude" | ".vscode" | ".git");
        let walk = walk(root, "t", &wanted, None).unwrap();
        let mut all: Vec<String> = walk
            .hits
            .iter()
            .map(|h| h.path.strip_prefix(root).unwrap().display().to_string())
            .collect();
        all.sort();
        assert_eq!(
            all,
            [
                "a/b/c/d/e/f/g/h/i/j/.envrc",
                "node_modules/p/.claude",
                "sub/.git",
                "target/debug/.vscode"
            ]
        );
        assert!(walk.blind.is_empty());
        let bounded = names(walk.bounded(8, 100), root);
        assert_eq!(bounded, ["sub/.git"]);
    }
}
