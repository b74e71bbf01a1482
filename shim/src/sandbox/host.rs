//! The machine as the policy compiler sees it: `HostView` over std::fs. The
//! bundle crate makes no system calls; this is where its questions are answered.

use std::cell::RefCell;
use std::ffi::OsString;
use std::fs::Metadata;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use claude_shim_bundle::{HostView, Owner, PathKind};

use super::env_index::{Found, Walk};

pub struct StdHost {
    /// Where `find` keeps its index of the tree (the runtime's state
    /// directory); None walks the whole tree each time.
    pub index_dir: Option<PathBuf>,
    /// The last walk and its root: a compile's bounded search and its
    /// complete one (`find_all`) are one walk.
    walked: RefCell<Option<(PathBuf, Rc<Walk>)>>,
}

impl StdHost {
    pub fn new(index_dir: Option<PathBuf>) -> StdHost {
        StdHost {
            index_dir,
            walked: RefCell::new(None),
        }
    }

    /// The walk of `root` for the compiler's one search (`.env` files and
    /// the host-run names), made once per `StdHost`.
    pub fn walk(&self, root: &Path, matches: &dyn Fn(&str) -> bool) -> std::io::Result<Rc<Walk>> {
        if let Some((r, w)) = &*self.walked.borrow() {
            if r == root {
                return Ok(w.clone());
            }
        }
        let t = std::time::Instant::now();
        let w = Rc::new(super::env_index::walk(
            root,
            &claude_shim_bundle::host_run::search_key(),
            matches,
            self.index_dir.as_deref(),
        )?);
        tracing::debug!(
            "searched {} for .env files and tool settings in {} us",
            root.display(),
            t.elapsed().as_micros()
        );
        *self.walked.borrow_mut() = Some((root.to_path_buf(), w.clone()));
        Ok(w)
    }

    /// Drops the walk kept: the next one reads the tree again (through the
    /// index).
    pub fn forget(&self) {
        self.walked.borrow_mut().take();
    }

    /// What a hit is, as the compiler sees it.
    fn kinds(&self, found: impl Iterator<Item = (PathBuf, Found)>) -> Vec<(PathBuf, PathKind)> {
        found
            .filter_map(|(path, kind)| {
                let kind = match kind {
                    Found::File => PathKind::File,
                    Found::Dir => PathKind::Dir,
                    // Rare: read its target now (gone since: nothing to cover).
                    Found::Symlink => self.kind(&path)?,
                };
                Some((path, kind))
            })
            .collect()
    }
}

fn kind_of(m: &Metadata, path: &Path) -> PathKind {
    let t = m.file_type();
    if t.is_symlink() {
        PathKind::Symlink(std::fs::read_link(path).unwrap_or_default())
    } else if t.is_dir() {
        PathKind::Dir
    } else if t.is_file() {
        PathKind::File
    } else {
        PathKind::Other
    }
}

impl HostView for StdHost {
    fn kind(&self, path: &Path) -> Option<PathKind> {
        std::fs::symlink_metadata(path).ok().map(|m| kind_of(&m, path))
    }

    fn read_dir(&self, path: &Path) -> std::io::Result<Vec<(OsString, PathKind)>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(path)? {
            let e = e?;
            let m = std::fs::symlink_metadata(e.path())?;
            out.push((e.file_name(), kind_of(&m, &e.path())));
        }
        Ok(out)
    }

    fn find(
        &self,
        root: &Path,
        matches: &dyn Fn(&str) -> bool,
        max_depth: usize,
        max_entries: usize,
    ) -> std::io::Result<Vec<(PathBuf, PathKind)>> {
        // The compiler's one search: .env files and the host-run names.
        let walk = self.walk(root, matches)?;
        Ok(self.kinds(walk.bounded(max_depth, max_entries).into_iter()))
    }

    fn find_all(&self, root: &Path, matches: &dyn Fn(&str) -> bool) -> std::io::Result<Vec<(PathBuf, PathKind)>> {
        let walk = self.walk(root, matches)?;
        Ok(self.kinds(walk.hits.iter().map(|h| (h.path.clone(), h.kind))))
    }

    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        crate::bounded::read(path, crate::bounded::PROFILE_LIMIT)
    }

    fn unix_sockets(&self) -> std::io::Result<Vec<PathBuf>> {
        let t = std::time::Instant::now();
        let found = super::sockets::census().map_err(|e| std::io::Error::other(format!("{e:#}")));
        tracing::debug!("socket census in {} us", t.elapsed().as_micros());
        found
    }

    fn owner(&self, path: &Path) -> Option<Owner> {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(path).ok().map(|m| Owner {
            uid: m.uid(),
            gid: m.gid(),
            mode: m.mode() & 0o7777,
        })
    }

    fn root_only(
        &self,
        root: &Path,
        max_depth: usize,
        max_entries: usize,
        skip: &dyn Fn(&str) -> bool,
    ) -> std::io::Result<Vec<PathBuf>> {
        let t = std::time::Instant::now();
        let found = super::root_only::find(root, max_depth, max_entries, skip, self.index_dir.as_deref());
        tracing::debug!(
            "searched {} for root-only files in {} us",
            root.display(),
            t.elapsed().as_micros()
        );
        found
    }
}
