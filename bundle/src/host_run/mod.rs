//! The one list of names a host tool runs code from without being asked to
//! run the project: git's repository, the agent's settings, editor tasks,
//! direnv and the like. A sandbox that writes one of these has planted code
//! the host runs later (or, with an editor polling git, at once). The policy's
//! built-in protected paths derive from it (`policy::builtin`), the compiler
//! protects every entry it finds under the working directory at start
//! (`compile::mounts`), and whatever is created during a run is for the
//! quarantine at exit to find. `classify` answers for one path, by class
//! (a repository by git's own test whatever its name, what a repository's
//! config names, environments inside the project) as well as by this list;
//! the live mode's exit search and the review mode's `changes` both ask it.
//! Nothing here makes a system call.

mod classify;
#[cfg(test)]
mod fake;
pub(crate) mod gitconfig;
mod index;
mod list;
mod shape;
mod table;
mod tree;

use std::path::{Path, PathBuf};

pub use self::classify::walk::Folder;
pub use self::classify::{classify, Classifier, Verdict};
pub use self::list::{Class, Depth, HostRun, Missing, Shape};
pub use self::shape::{is_shape_name, shaped, Shaped};
pub use self::table::{find, is_nested_name, search_key, GIT_INNER, HOST_RUN};
pub use self::tree::{Rooted, Tree};
use crate::compile::PathKind;

/// The host-run entries of a working directory, absolute, sorted: those of
/// `found` (the one search, made at start and again at exit) with a
/// host-run name, what `GIT_INNER` names in every repository found (by the
/// name `.git` or by git's own test, `shape`), the files the repositories' configs include and their
/// hooks directories (as far as each is there), and the top-level entries
/// the search does not look for. `tree` is the working directory, read
/// without following links.
pub fn present(workdir: &Path, found: &[(PathBuf, PathKind)], tree: &dyn Tree) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut classifier = Classifier::new(tree);
    let inner = |repo: &Path, out: &mut Vec<PathBuf>| {
        out.extend(
            GIT_INNER
                .iter()
                .map(|n| repo.join(n))
                .filter(|p| tree.kind(p).is_some()),
        );
    };
    for (path, k) in found {
        let Some(rel) = path.strip_prefix(workdir).ok() else {
            continue;
        };
        if rel.to_str().and_then(find).is_some_and(|h| h.depth == Depth::Any) {
            out.push(rel.to_path_buf());
            if rel.file_name().is_some_and(|n| n == ".git") && *k == PathKind::Dir {
                inner(rel, &mut out);
                let worktree = rel.parent().unwrap_or(Path::new(""));
                if !worktree.as_os_str().is_empty() {
                    classifier.add_repository(rel, worktree);
                }
            }
            continue;
        }
        if let Some(Shaped::Repository(repo)) = shape::shaped(rel, tree) {
            inner(&repo, &mut out);
            classifier.add_repository(&repo, &repo);
        }
    }
    out.extend(classifier.configured().into_iter().filter(|p| tree.kind(p).is_some()));
    for h in HOST_RUN.iter().filter(|h| h.depth == Depth::Root) {
        if tree.kind(Path::new(h.name)).is_some() {
            out.push(PathBuf::from(h.name));
        }
    }
    let mut out: Vec<PathBuf> = out.into_iter().map(|r| workdir.join(r)).collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host_run::fake::Fake;

    #[test]
    fn present_lists_entries_the_top_level_ones_and_inside_repositories() {
        let wd = Path::new("/p");
        let t = Fake::default()
            .repo(".git")
            .file(
                ".git/config",
                "[include]\npath = ../shared.inc\n[core]\nhooksPath = .githooks\n",
            )
            .dir(".git/hooks")
            .file(".bashrc", "")
            .file("sub/.git", "gitdir: ../x\n")
            .dir("sub/.claude")
            .file("shared.inc", "")
            .repo("odd/name")
            .file("odd/name/config", "[core]\nfsmonitor = x\n")
            .file("odd/name/HEAD", "ref: refs/heads/main\n")
            .file("notes/HEAD", "")
            .file(".venv/pyvenv.cfg", "")
            .file(".venv/lib/python3.11/site-packages/x.pth", "import os")
            .dir("web/node_modules/.bin");
        let found: Vec<(PathBuf, PathKind)> = [
            (".git", PathKind::Dir),
            (".env", PathKind::File),
            ("sub/.claude", PathKind::Dir),
            ("sub/.git", PathKind::File),
            ("odd/name/HEAD", PathKind::File),
            ("notes/HEAD", PathKind::File),
            (".venv/pyvenv.cfg", PathKind::File),
        ]
        .into_iter()
        .map(|(p, k)| (wd.join(p), k))
        .collect();
        let got: Vec<String> = present(wd, &found, &t)
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        // Not the .env (not host-run), not inside a `.git` file's repository,
        // not a HEAD outside a repository, not an environment inside the
        // project (the project's, docs/sandbox.md); the hooks directory is
        // not there.
        assert_eq!(
            got,
            [
                "/p/.bashrc",
                "/p/.git",
                "/p/.git/config",
                "/p/.git/hooks",
                "/p/odd/name/config",
                "/p/shared.inc",
                "/p/sub/.claude",
                "/p/sub/.git",
            ]
        );
        assert!(!is_nested_name(".bashrc") && !is_nested_name("src"));
    }
}
