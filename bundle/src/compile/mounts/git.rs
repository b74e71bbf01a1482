//! The git pass: the working directory's repository, and every repository
//! found under it at start, stay the host's. Git runs code from a repository
//! on every status and commit (its config's core.fsmonitor, hooks, aliases,
//! filters), so:
//! - a `.git` directory becomes a mount point of its own (a bind of itself):
//!   `mv .git .git-x` and `rm -rf .git` stop at it (EBUSY) instead of taking
//!   the read-only binds inside along and leaving room for a new repository;
//! - inside it, `config`, `config.worktree`, `hooks`, `info`, `commondir` and
//!   `worktrees` are read-only, and so are the directory `core.hooksPath`
//!   names and the files the config includes, where they lie in the working
//!   directory; submodules' repositories under `modules/` get the same, each
//!   level of `modules` a mount point too;
//! - a `.git` file (a linked worktree or a submodule checkout) is read-only,
//!   and the repository its `gitdir:` names is protected where the sandbox
//!   could write it;
//! - a working directory without `.git` gets an empty read-only one, so none
//!   can be made: git takes an empty `.git` for no repository and looks
//!   further up, so the host's git is unaffected.
//!
//! A repository where the sandbox cannot write (outside the working
//! directory, under a read-only bind) needs nothing. A `.git/commondir`
//! created in a repository that has none cannot be refused here (an empty
//! placeholder makes git die, one holding `.` changes how git reads the
//! config); it is for the quarantine at exit, as are repositories created
//! during the run.

use std::path::{Path, PathBuf};

use super::{bind, is_forbidden, Builder, Layer, RO_BIND, RW_BIND};
use crate::compile::input::PathKind;
use crate::compile::output::{CompileError, Placeholder};
use crate::host_run::gitconfig::{self, Entry};

/// How many repositories one start protects at most; more is refused
/// rather than half-protected.
const MAX_GIT_DIRS: usize = 256;

/// How deep `modules/` is searched for submodules' repositories (a
/// submodule named `libs/x` lives in `modules/libs/x`).
const MODULE_DEPTH: usize = 4;

/// The largest `.git` file (`gitdir: PATH`) read.
const GITDIR_FILE_LIMIT: usize = 4096;

/// What a repository directory holds that git runs code from or takes
/// directions from, and what stands in for a missing one: a placeholder
/// inside `.git` is invisible to `git status`, but `commondir` cannot have
/// one (see the module's comment), and `info` or `worktrees` created during
/// a run name nothing git runs.
enum Stand {
    Nothing,
    EmptyFile,
    EmptyDir,
}

const INSIDE: &[(&str, Stand)] = &[
    ("config", Stand::EmptyFile),
    ("hooks", Stand::EmptyDir),
    ("info", Stand::Nothing),
    ("commondir", Stand::Nothing),
    ("worktrees", Stand::Nothing),
];

impl Builder<'_, '_> {
    /// The working directory's own `.git`, or the empty placeholder.
    pub(super) fn root_git(&mut self) -> Result<(), CompileError> {
        let wd = self.ctx.inv.workdir.clone();
        let dot_git = wd.join(".git");
        if self.ctx.host.kind(&dot_git).is_some() {
            return self.repository(&dot_git, &wd);
        }
        if self.writable_at(&wd) {
            self.placeholders.push(Placeholder {
                path: dot_git.clone(),
                dir: true,
            });
            self.push(Layer::Protected, bind(&dot_git, RO_BIND));
        }
        Ok(())
    }

    /// A `.git` at `dot_git` (a directory, a gitdir file, or a symlink to
    /// either) whose worktree is `worktree`.
    pub(super) fn repository(&mut self, dot_git: &Path, worktree: &Path) -> Result<(), CompileError> {
        let path = self.resolve("filesystem.protected", dot_git)?;
        if is_forbidden(&path) {
            return Ok(());
        }
        match self.ctx.host.kind(&path) {
            Some(PathKind::Dir) => self.git_dir(&path, Some(worktree)),
            Some(PathKind::File) => {
                self.push(Layer::Protected, bind(&path, RO_BIND));
                match self.gitdir_of(&path)? {
                    Some(dir) if self.ctx.host.kind(&dir) == Some(PathKind::Dir) => self.git_dir(&dir, Some(worktree)),
                    _ => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }

    /// A repository directory: a mount point of its own, what it runs from
    /// read-only, its submodules' repositories the same.
    pub(super) fn git_dir(&mut self, dir: &Path, worktree: Option<&Path>) -> Result<(), CompileError> {
        if self.git_dirs.iter().any(|d| d == dir) || !self.writable_at(dir) {
            return Ok(());
        }
        if self.git_dirs.len() >= MAX_GIT_DIRS {
            return Err(CompileError::Invocation(format!(
                "protect the git repositories under {}: there are more than {MAX_GIT_DIRS}, too many to protect one by one",
                self.ctx.inv.workdir.display()
            )));
        }
        self.git_dirs.push(dir.to_path_buf());
        self.push(Layer::Protected, bind(dir, RW_BIND));
        let config = self.git_config(&dir.join("config"))?;
        for (name, stand) in INSIDE {
            self.read_only_in(dir, name, stand)?;
        }
        // Read only when extensions.worktreeConfig is set; then a missing
        // one must not be planted.
        let per_worktree = gitconfig::last(&config, "extensions", "worktreeconfig")
            .is_some_and(|e| e.value.as_deref().is_none_or(is_true));
        let stand = if per_worktree { Stand::EmptyFile } else { Stand::Nothing };
        self.read_only_in(dir, "config.worktree", &stand)?;

        // A submodule's repository names its worktree; a `.git` names its own.
        let named = gitconfig::last(&config, "core", "worktree")
            .and_then(|e| e.value.as_deref())
            .map(|v| dir.join(v));
        let worktree = match (worktree, named) {
            (Some(w), _) => Some(w.to_path_buf()),
            (None, Some(w)) => Some(self.resolve("filesystem.protected", &w)?),
            (None, None) => None,
        };
        if let Some(hooks) = gitconfig::last(&config, "core", "hookspath").and_then(|e| e.value.as_deref()) {
            // Relative to the worktree's top, where hooks run (githooks(5)).
            if let Some(p) = self.config_path(hooks, worktree.as_deref()) {
                self.hooks_path(&p)?;
            }
        }
        for e in config.iter().filter(|e| e.is_include()) {
            // Relative to the file that includes it (git-config(1)).
            if let Some(p) = e.value.as_deref().and_then(|v| self.config_path(v, Some(dir))) {
                self.included(&p)?;
            }
        }
        let modules = dir.join("modules");
        if self.ctx.host.kind(&modules) == Some(PathKind::Dir) {
            self.modules(&modules, 0)?;
        }
        Ok(())
    }

    /// `dir/name` read-only if it is there, or its placeholder if not.
    fn read_only_in(&mut self, dir: &Path, name: &str, stand: &Stand) -> Result<(), CompileError> {
        let path = dir.join(name);
        match self.ctx.host.kind(&path) {
            Some(PathKind::Dir) | Some(PathKind::File) => self.push(Layer::Protected, bind(&path, RO_BIND)),
            Some(PathKind::Symlink(_)) => {
                // Protected where it points; the link itself stays
                // replaceable in a writable repository (the quarantine's).
                let target = self.resolve("filesystem.protected", &path)?;
                if !is_forbidden(&target) && self.ctx.host.kind(&target).is_some() {
                    self.push(Layer::Protected, bind(&target, RO_BIND));
                }
            }
            Some(PathKind::Other) => {}
            None => {
                let dir = match stand {
                    Stand::Nothing => return Ok(()),
                    Stand::EmptyFile => false,
                    Stand::EmptyDir => true,
                };
                self.placeholders.push(Placeholder {
                    path: path.clone(),
                    dir,
                });
                self.push(Layer::Protected, bind(&path, RO_BIND));
            }
        }
        Ok(())
    }

    /// Each level of `modules/` a mount point, each repository in it
    /// protected (a directory with a HEAD is one; others are levels of a
    /// submodule name with slashes).
    fn modules(&mut self, dir: &Path, depth: usize) -> Result<(), CompileError> {
        if !self.writable_at(dir) {
            return Ok(());
        }
        self.push(Layer::Protected, bind(dir, RW_BIND));
        let mut entries = self.ctx.host.read_dir(dir).map_err(|e| {
            CompileError::Invocation(format!("list the submodules' repositories in {}: {e}", dir.display()))
        })?;
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, kind) in entries {
            if kind != PathKind::Dir {
                continue;
            }
            let p = dir.join(name);
            if self.ctx.host.kind(&p.join("HEAD")).is_some() {
                self.git_dir(&p, None)?;
            } else if depth + 1 < MODULE_DEPTH {
                self.modules(&p, depth + 1)?;
            }
        }
        Ok(())
    }

    /// The directory `core.hooksPath` names, resolved: read-only when the
    /// sandbox could write it, an empty read-only placeholder when missing.
    fn hooks_path(&mut self, path: &Path) -> Result<(), CompileError> {
        let path = self.resolve("filesystem.protected", path)?;
        if is_forbidden(&path) || !path.starts_with(&self.ctx.inv.workdir) || !self.writable_at(&path) {
            return Ok(());
        }
        let parent_is_dir = || {
            path.parent()
                .is_some_and(|d| self.ctx.host.kind(d) == Some(PathKind::Dir))
        };
        match self.ctx.host.kind(&path) {
            Some(PathKind::Dir) | Some(PathKind::File) => self.push(Layer::Protected, bind(&path, RO_BIND)),
            None if parent_is_dir() => {
                self.placeholders.push(Placeholder {
                    path: path.clone(),
                    dir: true,
                });
                self.push(Layer::Protected, bind(&path, RO_BIND));
            }
            _ => {}
        }
        Ok(())
    }

    /// A file the config includes: read-only when it is in the working
    /// directory. A missing one is for the quarantine (a placeholder file
    /// there would show in `git status`).
    fn included(&mut self, path: &Path) -> Result<(), CompileError> {
        let path = self.resolve("filesystem.protected", path)?;
        if !is_forbidden(&path)
            && path.starts_with(&self.ctx.inv.workdir)
            && self.writable_at(&path)
            && self.ctx.host.kind(&path) == Some(PathKind::File)
        {
            self.push(Layer::Protected, bind(&path, RO_BIND));
        }
        Ok(())
    }

    /// A path as a config value writes it: `~/...` in the caller's home,
    /// relative to `base` (None when there is no base to take it from).
    fn config_path(&self, value: &str, base: Option<&Path>) -> Option<PathBuf> {
        let home = &self.ctx.inv.home;
        if value.is_empty() {
            return None;
        }
        if value == "~" {
            return Some(home.clone());
        }
        if let Some(rest) = value.strip_prefix("~/") {
            return Some(home.join(rest));
        }
        let p = Path::new(value);
        if p.is_absolute() {
            return Some(p.to_path_buf());
        }
        base.map(|b| b.join(p))
    }

    /// The entries of the config file at `path` (none when there is none).
    fn git_config(&self, path: &Path) -> Result<Vec<Entry>, CompileError> {
        let path = self.resolve("filesystem.protected", path)?;
        if self.ctx.host.kind(&path) != Some(PathKind::File) {
            return Ok(Vec::new());
        }
        let raw = self
            .ctx
            .host
            .read(&path)
            .map_err(|e| CompileError::Invocation(format!("read the git config {}: {e}", path.display())))?;
        Ok(gitconfig::parse(&String::from_utf8_lossy(&raw)))
    }

    /// The repository a `.git` file names (`gitdir: PATH`, relative to the
    /// file's directory), resolved; None when it names none.
    fn gitdir_of(&self, file: &Path) -> Result<Option<PathBuf>, CompileError> {
        let raw = self
            .ctx
            .host
            .read(file)
            .map_err(|e| CompileError::Invocation(format!("read the gitdir file {}: {e}", file.display())))?;
        let text = String::from_utf8_lossy(&raw[..raw.len().min(GITDIR_FILE_LIMIT)]);
        let Some(target) = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("gitdir:"))
            .map(str::trim)
        else {
            return Ok(None);
        };
        if target.is_empty() {
            return Ok(None);
        }
        let base = file.parent().unwrap_or(Path::new("/"));
        Ok(Some(self.resolve("filesystem.protected", &base.join(target))?))
    }
}

/// git's booleans: true, yes, on, 1 (case-insensitive).
fn is_true(v: &str) -> bool {
    matches!(v.to_ascii_lowercase().as_str(), "true" | "yes" | "on" | "1")
}
