//! The words of the host-run list: an entry's class, shape, depth and
//! stand-in, and how a path is matched against its name. The list itself is
//! `table`.

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
    /// The entry's name: one path component, or two when only the folder
    /// above makes it the tool's (`.config/mise`, `mise/config.toml`). The
    /// last component may hold one `*` (`mise.*.toml`).
    pub name: &'static str,
    pub shape: Shape,
    pub depth: Depth,
    pub missing: Missing,
    pub class: Class,
    /// Which tool runs what from it, for reports.
    pub runs: &'static str,
}

impl HostRun {
    /// The last component of the name: what a search by name looks for.
    pub fn leaf(&self) -> &'static str {
        self.name.rsplit('/').next().unwrap_or(self.name)
    }

    /// Whether `rel` (a path relative to the working directory, its
    /// components in order) is this entry at a depth where its tool looks.
    pub(super) fn is_at(&self, rel: &[&str]) -> bool {
        let want: Vec<&str> = self.name.split('/').collect();
        if rel.len() < want.len() || (self.depth == Depth::Root && rel.len() != want.len()) {
            return false;
        }
        let tail = &rel[rel.len() - want.len()..];
        tail.iter().zip(&want).all(|(got, pat)| glob(pat, got))
    }
}

/// `pattern` (at most one `*`, any run of characters) matches `name`.
pub(super) fn glob(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((pre, post)) => name.len() >= pre.len() + post.len() && name.starts_with(pre) && name.ends_with(post),
    }
}
