//! A fake tree for the host-run tests: files with content, directories and
//! links, by relative path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::tree::Tree;
use crate::compile::PathKind;

/// A tree of files (with content), directories and links, relative paths.
#[derive(Default)]
pub(crate) struct Fake(BTreeMap<PathBuf, (PathKind, Vec<u8>)>);

impl Fake {
    pub fn dir(mut self, p: &str) -> Self {
        let mut acc = PathBuf::new();
        for c in Path::new(p).components() {
            acc.push(c);
            self.0.entry(acc.clone()).or_insert((PathKind::Dir, Vec::new()));
        }
        self
    }

    pub fn file(self, p: &str, content: &str) -> Self {
        let parent = Path::new(p).parent().unwrap().to_str().unwrap().to_owned();
        let mut s = if parent.is_empty() { self } else { self.dir(&parent) };
        s.0.insert(p.into(), (PathKind::File, content.as_bytes().to_vec()));
        s
    }

    pub fn bytes(self, p: &str, content: &[u8]) -> Self {
        let mut s = self.file(p, "");
        s.0.insert(p.into(), (PathKind::File, content.to_vec()));
        s
    }

    pub fn link(mut self, p: &str, target: &str) -> Self {
        self.0.insert(p.into(), (PathKind::Symlink(target.into()), Vec::new()));
        self
    }

    /// A repository's shape at `dir`.
    pub fn repo(self, dir: &str) -> Self {
        self.file(&format!("{dir}/HEAD"), "ref: refs/heads/main\n")
            .dir(&format!("{dir}/objects"))
            .dir(&format!("{dir}/refs/heads"))
    }
}

impl Tree for Fake {
    fn kind(&self, rel: &Path) -> Option<PathKind> {
        if rel.as_os_str().is_empty() {
            return Some(PathKind::Dir);
        }
        self.0.get(rel).map(|(k, _)| k.clone())
    }

    fn read(&self, rel: &Path, limit: usize) -> Option<Vec<u8>> {
        match self.0.get(rel) {
            Some((PathKind::File, c)) => Some(c[..c.len().min(limit)].to_vec()),
            _ => None,
        }
    }

    fn list(&self, rel: &Path) -> Option<Vec<String>> {
        if self.kind(rel) != Some(PathKind::Dir) {
            return None;
        }
        let names = self.0.keys().filter(|p| p.parent() == Some(rel));
        Some(
            names
                .map(|p| p.file_name().unwrap().to_str().unwrap().to_owned())
                .collect(),
        )
    }
}
