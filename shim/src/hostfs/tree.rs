//! A directory handle as the host-run rules' view of a tree
//! (`claude_shim_bundle::host_run::Tree`): lstat, bounded reads and
//! listings below it, none following a link, for the quarantine's search
//! of what a run left.

use std::path::{Path, PathBuf};

use claude_shim_bundle::host_run::Tree;
use claude_shim_bundle::PathKind;

use super::{Dir, Kind};

impl Tree for Dir {
    fn kind(&self, rel: &Path) -> Option<PathKind> {
        let st = self.stat(rel).ok()??;
        Some(match st.kind {
            Kind::Dir => PathKind::Dir,
            Kind::File => PathKind::File,
            // The target is not read: nothing here follows it.
            Kind::Link => PathKind::Symlink(PathBuf::new()),
            Kind::Other => PathKind::Other,
        })
    }

    fn read(&self, rel: &Path, limit: usize) -> Option<Vec<u8>> {
        Dir::read(self, rel, limit as u64).ok()
    }

    fn root(&self) -> Option<&Path> {
        Some(self.path())
    }

    fn list(&self, rel: &Path) -> Option<Vec<String>> {
        let entries = Dir::list(self, rel).ok()?;
        Some(entries.into_iter().filter_map(|(n, _)| n.into_string().ok()).collect())
    }
}
