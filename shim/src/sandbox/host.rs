//! The machine as the policy compiler sees it: `HostView` over std::fs. The
//! bundle crate makes no system calls; this is where its questions are answered.

use std::ffi::OsString;
use std::fs::Metadata;
use std::path::{Path, PathBuf};

use claude_shim_bundle::{HostView, Owner, PathKind};

use super::env_index::Found;

pub struct StdHost {
    /// Where `find` keeps its index of the tree (the runtime's state
    /// directory); None walks the whole tree each time.
    pub index_dir: Option<PathBuf>,
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
        let t = std::time::Instant::now();
        let found = super::env_index::find(
            root,
            "env-files+host-run",
            matches,
            max_depth,
            max_entries,
            self.index_dir.as_deref(),
        )?;
        tracing::debug!(
            "searched {} for .env files and tool settings in {} us",
            root.display(),
            t.elapsed().as_micros()
        );
        Ok(found
            .into_iter()
            .filter_map(|(path, kind)| {
                let kind = match kind {
                    Found::File => PathKind::File,
                    Found::Dir => PathKind::Dir,
                    // Rare: read its target now (gone since: nothing to cover).
                    Found::Symlink => self.kind(&path)?,
                };
                Some((path, kind))
            })
            .collect())
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
