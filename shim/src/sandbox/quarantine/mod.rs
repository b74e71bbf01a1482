//! The quarantine at exit (issue 23): what a run left under the working
//! directory that a host tool runs code from without being asked to run the
//! project (a new `sub/.claude/`, a new nested repository's config and hooks,
//! a `.envrc`, a `.mcp.json`...; the list is `host_run`). What existed at
//! start was mounted read-only and cannot have changed; what is new is found
//! by the start's one search made again, moved aside through directory
//! handles that follow no link (`store`), and reported. With
//! `filesystem.after_effects = "report"` it is only reported.

mod copy;
mod outcome;
pub mod store;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::Result;
use claude_shim_bundle::compile::{search_names, ENV_FILE_DEPTH, ENV_FILE_LIMIT};
use claude_shim_bundle::policy::values::AfterEffects;
use claude_shim_bundle::{host_run, Compiled, HostView, PathKind};

pub use self::outcome::{Left, Outcome};
use crate::hostfs::Dir;

/// A run's picture of its working directory at start.
pub struct Watch {
    wd: Dir,
    start: BTreeSet<PathBuf>,
    mode: AfterEffects,
    id: String,
}

/// What a host-run entry at `rel` runs, from its name (an entry inside a
/// repository's `.git` is the repository's).
fn runs_of(rel: &Path) -> &'static str {
    let in_git = rel.parent().and_then(Path::file_name).is_some_and(|n| n == ".git");
    let name = if in_git {
        ".git"
    } else {
        rel.file_name().and_then(|n| n.to_str()).unwrap_or("")
    };
    host_run::find(name).map_or("a host tool", |h| h.runs)
}

/// What of `exit` the run made: not there at start, not a placeholder of
/// claude-shim's (`ours`), not a repository directory itself (its config and
/// hooks are listed on their own: moving the whole `.git` of a repository the
/// agent cloned would take its history too), and not below an entry already
/// taken.
fn made_by_run(
    start: &BTreeSet<PathBuf>,
    exit: &[PathBuf],
    ours: &[PathBuf],
    wd: &Path,
    is_dir: &dyn Fn(&Path) -> bool,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for p in exit {
        if start.contains(p) || ours.contains(p) || out.iter().any(|o| p.starts_with(o)) {
            continue;
        }
        let is_repo_dir = p.file_name().is_some_and(|n| n == ".git") && is_dir(p);
        if is_repo_dir || !p.starts_with(wd) || p == wd {
            continue;
        }
        out.push(p.clone());
    }
    out
}

/// What of `wd` a host tool would run, found by the compile's search, and
/// why it was not looked at whole, if it was not; Err if not at all.
fn present(wd: &Dir, host: &dyn HostView) -> std::result::Result<(Vec<PathBuf>, Option<String>), String> {
    let workdir = wd.path();
    let found = host
        .find(workdir, &search_names, ENV_FILE_DEPTH, ENV_FILE_LIMIT)
        .map_err(|e| format!("look for what the run left under {}: {e}", workdir.display()))?;
    // The start refuses this many; at the exit the run is over, so it is
    // said loudly: what lies past them was not looked at.
    let partial = (found.len() >= ENV_FILE_LIMIT).then(|| {
        format!(
            "look at everything the run left under {}: it holds {ENV_FILE_LIMIT} or more .env files and tool settings, and only the first were looked at",
            workdir.display()
        )
    });
    Ok((host_run::present(workdir, &found, &|p| kind(wd, p)), partial))
}

/// lstat below the working directory's handle: nothing followed.
fn kind(wd: &Dir, p: &Path) -> Option<PathKind> {
    let rel = p.strip_prefix(wd.path()).ok()?;
    let st = wd.stat(rel).ok()??;
    Some(match st.kind {
        crate::hostfs::Kind::Dir => PathKind::Dir,
        crate::hostfs::Kind::File => PathKind::File,
        crate::hostfs::Kind::Link => PathKind::Symlink(PathBuf::new()),
        crate::hostfs::Kind::Other => PathKind::Other,
    })
}

impl Watch {
    /// Before the run: a handle on the working directory and what the
    /// compile found there. None when the run cannot make anything.
    pub fn start(workdir: &Path, compiled: &Compiled, mode: AfterEffects, id: &str) -> Result<Option<Watch>> {
        let Some(present) = &compiled.host_run else {
            return Ok(None);
        };
        Ok(Some(Watch {
            wd: Dir::open(workdir)?,
            start: present.iter().cloned().collect(),
            mode,
            id: id.to_owned(),
        }))
    }

    /// Before one command of a long-lived sandbox (`claude --per-command`'s
    /// session): the search `finish` makes, made now, so what the command
    /// leaves is told apart from what earlier commands left and the user kept.
    pub fn now(workdir: &Path, host: &dyn HostView, mode: AfterEffects, id: &str) -> Result<Watch> {
        let wd = Dir::open(workdir)?;
        let (start, _) = present(&wd, host).map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(Watch {
            wd,
            start: start.into_iter().collect(),
            mode,
            id: id.to_owned(),
        })
    }

    /// After the run (the sandbox gone): the same search again, and what is
    /// new moved aside or reported. `ours`: the placeholders claude-shim
    /// made there. Problems are part of the outcome, never an error: the
    /// command's own result stands.
    pub fn finish(self, host: &dyn HostView, ours: &[PathBuf]) -> Outcome {
        self.finish_in(host, ours, &store::root)
    }

    /// `finish`, with the quarantine's directory from `quarantine`.
    fn finish_in(self, host: &dyn HostView, ours: &[PathBuf], quarantine: &dyn Fn() -> Result<Dir>) -> Outcome {
        let workdir = self.wd.path().to_path_buf();
        let mut outcome = Outcome {
            workdir: workdir.clone(),
            ..Outcome::default()
        };
        let exit = match present(&self.wd, host) {
            Ok((exit, partial)) => {
                outcome.errors.extend(partial);
                exit
            }
            Err(e) => {
                outcome.errors.push(e);
                return outcome;
            }
        };
        let is_dir = |p: &Path| kind(&self.wd, p) == Some(PathKind::Dir);
        let new = made_by_run(&self.start, &exit, ours, &workdir, &is_dir);
        if new.is_empty() {
            return outcome;
        }
        let lefts: Vec<Left> = new
            .iter()
            .map(|p| {
                let rel = p.strip_prefix(&workdir).unwrap_or(p).to_path_buf();
                Left {
                    runs: runs_of(&rel),
                    rel,
                }
            })
            .collect();
        match self.mode {
            AfterEffects::Report => outcome.reported = lefts,
            AfterEffects::Quarantine => store::move_aside(quarantine, &self.wd, &self.id, lefts, &mut outcome),
        }
        outcome
    }
}

#[cfg(test)]
mod tests;
