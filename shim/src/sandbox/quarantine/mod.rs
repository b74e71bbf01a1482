//! The quarantine at exit (issues 23, 35): what a run left under the working
//! directory that a host tool runs code from without being asked to run the
//! project (a new `sub/.claude/`, a new nested repository's config and hooks,
//! a `.envrc`, a `.mcp.json`...; the list is `host_run`). What existed at
//! start was mounted read-only and cannot have changed; what is new is found
//! by the start's complete search made again (every depth, `node_modules`
//! and `target` included, no cap), moved aside through directory handles
//! that follow no link (`store`), and reported. With
//! `filesystem.after_effects = "report"` it is only reported.
//!
//! It fails closed: the run's directory in the quarantine is made at start
//! (a start that cannot make it is refused), a folder the sandbox made
//! unreadable is opened up by its owner through its handle and searched, an
//! entry that cannot be moved aside is renamed in place to an inert name,
//! and what is still left, or could not be searched, makes the run fail
//! with its name (`Outcome::closed`).

mod copy;
mod outcome;
pub mod store;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use claude_shim_bundle::compile::search_names;
use claude_shim_bundle::policy::values::AfterEffects;
use claude_shim_bundle::{host_run, Compiled, PathKind};

pub use self::outcome::{Left, Outcome};
use crate::hostfs::{Dir, Kind};
use crate::sandbox::env_index;
use crate::sandbox::host::StdHost;
use crate::sandbox::lease::Neighbours;

/// A run's picture of its working directory at start.
pub struct Watch {
    wd: Dir,
    start: BTreeSet<PathBuf>,
    mode: AfterEffects,
    /// The run's directory in the quarantine (none in report mode).
    store: Option<store::Prepared>,
}

/// The run's directory in the quarantine, for `mode`.
fn prepare(mode: AfterEffects, id: &str, root: &dyn Fn() -> Result<Dir>) -> Result<Option<store::Prepared>> {
    match mode {
        AfterEffects::Report => Ok(None),
        AfterEffects::Quarantine => store::prepare(root, id).map(Some).context(
            "make the run's directory in the quarantine, where what the run leaves that the host would run is moved",
        ),
    }
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

/// Folders (relative) that could not be searched, each with why.
type Blind = Vec<(PathBuf, String)>;

/// What of `wd` a host tool would run, found by the complete search, and
/// the folders that could not be searched even once opened up; Err if the
/// search could not be made at all.
fn present(wd: &Dir, host: &StdHost) -> std::result::Result<(Vec<PathBuf>, Blind), String> {
    let workdir = wd.path();
    let walk = host
        .walk(workdir, &search_names)
        .map_err(|e| format!("look for what the run left under {}: {e}", workdir.display()))?;
    let mut found: Vec<(PathBuf, PathKind)> = Vec::new();
    let mut add = |hits: &[env_index::Hit]| {
        for h in hits {
            if let Some(k) = kind(wd, &h.path) {
                found.push((h.path.clone(), k));
            }
        }
    };
    add(&walk.hits);
    // A folder the walk could not read: opened up through the handle by its
    // owner (or root), then searched on its own; what it holds that cannot
    // be read either is next.
    let mut blind = Vec::new();
    let mut todo: Vec<PathBuf> = walk.blind.clone();
    while let Some(rel) = todo.pop() {
        if let Err(why) = open_dir(wd, &rel) {
            blind.push((rel, why));
            continue;
        }
        match env_index::walk(&workdir.join(&rel), "exit", &search_names, None) {
            Ok(w) => {
                add(&w.hits);
                todo.extend(w.blind.into_iter().map(|b| rel.join(b)));
            }
            Err(e) => blind.push((rel, e.to_string())),
        }
    }
    Ok((host_run::present(workdir, &found, wd), blind))
}

/// Makes the folder `rel` readable and searchable by its owner, through the
/// working directory's handle, when claude-shim is that owner or root.
fn open_dir(wd: &Dir, rel: &Path) -> std::result::Result<(), String> {
    let st = wd
        .stat(rel)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "it is gone".to_owned())?;
    let me = nix::unistd::geteuid();
    if st.kind != Kind::Dir {
        return Err("it is not a folder".into());
    }
    if !me.is_root() && me.as_raw() != st.uid {
        return Err(format!(
            "it belongs to uid {}, and claude-shim runs as uid {me}",
            st.uid
        ));
    }
    wd.chmod(rel, st.mode | 0o700).map_err(|e| e.to_string())
}

/// lstat below the working directory's handle: nothing followed.
fn kind(wd: &Dir, p: &Path) -> Option<PathKind> {
    host_run::Tree::kind(wd, p.strip_prefix(wd.path()).ok()?)
}

impl Watch {
    /// Before the run: a handle on the working directory, what the compile
    /// found there, and the run's directory in the quarantine. None when the
    /// run cannot make anything.
    pub fn start(workdir: &Path, compiled: &Compiled, mode: AfterEffects, id: &str) -> Result<Option<Watch>> {
        Self::start_in(workdir, compiled, mode, id, &store::root)
    }

    fn start_in(
        workdir: &Path,
        compiled: &Compiled,
        mode: AfterEffects,
        id: &str,
        quarantine: &dyn Fn() -> Result<Dir>,
    ) -> Result<Option<Watch>> {
        let Some(present) = &compiled.host_run else {
            return Ok(None);
        };
        Ok(Some(Watch {
            wd: Dir::open(workdir)?,
            start: present.iter().cloned().collect(),
            mode,
            store: prepare(mode, id, quarantine)?,
        }))
    }

    /// Before one command of a long-lived sandbox (`claude --per-command`'s
    /// session): the search `finish` makes, made now, so what the command
    /// leaves is told apart from what earlier commands left and the user kept.
    pub fn now(workdir: &Path, host: &StdHost, mode: AfterEffects, id: &str) -> Result<Watch> {
        Self::now_in(workdir, host, mode, id, &store::root)
    }

    fn now_in(
        workdir: &Path,
        host: &StdHost,
        mode: AfterEffects,
        id: &str,
        quarantine: &dyn Fn() -> Result<Dir>,
    ) -> Result<Watch> {
        let wd = Dir::open(workdir)?;
        let (start, _) = present(&wd, host).map_err(|e| anyhow::anyhow!("{e}"))?;
        host.forget();
        Ok(Watch {
            wd,
            start: start.into_iter().collect(),
            mode,
            store: prepare(mode, id, quarantine)?,
        })
    }

    /// After the run (the sandbox gone): the same search again, and what is
    /// new moved aside or reported. `ours`: the placeholders claude-shim
    /// made there. `others`: the runs that shared the directory (`lease`):
    /// a run that shared it moves nothing new, which may be a live
    /// neighbour's, and leaves it to the last run out (`Outcome::deferred`);
    /// the last one out also moves what earlier ones left it. Problems are
    /// part of the outcome, never an error: the command's own result stands,
    /// and `Outcome::closed` says whether the run must fail.
    pub fn finish(self, host: &StdHost, ours: &[PathBuf], others: &Neighbours) -> Outcome {
        let workdir = self.wd.path().to_path_buf();
        let mut outcome = Outcome {
            workdir: workdir.clone(),
            ..Outcome::default()
        };
        let exit = match present(&self.wd, host) {
            Ok((exit, blind)) => {
                outcome.blind = blind;
                exit
            }
            Err(e) => {
                outcome.errors.push(e);
                if let Some(s) = self.store {
                    s.discard();
                }
                return outcome;
            }
        };
        let is_dir = |p: &Path| kind(&self.wd, p) == Some(PathKind::Dir);
        let mut new = made_by_run(&self.start, &exit, ours, &workdir, &is_dir);
        if self.mode == AfterEffects::Quarantine {
            if others.shared && !others.last {
                outcome.deferred = new;
                new = Vec::new();
            } else {
                // What runs that shared the directory left: still there and
                // not already under something taken.
                for p in &others.pending {
                    let there = p.starts_with(&workdir) && p != &workdir && kind(&self.wd, p).is_some();
                    if there && !ours.contains(p) && !new.iter().any(|n| p.starts_with(n)) {
                        new.push(p.clone());
                    }
                }
                new.sort();
                new.dedup();
            }
        }
        // What each runs, by class (a repository by its shape, a file its
        // config includes), the name's entry otherwise.
        let classifier = host_run::Classifier::new(&self.wd);
        let lefts: Vec<Left> = new
            .iter()
            .map(|p| {
                let rel = p.strip_prefix(&workdir).unwrap_or(p).to_path_buf();
                let by_class = classifier.classify(&rel).map(|v| v.runs);
                Left {
                    runs: by_class.unwrap_or_else(|| runs_of(&rel)),
                    rel,
                }
            })
            .collect();
        match (self.mode, self.store) {
            (_, Some(s)) if lefts.is_empty() => s.discard(),
            (AfterEffects::Quarantine, Some(s)) => s.move_aside(&self.wd, lefts, &mut outcome),
            _ => outcome.reported = lefts,
        }
        outcome
    }
}

#[cfg(test)]
mod tests;
