//! The machine as the policy compiler sees it: `HostView` over std::fs. The
//! bundle crate makes no system calls; this is where its questions are answered.

use std::ffi::OsString;
use std::fs::Metadata;
use std::path::{Path, PathBuf};

use claude_shim_bundle::{HostView, PathKind};

pub struct StdHost;

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
    ) -> std::io::Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        let mut stack = vec![(root.to_path_buf(), 0usize)];
        while let Some((dir, depth)) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let Ok(t) = e.file_type() else { continue };
                if t.is_dir() {
                    if depth + 1 < max_depth && !matches!(name.as_str(), ".git" | "node_modules" | "target") {
                        stack.push((e.path(), depth + 1));
                    }
                } else if t.is_file() && matches(&name) {
                    out.push(e.path());
                    if out.len() >= max_entries {
                        return Ok(out);
                    }
                }
            }
        }
        Ok(out)
    }

    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        crate::bounded::read(path, crate::bounded::PROFILE_LIMIT)
    }
}
