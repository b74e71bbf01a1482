//! The one list of names a host tool runs code from without being asked to
//! run the project (`HOST_RUN`), each with where a tool looks for it, what
//! stands in for it when missing, its class and what runs from it.

use self::Class::{Agent, Editor, Repository, Shell, ToolManager};
use self::Depth::{Any, Root};
use self::Missing::{EmptyDir, EmptyFileInHome, Nothing};
use self::Shape::{Dir, File, Git};

/// Why the host runs code from a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// A repository (git by its shape, a `.git` entry, Mercurial's `.hg`) or
    /// what lies in one, and the files git reads beside it (`.gitmodules`).
    Repository,
    /// A file a repository's config includes, or its hooks directory.
    GitConfigured,
    /// A hook manager's configuration or scripts, run on `git commit`.
    HookManager,
    /// A tool manager's or shell hook's configuration, run on `cd`.
    ToolManager,
    /// A file that selects the toolchain a project's commands run.
    Toolchain,
    /// An agent's settings, hooks and MCP servers.
    Agent,
    /// An editor's tasks and settings.
    Editor,
    /// A shell's start-up file in a home.
    Shell,
    /// An environment inside the project: a virtualenv's start-up files and
    /// executables, `node_modules/.bin`.
    Environment,
}

impl Class {
    /// One word for reports and `--json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Repository => "repository",
            Class::GitConfigured => "git-configured",
            Class::HookManager => "hook-manager",
            Class::ToolManager => "tool-manager",
            Class::Toolchain => "toolchain",
            Class::Agent => "agent",
            Class::Editor => "editor",
            Class::Shell => "shell",
            Class::Environment => "environment",
        }
    }
}

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
    pub class: Class,
    /// Which tool runs what from it, for reports.
    pub runs: &'static str,
}

const fn entry(
    name: &'static str,
    shape: Shape,
    depth: Depth,
    missing: Missing,
    class: Class,
    runs: &'static str,
) -> HostRun {
    HostRun {
        name,
        shape,
        depth,
        missing,
        class,
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
        Repository,
        "git: its config's core.fsmonitor, hooks, aliases, filters and credential helpers",
    ),
    // Claude Code: settings.json hooks and status line, commands, agents and
    // skills, on its next start in that folder.
    entry(
        ".claude",
        Dir,
        Any,
        EmptyDir,
        Agent,
        "Claude Code: settings hooks, commands and agents",
    ),
    // Claude Code: the MCP servers it starts (commands) in that folder.
    entry(
        ".mcp.json",
        File,
        Any,
        Nothing,
        Agent,
        "Claude Code: the MCP servers it starts",
    ),
    // VS Code (and forks): tasks with runOn folderOpen, terminal profiles,
    // settings naming interpreters and linters to run.
    entry(
        ".vscode",
        Dir,
        Any,
        EmptyDir,
        Editor,
        "VS Code: tasks run on folder open, terminal and tool settings",
    ),
    // JetBrains IDEs: run configurations, startup tasks, external tools.
    entry(
        ".idea",
        Dir,
        Any,
        EmptyDir,
        Editor,
        "JetBrains IDEs: run configurations and startup tasks",
    ),
    // direnv: shell code evaluated on every `cd` into the folder.
    entry(
        ".envrc",
        File,
        Any,
        Nothing,
        ToolManager,
        "direnv: the shell code it evaluates on cd",
    ),
    // Mercurial: hooks in .hg/hgrc. No placeholder: hg takes an empty .hg
    // for a broken repository instead of looking further up.
    entry(".hg", Dir, Any, Nothing, Repository, "Mercurial: hooks in .hg/hgrc"),
    // mise: hooks (enter, cd) and env commands run as the shell enters.
    entry(
        "mise.toml",
        File,
        Any,
        Nothing,
        ToolManager,
        "mise: hooks and env commands run on cd",
    ),
    entry(
        ".mise.toml",
        File,
        Any,
        Nothing,
        ToolManager,
        "mise: hooks and env commands run on cd",
    ),
    entry(
        "mise.local.toml",
        File,
        Any,
        Nothing,
        ToolManager,
        "mise: hooks and env commands run on cd",
    ),
    entry(
        ".mise.local.toml",
        File,
        Any,
        Nothing,
        ToolManager,
        "mise: hooks and env commands run on cd",
    ),
    // git: the user's global config when the project is the home, or one a
    // repository's config includes (include.path = ../.gitconfig).
    entry(
        ".gitconfig",
        File,
        Root,
        Nothing,
        Repository,
        "git: global config of a home, or included by the repository's",
    ),
    // git: submodule URLs and paths it clones and checks out.
    entry(
        ".gitmodules",
        File,
        Root,
        Nothing,
        Repository,
        "git: the submodules it clones and checks out",
    ),
    // Shells: start-up files, run by the next terminal when the project is
    // the home. In another project they run only if sourced, and a new one
    // is found at exit.
    entry(
        ".bashrc",
        File,
        Root,
        EmptyFileInHome,
        Shell,
        "bash: start-up file of a home",
    ),
    entry(
        ".bash_profile",
        File,
        Root,
        EmptyFileInHome,
        Shell,
        "bash: start-up file of a home",
    ),
    entry(
        ".bash_login",
        File,
        Root,
        EmptyFileInHome,
        Shell,
        "bash: start-up file of a home",
    ),
    entry(
        ".profile",
        File,
        Root,
        EmptyFileInHome,
        Shell,
        "sh: start-up file of a home",
    ),
    entry(
        ".zshrc",
        File,
        Root,
        EmptyFileInHome,
        Shell,
        "zsh: start-up file of a home",
    ),
    entry(
        ".zprofile",
        File,
        Root,
        EmptyFileInHome,
        Shell,
        "zsh: start-up file of a home",
    ),
    entry(
        ".zshenv",
        File,
        Root,
        EmptyFileInHome,
        Shell,
        "zsh: start-up file of a home",
    ),
];

/// What git runs code from or follows inside a repository's `.git`: a new
/// one in a repository that was there at start is for the quarantine.
pub const GIT_INNER: &[&str] = &["config", "config.worktree", "commondir", "hooks"];

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
}
