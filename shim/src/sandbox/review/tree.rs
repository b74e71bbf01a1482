//! The project of a review run as `host_run::classify` reads it (`Tree`):
//! as the host has it now (`Host`), or as the sandbox left it, its layer
//! over the project (`Merged`). Every lookup goes one name at a time
//! through directory descriptors, following no link: the layer is the
//! sandbox's, and so may be what the project holds by now.

use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

use claude_shim_bundle::host_run::Tree;
use claude_shim_bundle::PathKind;

use super::fds::{self, Side, Type};
use super::layer;
use crate::hostfs::{Dir, Kind};

/// The project as the host has it.
pub struct Host<'a> {
    pub project: &'a Dir,
    pub root: &'a Path,
}

impl Tree for Host<'_> {
    fn kind(&self, rel: &Path) -> Option<PathKind> {
        Some(match self.project.stat(rel).ok()??.kind {
            Kind::Dir => PathKind::Dir,
            Kind::File => PathKind::File,
            Kind::Link => PathKind::Symlink(self.project.read_link(rel).ok()??),
            Kind::Other => PathKind::Other,
        })
    }

    fn read(&self, rel: &Path, limit: usize) -> Option<Vec<u8>> {
        if self.kind(rel)? != PathKind::File {
            return None;
        }
        self.project.read(rel, limit as u64).ok()
    }

    fn root(&self) -> Option<&Path> {
        Some(self.root)
    }

    fn list(&self, rel: &Path) -> Option<Vec<String>> {
        let names = self.project.list(rel).ok()?;
        Some(names.into_iter().filter_map(|(n, _)| n.into_string().ok()).collect())
    }
}

/// The names in the folder `rel` below `dir`, each folder on the way
/// opened without following a link; None when there is none.
fn names_below(dir: BorrowedFd<'_>, rel: &Path, side: Side) -> Option<Vec<std::ffi::OsString>> {
    let mut cur = dir.try_clone_to_owned().ok()?;
    for name in rel.iter() {
        cur = fds::open_dir(side, cur.as_fd(), name).ok()?;
    }
    fds::names(cur.as_fd()).ok()
}

/// The project as the sandbox saw it at the end of its run: the layer
/// `upper` over the project `host`.
pub struct Merged<'a> {
    pub upper: BorrowedFd<'a>,
    pub host: BorrowedFd<'a>,
    pub root: &'a Path,
}

impl Tree for Merged<'_> {
    fn kind(&self, rel: &Path) -> Option<PathKind> {
        let (m, target) = layer::merged_kind(self.upper, self.host, rel).ok()??;
        Some(match m {
            Type::Dir => PathKind::Dir,
            Type::File => PathKind::File,
            Type::Link => PathKind::Symlink(target.unwrap_or_else(PathBuf::new)),
            _ => PathKind::Other,
        })
    }

    fn read(&self, rel: &Path, limit: usize) -> Option<Vec<u8>> {
        layer::merged_read(self.upper, self.host, rel, limit as u64).ok()?
    }

    fn root(&self) -> Option<&Path> {
        Some(self.root)
    }

    /// The names either side holds at `rel` that the merged view shows
    /// (no whiteout or opaque folder of the layer hides them).
    fn list(&self, rel: &Path) -> Option<Vec<String>> {
        if self.kind(rel)? != PathKind::Dir {
            return None;
        }
        let mut names: std::collections::BTreeSet<std::ffi::OsString> = std::collections::BTreeSet::new();
        names.extend(names_below(self.upper, rel, Side::Layer).unwrap_or_default());
        names.extend(names_below(self.host, rel, Side::Project).unwrap_or_default());
        Some(
            names
                .into_iter()
                .filter(|n| self.kind(&rel.join(n)).is_some())
                .filter_map(|n| n.into_string().ok())
                .collect(),
        )
    }
}
