//! `apply`: brings a review run's changes into the project, as `git apply`
//! does once checked. The plan (pure) takes every change the host would not
//! run when no path is named, or the named ones (flagged ones only so, and
//! said), with the new folders they need; leaves conflicts (the user
//! changed the path on the host since the run began) and what is refused
//! (devices, FIFOs, sockets, links out of the project), each named. Then
//! the writes, all decided before the first (one write must not make the
//! next look like the user's): through directory handles that follow no
//! link (`hostfs`), deletions first, then folders, files (written beside and
//! renamed over, modes kept without set-id bits) and links, then the
//! folders' modes. As root in a user's project what is made is given to the
//! owner of the folder it is made in.

use std::collections::BTreeSet;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::change::{Change, What};
use super::layer::show;
use crate::hostfs::Dir;

/// What `apply` does with each change.
#[derive(Debug, Default)]
pub struct Plan {
    /// To write, in the order of the writes.
    pub apply: Vec<Change>,
    /// Flagged and not named: left in the layer.
    pub flagged: Vec<Change>,
    pub conflicts: Vec<Change>,
    pub refused: Vec<Change>,
    /// Brought by an earlier `apply` of this run.
    pub done: Vec<Change>,
    /// Named paths an earlier `apply` of this run brought, that the run no
    /// longer changes (the project holds what the layer does).
    pub already: Vec<PathBuf>,
}

/// Whether `named` (as the user gave it, relative to the project) names
/// `rel` or a folder above it: as raw bytes, or in the escaped form
/// `changes` prints.
fn names(named: &Path, rel: &Path) -> bool {
    let raw = named.as_os_str().as_bytes();
    let raw = raw.strip_prefix(b"./").unwrap_or(raw);
    let raw = raw.strip_suffix(b"/").unwrap_or(raw);
    if raw.is_empty() {
        return false;
    }
    if rel.starts_with(std::ffi::OsStr::from_bytes(raw)) {
        return true;
    }
    let shown = show(rel);
    let n = String::from_utf8_lossy(raw);
    shown == n || shown.starts_with(&format!("{n}/"))
}

/// The plan for `changes` with the paths `named` (none: every change the
/// host would not run). A name that matches no change is an error.
pub fn plan(changes: Vec<Change>, named: &[PathBuf], applied: &BTreeSet<String>) -> anyhow::Result<Plan> {
    let mut p = Plan::default();
    let mut rest: Vec<PathBuf> = Vec::new();
    for n in named {
        if changes.iter().any(|c| names(n, &c.rel)) {
            rest.push(n.clone());
        } else if applied.iter().any(|a| names(n, Path::new(a))) {
            // Brought before: the project holds what the layer does.
            p.already.push(n.clone());
        } else {
            anyhow::bail!(
                "apply {}: the run changed nothing there (see `claude-shim changes`)",
                crate::terminal::escaped(&n.to_string_lossy())
            );
        }
    }
    let named = &rest[..];
    if named.is_empty() && !p.already.is_empty() {
        return Ok(p);
    }
    let wanted = |c: &Change| {
        if named.is_empty() {
            c.host_run.is_none()
        } else {
            named.iter().any(|n| names(n, &c.rel))
        }
    };
    let mut chosen: BTreeSet<PathBuf> = changes.iter().filter(|c| wanted(c)).map(|c| c.rel.clone()).collect();
    // The new folders a chosen change needs come with it.
    let made: BTreeSet<&Path> = changes
        .iter()
        .filter(|c| c.kind == "dir" && matches!(c.what, What::Added | What::TypeChange))
        .map(|c| c.rel.as_path())
        .collect();
    for rel in chosen.clone() {
        for a in rel.ancestors().skip(1) {
            if made.contains(a) {
                chosen.insert(a.to_path_buf());
            }
        }
    }
    for c in changes {
        if !chosen.contains(&c.rel) {
            if c.host_run.is_some() {
                p.flagged.push(c);
            }
        } else if applied.contains(&show(&c.rel)) {
            p.done.push(c);
        } else if c.refused.is_some() {
            p.refused.push(c);
        } else if c.conflict.is_some() {
            p.conflicts.push(c);
        } else {
            p.apply.push(c);
        }
    }
    // A change below a conflict or a refusal waits with it (its folder is
    // not made or not replaced).
    let blocked: Vec<PathBuf> = p
        .conflicts
        .iter()
        .chain(&p.refused)
        .filter(|c| c.kind == "dir" || c.what == What::TypeChange)
        .map(|c| c.rel.clone())
        .collect();
    let (ok, held): (Vec<Change>, Vec<Change>) = std::mem::take(&mut p.apply)
        .into_iter()
        .partition(|c| !blocked.iter().any(|b| c.rel.starts_with(b) && c.rel != *b));
    p.apply = ok;
    for mut c in held {
        c.conflict = Some("a folder above it is a conflict or refused".into());
        p.conflicts.push(c);
    }
    Ok(p)
}

/// One write's outcome: the change and why it failed, if it did.
pub struct Done {
    pub change: Change,
    pub error: Option<String>,
}

/// The ids what `apply` makes at `rel` gets: as root, the owner of the
/// folder it is made in (a user's project stays theirs).
fn give(host: &Dir, rel: &Path) {
    if !nix::unistd::geteuid().is_root() {
        return;
    }
    let parent = rel.parent().unwrap_or(Path::new(""));
    if let Ok(Some(st)) = host.stat(parent) {
        if st.uid != 0 {
            let _ = host.chown(rel, st.uid, st.gid);
        }
    }
}

/// Makes the planned writes in `host` from the layer `upper`. Each failure
/// is named; the rest goes on.
pub fn execute(plan: &Plan, upper: &Dir, host: &Dir) -> Vec<Done> {
    let mut out: Vec<Done> = Vec::new();
    let mut record = |c: &Change, r: Result<(), String>| {
        out.push(Done {
            change: c.clone(),
            error: r.err(),
        })
    };
    // Deletions and what a type change replaces, deepest first.
    let mut removals: Vec<&Change> = plan
        .apply
        .iter()
        .filter(|c| matches!(c.what, What::Deleted | What::TypeChange))
        .collect();
    removals.sort_by_key(|c| std::cmp::Reverse(c.rel.components().count()));
    let mut failed: Vec<PathBuf> = Vec::new();
    for c in &removals {
        if let Err(e) = host.remove_all(&c.rel) {
            failed.push(c.rel.clone());
            record(c, Err(format!("remove what is there: {e}")));
        } else if c.what == What::Deleted {
            record(c, Ok(()));
        }
    }
    // Then what is made, parents first (the plan is in the walk's order).
    let mut dirs: Vec<(&Change, u32)> = Vec::new();
    for c in plan.apply.iter().filter(|c| c.what != What::Deleted) {
        if failed.iter().any(|f| c.rel.starts_with(f)) {
            if !failed.contains(&c.rel) {
                record(c, Err("a folder above it could not be made".into()));
            }
            continue;
        }
        // No set-id or sticky bit comes from the layer.
        let mode = c.mode.unwrap_or(0o644) & 0o777;
        // A folder stays open to its owner: one closed (mode 000) is how a
        // sandbox blinds a search, and the next `changes` reads the project.
        let mode = if c.kind == "dir" { mode | 0o700 } else { mode };
        let r = match (c.what, c.kind) {
            (What::ModeChange, _) => host.chmod(&c.rel, mode).map_err(|e| e.to_string()),
            (_, "dir") => {
                // Writable while it is filled; its own mode comes last.
                let r = host.create_dir(&c.rel, mode | 0o700).map_err(|e| e.to_string());
                if r.is_ok() {
                    give(host, &c.rel);
                    dirs.push((c, mode));
                }
                r
            }
            (_, "file") => copy_file(upper, host, &c.rel, mode),
            (_, "link") => match &c.target {
                Some(t) => host
                    .replace_symlink(&c.rel, t)
                    .map(|()| give(host, &c.rel))
                    .map_err(|e| e.to_string()),
                None => Err("the link has no target".into()),
            },
            (_, k) => Err(format!("a {k} is never made on the host")),
        };
        if r.is_err() && c.kind == "dir" {
            failed.push(c.rel.clone());
        }
        record(c, r);
    }
    dirs.sort_by_key(|(c, _)| std::cmp::Reverse(c.rel.components().count()));
    for (c, mode) in dirs {
        if let Err(e) = host.chmod(&c.rel, mode) {
            record(c, Err(format!("set its mode: {e}")));
        }
    }
    out
}

/// The layer's file at `rel` copied to the project's, written beside it
/// and renamed over (a link there is replaced, never written through), its
/// mode set past the umask.
fn copy_file(upper: &Dir, host: &Dir, rel: &Path, mode: u32) -> Result<(), String> {
    let mut src = upper.open_file(rel).map_err(|e| e.to_string())?;
    // Whose file it was stays whose it is.
    let before = host.stat(rel).ok().flatten();
    host.replace_from(rel, &mut src, mode).map_err(|e| e.to_string())?;
    host.chmod(rel, mode).map_err(|e| e.to_string())?;
    match before {
        Some(st) if nix::unistd::geteuid().is_root() => {
            let _ = host.chown(rel, st.uid, st.gid);
        }
        _ => give(host, rel),
    }
    Ok(())
}

#[cfg(test)]
mod tests;
