//! The one list of names a host tool runs code from without being asked to
//! run the project: git's repository, the agent's settings, editor tasks,
//! direnv and the like. A sandbox that writes one of these has planted code
//! the host runs later (or, with an editor polling git, at once). The policy's
//! built-in protected paths derive from it (`policy::builtin`), the compiler
//! protects every entry it finds under the working directory at start
//! (`compile::mounts`), and whatever is created during a run is for the
//! quarantine at exit to find. Nothing here makes a system call.

use std::path::{Path, PathBuf};

use self::Depth::{Any, Root};
use self::Missing::{EmptyDir, EmptyFileInHome, Nothing};
use self::Shape::{Dir, File, Git};
use crate::compile::PathKind;

/// What an entry is on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Dir,
    File,
    /// A repository: a `.git` directory, or a `.git` file (`gitdir: PATH`)
    /// of a linked worktree or a submodule checkout.
    Git,
}

/// Where under the working directory a tool looks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// Only in the working directory itself.
    Root,
    /// In any folder: the tool runs it when the user later works there.
    Any,
}

/// What stands in for an entry missing from the working directory, so the
/// sandbox cannot create it. Only what the quarantine at exit cannot cover
/// gets one: a file created during a run is found and moved aside then, but
/// a directory created empty now is invisible to git, and a shell start-up
/// file in the home is run by the next terminal before any exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// Nothing: a new one is found at exit.
    Nothing,
    /// An empty directory, mounted read-only.
    EmptyDir,
    /// An empty file, mounted read-only, only when the working directory is
    /// the caller's home.
    EmptyFileInHome,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostRun {
    /// The entry's name (one path component).
    pub name: &'static str,
    pub shape: Shape,
    pub depth: Depth,
    pub missing: Missing,
    /// Which tool runs what from it, for reports.
    pub runs: &'static str,
}

const fn entry(name: &'static str, shape: Shape, depth: Depth, missing: Missing, runs: &'static str) -> HostRun {
    HostRun {
        name,
        shape,
        depth,
        missing,
        runs,
    }
}

/// The list. Each entry's `runs` says which tool runs what.
pub const HOST_RUN: &[HostRun] = &[
    // git, on every status and commit of the user or an editor: the config's
    // core.fsmonitor and hooks, aliases, filters, diff and merge drivers,
    // credential helpers, and the hooks directory. Handled by its own pass
    // (the directory a mount point, its config, hooks, info, commondir and
    // worktrees read-only); a working directory without one gets an empty
    // read-only `.git`, which git ignores as it looks further up.
    entry(
        ".git",
        Git,
        Any,
        EmptyDir,
        "git: its config's core.fsmonitor, hooks, aliases, filters and credential helpers",
    ),
    // Claude Code: settings.json hooks and status line, commands, agents and
    // skills, on its next start in that folder.
    entry(
        ".claude",
        Dir,
        Any,
        EmptyDir,
        "Claude Code: settings hooks, commands and agents",
    ),
    // Claude Code: the MCP servers it starts (commands) in that folder.
    entry(
        ".mcp.json",
        File,
        Any,
        Nothing,
        "Claude Code: the MCP servers it starts",
    ),
    // VS Code (and forks): tasks with runOn folderOpen, terminal profiles,
    // settings naming interpreters and linters to run.
    entry(
        ".vscode",
        Dir,
        Any,
        EmptyDir,
        "VS Code: tasks run on folder open, terminal and tool settings",
    ),
    // JetBrains IDEs: run configurations, startup tasks, external tools.
    entry(
        ".idea",
        Dir,
        Any,
        EmptyDir,
        "JetBrains IDEs: run configurations and startup tasks",
    ),
    // direnv: shell code evaluated on every `cd` into the folder.
    entry(
        ".envrc",
        File,
        Any,
        Nothing,
        "direnv: the shell code it evaluates on cd",
    ),
    // Mercurial: hooks in .hg/hgrc. No placeholder: hg takes an empty .hg
    // for a broken repository instead of looking further up.
    entry(".hg", Dir, Any, Nothing, "Mercurial: hooks in .hg/hgrc"),
    // mise: hooks (enter, cd) and env commands run as the shell enters.
    entry(
        "mise.toml",
        File,
        Any,
        Nothing,
        "mise: hooks and env commands run on cd",
    ),
    entry(
        ".mise.toml",
        File,
        Any,
        Nothing,
        "mise: hooks and env commands run on cd",
    ),
    entry(
        "mise.local.toml",
        File,
        Any,
        Nothing,
        "mise: hooks and env commands run on cd",
    ),
    entry(
        ".mise.local.toml",
        File,
        Any,
        Nothing,
        "mise: hooks and env commands run on cd",
    ),
    // git: the user's global config when the project is the home, or one a
    // repository's config includes (include.path = ../.gitconfig).
    entry(
        ".gitconfig",
        File,
        Root,
        Nothing,
        "git: global config of a home, or included by the repository's",
    ),
    // git: submodule URLs and paths it clones and checks out.
    entry(
        ".gitmodules",
        File,
        Root,
        Nothing,
        "git: the submodules it clones and checks out",
    ),
    // Shells: start-up files, run by the next terminal when the project is
    // the home. In another project they run only if sourced, and a new one
    // is found at exit.
    entry(".bashrc", File, Root, EmptyFileInHome, "bash: start-up file of a home"),
    entry(
        ".bash_profile",
        File,
        Root,
        EmptyFileInHome,
        "bash: start-up file of a home",
    ),
    entry(
        ".bash_login",
        File,
        Root,
        EmptyFileInHome,
        "bash: start-up file of a home",
    ),
    entry(".profile", File, Root, EmptyFileInHome, "sh: start-up file of a home"),
    entry(".zshrc", File, Root, EmptyFileInHome, "zsh: start-up file of a home"),
    entry(".zprofile", File, Root, EmptyFileInHome, "zsh: start-up file of a home"),
    entry(".zshenv", File, Root, EmptyFileInHome, "zsh: start-up file of a home"),
];

/// What git runs code from or follows inside a repository's `.git`: a new
/// one in a repository that was there at start is for the quarantine.
pub const GIT_INNER: &[&str] = &["config", "config.worktree", "commondir", "hooks"];

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
        if !path.file_name().and_then(|n| n.to_str()).is_some_and(is_nested_name) {
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

/// The entry named `name`, if any.
pub fn find(name: &str) -> Option<&'static HostRun> {
    HOST_RUN.iter().find(|h| h.name == name)
}

/// Whether a file or directory named `name` found below the working
/// directory is an entry looked for at any depth.
pub fn is_nested_name(name: &str) -> bool {
    find(name).is_some_and(|h| h.depth == Depth::Any)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_single_components_and_unique() {
        for (i, h) in HOST_RUN.iter().enumerate() {
            assert!(!h.name.is_empty() && !h.name.contains('/'), "{}", h.name);
            assert!(!h.runs.is_empty());
            assert!(!HOST_RUN[..i].iter().any(|o| o.name == h.name), "{} twice", h.name);
            // A placeholder file is never made outside a home, and never for
            // a directory.
            if h.missing == Missing::EmptyFileInHome {
                assert_eq!(h.shape, Shape::File, "{}", h.name);
            }
            if h.missing == Missing::EmptyDir {
                assert_ne!(h.shape, Shape::File, "{}", h.name);
            }
        }
        assert!(is_nested_name(".git") && is_nested_name(".claude") && is_nested_name(".envrc"));
    }

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
