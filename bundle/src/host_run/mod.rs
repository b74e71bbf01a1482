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
pub(crate) mod gitconfig;
mod list;
mod table;

use std::path::{Path, PathBuf};

pub use self::classify::{classify, Classifier, Rooted, Tree, Verdict};
pub use self::list::{Class, Depth, HostRun, Missing, Shape};
pub use self::table::{find, is_nested_name, search_key, GIT_INNER, HOST_RUN};
use crate::compile::PathKind;

/// The host-run entries of a working directory: those of `found` (the one
/// search, made at start and again at exit) with a host-run name, the
/// top-level ones the search does not look for, and what `GIT_INNER` names
/// in every repository directory found, as `kind` (lstat) sees them. Sorted.
pub fn present(
    workdir: &Path,
    found: &[(PathBuf, PathKind)],
    kind: &dyn Fn(&Path) -> Option<PathKind>,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for (path, k) in found {
        let rel = path.strip_prefix(workdir).ok().and_then(Path::to_str);
        if !rel.and_then(find).is_some_and(|h| h.depth == Depth::Any) {
            continue;
        }
        out.push(path.clone());
        if path.file_name().is_some_and(|n| n == ".git") && *k == PathKind::Dir {
            out.extend(GIT_INNER.iter().map(|n| path.join(n)).filter(|p| kind(p).is_some()));
        }
    }
    for h in HOST_RUN.iter().filter(|h| h.depth == Depth::Root) {
        let p = workdir.join(h.name);
        if kind(&p).is_some() {
            out.push(p);
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn present_lists_entries_the_top_level_ones_and_inside_repositories() {
        let wd = Path::new("/p");
        let found = vec![
            (PathBuf::from("/p/.git"), PathKind::Dir),
            (PathBuf::from("/p/.env"), PathKind::File),
            (PathBuf::from("/p/sub/.claude"), PathKind::Dir),
            (PathBuf::from("/p/sub/.git"), PathKind::File),
        ];
        let exists = ["/p/.git/config", "/p/.git/hooks", "/p/.bashrc", "/p/sub/.git/config"];
        let kind = |p: &Path| exists.iter().any(|e| Path::new(e) == p).then_some(PathKind::File);
        let got: Vec<String> = present(wd, &found, &kind)
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        // Not the .env (not host-run), not inside a `.git` file's repository.
        assert_eq!(
            got,
            [
                "/p/.bashrc",
                "/p/.git",
                "/p/.git/config",
                "/p/.git/hooks",
                "/p/sub/.claude",
                "/p/sub/.git"
            ]
        );
        assert!(!is_nested_name(".bashrc") && !is_nested_name("src"));
    }
}
