//! The read-only view of a project's tree that the host-run rules ask
//! (`Tree`): lstat, bounded reads and listings, relative to the project's
//! top, so the same rules answer for the host's tree (`Rooted`, over the
//! compiler's `HostView`; the binary's directory handles) and an overlay's
//! merged view.

use std::path::Path;

use crate::compile::{HostView, PathKind};

/// A read-only view of a project's tree. Paths are relative to its top,
/// made of normal components only.
pub trait Tree {
    /// lstat: what is at `rel`, never following a link; None when nothing
    /// is there (or it cannot be reached).
    fn kind(&self, rel: &Path) -> Option<PathKind>;
    /// At most `limit` bytes of the regular file at `rel` (a link is not
    /// followed); None when it is not a regular file or cannot be read.
    fn read(&self, rel: &Path, limit: usize) -> Option<Vec<u8>>;
    /// The tree's absolute top, when it has one, so that an absolute path a
    /// config names can be placed in it.
    fn root(&self) -> Option<&Path> {
        None
    }
    /// The names in the directory `rel` (a link is not followed); None
    /// when it is not a directory or cannot be read.
    fn list(&self, rel: &Path) -> Option<Vec<String>>;
}

/// A `HostView` seen from one of its directories.
pub struct Rooted<'a> {
    pub host: &'a dyn HostView,
    pub root: &'a Path,
}

impl Tree for Rooted<'_> {
    fn kind(&self, rel: &Path) -> Option<PathKind> {
        self.host.kind(&self.root.join(rel))
    }

    fn read(&self, rel: &Path, limit: usize) -> Option<Vec<u8>> {
        let path = self.root.join(rel);
        if self.host.kind(&path) != Some(PathKind::File) {
            return None;
        }
        let mut raw = self.host.read(&path).ok()?;
        raw.truncate(limit);
        Some(raw)
    }

    fn root(&self) -> Option<&Path> {
        Some(self.root)
    }

    fn list(&self, rel: &Path) -> Option<Vec<String>> {
        let path = self.root.join(rel);
        if self.host.kind(&path) != Some(PathKind::Dir) {
            return None;
        }
        let entries = self.host.read_dir(&path).ok()?;
        Some(entries.into_iter().filter_map(|(n, _)| n.into_string().ok()).collect())
    }
}
