//! What the start's and the exit's search tell by shape rather than by a
//! tool's name: a repository under any name (a `HEAD` whose folder passes
//! git's own test). The search looks for that name (`is_shape_name`); the
//! rest is asked of the tree. Environments inside the project (a
//! virtualenv, `node_modules/.bin`) are classed by `classify` for the
//! review mode and left alone here: the live mode leaves them to the
//! project (docs/sandbox.md, "Environments inside the project").

use std::path::{Path, PathBuf};

use super::tree::Tree;
use crate::compile::PathKind;

/// What a name the search found stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shaped {
    /// A repository directory other than a `.git` (bare-shaped, or a
    /// `.git` renamed): what git takes for one wherever the user runs it.
    Repository(PathBuf),
}

/// The name the search looks for besides the list's: a repository's `HEAD`.
pub fn is_shape_name(name: &str) -> bool {
    name == "HEAD"
}

/// What `rel` (a path the search found, relative to the top) stands for.
pub fn shaped(rel: &Path, tree: &dyn Tree) -> Option<Shaped> {
    let dir = rel.parent()?;
    if dir.as_os_str().is_empty() {
        // The project itself: not a project's own entry.
        return None;
    }
    match rel.file_name()?.to_str()? {
        "HEAD" if dir.file_name().is_some_and(|n| n != ".git") && is_git_dir(tree, dir) => {
            Some(Shaped::Repository(dir.to_path_buf()))
        }
        _ => None,
    }
}
/// git's test for a repository directory (setup.c, `is_git_directory`): a
/// `HEAD` (file or link), and `objects/` and `refs/`, or a `commondir`
/// naming where they are. The content of `HEAD` is not checked: one git
/// would refuse today may be fixed tomorrow.
pub(super) fn is_git_dir(t: &dyn Tree, dir: &Path) -> bool {
    matches!(t.kind(&dir.join("HEAD")), Some(PathKind::File | PathKind::Symlink(_)))
        && (t.kind(&dir.join("objects")).is_some() && t.kind(&dir.join("refs")).is_some()
            || t.kind(&dir.join("commondir")) == Some(PathKind::File))
}

/// A name in `site-packages` that `site` runs at every start.
pub(super) fn is_start_up_module(name: &str) -> bool {
    name.ends_with(".pth") || name == "sitecustomize.py" || name == "usercustomize.py"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host_run::fake::Fake;

    #[test]
    fn repositories_by_shape() {
        let t = Fake::default()
            .repo("vendor/lib.git")
            .file("notes/HEAD", "not a repository")
            .file(".venv/pyvenv.cfg", "home = /usr/bin\n");
        assert_eq!(
            shaped(Path::new("vendor/lib.git/HEAD"), &t),
            Some(Shaped::Repository("vendor/lib.git".into()))
        );
        assert_eq!(shaped(Path::new("notes/HEAD"), &t), None);
        assert_eq!(shaped(Path::new(".git/HEAD"), &t), None);
        assert_eq!(shaped(Path::new(".venv/pyvenv.cfg"), &t), None);
    }
}
