//! The start's one search of the working directory (`HostView::find`, which
//! the binary answers from an index, docs/startup.md) and what the host-run
//! entries it finds below the working directory's own get: `sub/.git` the
//! git pass, `sub/.claude/`, `sub/.mcp.json`, `sub/.vscode/`, `sub/.envrc`...
//! read-only, as they would be at the top. One walk serves both searches:
//! `.env` files for `hide_env_files` and the host-run names for this pass.
//!
//! Bounded as the search is (depth, count, not into `.git`, `.hg`,
//! `node_modules`, `target`): what it does not reach, and what is made
//! during the run (a new nested repository, or a folder renamed with its
//! entries and made again), is for the quarantine at exit.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::{bind, is_forbidden, search_names, Builder, Layer, ENV_FILE_DEPTH, ENV_FILE_LIMIT, RO_BIND};
use crate::compile::input::PathKind;
use crate::compile::output::CompileError;
use crate::host_run::{self, Depth, Shape, Shaped};

impl Builder<'_, '_> {
    /// What the search found (made once, on first use).
    pub(super) fn search(&mut self) -> Result<Vec<(PathBuf, PathKind)>, CompileError> {
        if let Some(found) = &self.found {
            return Ok(found.clone());
        }
        let wd = &self.ctx.inv.workdir;
        let mut found = self
            .ctx
            .host
            .find(wd, &search_names, ENV_FILE_DEPTH, ENV_FILE_LIMIT)
            .map_err(|e| {
                CompileError::Invocation(format!(
                    "look for .env files and tool settings under {}: {e}",
                    wd.display()
                ))
            })?;
        if found.len() >= ENV_FILE_LIMIT {
            let msg = format!(
                "{} holds {ENV_FILE_LIMIT} or more .env files and tool settings (.git, .claude, .vscode...); \
                 too many to cover one by one",
                wd.display()
            );
            return Err(if self.ctx.policy.filesystem.hide_env_files {
                self.ctx.field_error("filesystem.hide_env_files", msg)
            } else {
                CompileError::Invocation(msg)
            });
        }
        found.sort_by(|a, b| a.0.cmp(&b.0));
        self.found = Some(found.clone());
        Ok(found)
    }

    /// The host-run entries below the working directory's own (those in it
    /// are `protected` and `root_git`'s), for every name still protected.
    pub(super) fn nested(&mut self) -> Result<(), CompileError> {
        let protected: HashSet<PathBuf> = self
            .ctx
            .policy
            .filesystem
            .protected_paths()
            .into_iter()
            .map(|p| p.path)
            .collect();
        let wanted = |name: &str| protected.contains(Path::new(name));
        if !host_run::HOST_RUN
            .iter()
            .any(|h| h.depth == Depth::Any && wanted(h.name))
        {
            return Ok(());
        }
        let wd = self.ctx.inv.workdir.clone();
        let mut repositories = Vec::new();
        let mut shaped = Vec::new();
        let host = self.ctx.host;
        let tree = host_run::Rooted { host, root: &wd };
        for (path, kind) in self.search()? {
            let rel = path.strip_prefix(&wd).ok().and_then(|r| r.to_str()).unwrap_or("");
            if let Some(Shaped::Repository(repo)) = host_run::shaped(Path::new(rel), &tree) {
                if wanted(".git") {
                    shaped.push(wd.join(repo));
                }
            }
            let Some(entry) = host_run::find(rel) else {
                continue;
            };
            // The top's own entries by their literal names are `protected`'s
            // and `root_git`'s; a glob's matches at the top are this pass's.
            if entry.depth != Depth::Any || !wanted(entry.name) || rel == entry.name {
                continue;
            }
            if entry.shape == Shape::Git {
                // After the read-only ones: a repository under a read-only
                // folder needs no mount point of its own.
                repositories.push(path);
                continue;
            }
            let target = match kind {
                PathKind::Dir | PathKind::File => path,
                // Protected where it points (a link to a folder the sandbox
                // writes); the link itself is for the quarantine.
                PathKind::Symlink(_) => self.resolve("filesystem.protected", &path)?,
                PathKind::Other => continue,
            };
            if !is_forbidden(&target) && self.writable_at(&target) && self.ctx.host.kind(&target).is_some() {
                self.push(Layer::Protected, bind(&target, RO_BIND));
            }
        }
        for dot_git in repositories {
            let worktree = dot_git.parent().unwrap_or(&wd).to_path_buf();
            self.repository(&dot_git, &worktree)?;
        }
        // A repository by git's test under another name: as a `.git`, its
        // worktree (if any) what its own config names.
        for dir in shaped {
            self.git_dir(&dir, None)?;
        }
        // The top index's gitlinks: a plain `git status` at the top runs
        // their repositories' configs, however deep or in whatever folder
        // the search skips (`node_modules`) they lie.
        if wanted(".git") {
            for dot_git in host_run::Classifier::new(&tree).gitlinks() {
                let dot_git = wd.join(dot_git);
                let worktree = dot_git.parent().unwrap_or(&wd).to_path_buf();
                self.repository(&dot_git, &worktree)?;
            }
        }
        Ok(())
    }
}
