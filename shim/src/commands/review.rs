//! `changes`, `apply` and `discard`: a review run's changes shown (a list
//! flagged where the host would run them, a diff, JSON, or every kept run),
//! brought into the project, or thrown away (sandbox::review).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::cli::{ApplyArgs, ChangesArgs, DiscardArgs};
use crate::sandbox::review::change::{Change, What};
use crate::sandbox::review::diff::{self, Side};
use crate::sandbox::review::layer::show;
use crate::sandbox::review::{self, apply, branch, store};

fn cwd() -> Result<PathBuf> {
    let cwd = std::env::current_dir().context("read the working directory")?;
    std::fs::canonicalize(&cwd).with_context(|| format!("open {}", cwd.display()))
}

/// The run named, or the latest of the project the working directory is in.
fn run_name(run: Option<&str>) -> Result<String> {
    match run {
        Some(r) => Ok(r.to_owned()),
        None => store::latest_for(&cwd()?),
    }
}

/// Prints `text`; a reader that stopped early (`| head`) is not an error.
fn print(text: &str) -> Result<()> {
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// One change as `changes` lists it.
fn line(c: &Change) -> String {
    let mut s = format!("  {}  {}", c.what.letter(), show(&c.rel));
    if c.kind == "dir" {
        s.push('/');
    }
    match c.what {
        What::TypeChange => s.push_str(&format!(" ({} -> {})", c.was, c.kind)),
        What::ModeChange => s.push_str(&format!(
            " (mode {:o} -> {:o})",
            c.old_mode.unwrap_or(0),
            c.mode.unwrap_or(0)
        )),
        _ => {}
    }
    if let Some(t) = &c.target {
        s.push_str(&format!(" -> {}", show(t)));
    }
    if c.mode.is_some_and(|m| m & 0o7000 != 0) && c.what != What::Deleted {
        s.push_str(" [set-id or sticky bits: apply drops them]");
    }
    if let Some(h) = &c.host_run {
        s.push_str(&format!(" [host runs it: {h}]"));
    }
    if let Some(r) = &c.refused {
        s.push_str(&format!(" [refused: {r}]"));
    }
    if let Some(x) = &c.conflict {
        s.push_str(&format!(" [conflict: {x}]"));
    }
    s
}

fn json(changes: &[Change]) -> String {
    let list: Vec<serde_json::Value> = changes
        .iter()
        .map(|c| {
            serde_json::json!({
                "path": show(&c.rel),
                "change": c.what,
                "kind": c.kind,
                "was": c.was,
                "mode": c.mode.map(|m| format!("{m:o}")),
                "target": c.target.as_deref().map(show),
                "host_run": c.host_run.is_some(),
                "why": c.host_run,
                "conflict": c.conflict,
                "refused": c.refused,
            })
        })
        .collect();
    serde_json::to_string_pretty(&list).expect("values serialize") + "\n"
}

/// What the diff shows of the project's side and the layer's.
fn sides(r: &review::Read, c: &Change) -> String {
    let read = |d: &crate::hostfs::Dir| -> Option<Vec<u8>> { d.read(&c.rel, diff::SHOWN_LIMIT).ok() };
    let old = match c.was {
        "file" if c.what != What::Added => read(&r.project),
        _ => None,
    };
    let new = match c.kind {
        "file" if c.what != What::Deleted => read(&r.upper),
        _ => None,
    };
    let old_link = r.project.read_link(&c.rel).ok().flatten();
    let old_side = match (c.what, c.was) {
        (What::Added, _) | (_, "nothing") => Side::None,
        (_, "file") => Side::File(old.as_deref()),
        (_, "link") => old_link.as_deref().map_or(Side::Other("link"), Side::Link),
        (_, k) => Side::Other(k),
    };
    let new_side = match (c.what, c.kind) {
        (What::Deleted, _) => Side::None,
        (_, "file") => Side::File(new.as_deref()),
        (_, "link") => c.target.as_deref().map_or(Side::Other("link"), Side::Link),
        (_, k) => Side::Other(k),
    };
    diff::diff(c, &old_side, &new_side)
}

pub fn changes(args: &ChangesArgs) -> Result<i32> {
    if args.list {
        return list();
    }
    let name = run_name(args.run.as_deref())?;
    // Under its lock once the run has ended, so that a run whose claude-shim
    // was killed before its exit has its closed folders opened first.
    let run = match store::Run::open_locked(&name) {
        Ok(run) => run,
        Err(_) => store::Run::open(&name)?,
    };
    let r = review::read(&run)?;
    if args.json {
        print(&json(&r.changes))?;
        return Ok(0);
    }
    let rec = &run.record;
    let flagged = r.changes.iter().filter(|c| c.host_run.is_some()).count();
    let conflicts = r.changes.iter().filter(|c| c.conflict.is_some()).count();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{name} ({}, began {}{}): {} change{}, {flagged} flagged where the host would run them, {conflicts} conflict{}",
        rec.project.display(),
        rec.time,
        if run.running() { ", still running" } else { "" },
        r.changes.len(),
        if r.changes.len() == 1 { "" } else { "s" },
        if conflicts == 1 { "" } else { "s" },
    );
    // The agent's git objects are many and content-addressed: one line.
    let objects = Path::new(".git/objects");
    let (obj, rest): (Vec<&Change>, Vec<&Change>) = r.changes.iter().partition(|c| c.rel.starts_with(objects));
    let obj: Vec<&Change> = obj.into_iter().filter(|c| c.kind == "file").collect();
    for c in &rest {
        let _ = writeln!(out, "{}", line(c));
    }
    if !obj.is_empty() {
        let _ = writeln!(
            out,
            "  A  .git/objects/ ({} git objects: what the agent's commits hold)",
            obj.len()
        );
    }
    match branch::agent_commit(&r.upper, &r.project, rec.head.as_deref()) {
        Ok(Some((id, subject))) => {
            let _ = writeln!(
                out,
                "the agent's commit {} {}: `claude-shim apply` brings it as the branch claude-shim/{name} (HEAD stays)",
                &id[..12],
                subject.map(|s| format!("\"{s}\"")).unwrap_or_default()
            );
        }
        Ok(None) => {}
        Err(e) => eprintln!("claude-shim: warning: failed to read the agent's commit: {e:#}"),
    }
    if args.diff {
        for c in &r.changes {
            if !c.rel.starts_with(objects) {
                out.push_str(&sides(&r, c));
            }
        }
    }
    print(&out)?;
    Ok(0)
}

fn list() -> Result<i32> {
    let mut out = String::new();
    let runs = store::list()?;
    if runs.is_empty() {
        let _ = writeln!(out, "no review runs are kept ({})", store::root()?.path().display());
    }
    for r in runs {
        match r {
            Ok(rec) => {
                let state = match store::Run::open(&rec.run) {
                    Ok(run) if run.running() => "running".to_owned(),
                    Ok(run) => match review::read(&run) {
                        Ok(r) => format!("{} changes, {} applied", r.changes.len(), rec.applied.len()),
                        Err(e) => format!("unreadable: {e:#}"),
                    },
                    Err(e) => format!("unreadable: {e:#}"),
                };
                let _ = writeln!(out, "{}  {}  {}  ({state})", rec.run, rec.time, rec.project.display());
            }
            Err(e) => eprintln!("claude-shim: warning: failed to read review run {e}"),
        }
    }
    print(&out)?;
    Ok(0)
}

/// `PATH` relative to the project: as given when relative to it, or the
/// part below the project of an absolute or working-directory path in it.
fn relative(project: &Path, p: &Path, cwd: &Path) -> PathBuf {
    let abs = if p.is_absolute() { p.to_path_buf() } else { cwd.join(p) };
    match abs.strip_prefix(project) {
        Ok(rel) if cwd.starts_with(project) => rel.to_path_buf(),
        _ => p.to_path_buf(),
    }
}

pub fn apply(args: &ApplyArgs) -> Result<i32> {
    // `apply PATH` with no run: the first word names no kept run.
    let (run, mut paths) = match &args.run {
        Some(r) if store::Run::open(r).is_err() && (args.paths.is_empty() || Path::new(r).exists()) => {
            let mut p = vec![PathBuf::from(r)];
            p.extend(args.paths.iter().cloned());
            (None, p)
        }
        r => (r.clone(), args.paths.clone()),
    };
    let name = run_name(run.as_deref())?;
    let mut run = store::Run::open_locked(&name)?;
    let cwd = cwd()?;
    paths = paths.iter().map(|p| relative(&run.record.project, p, &cwd)).collect();
    let r = review::read(&run)?;
    let plan = apply::plan(r.changes.clone(), &paths, &run.record.applied)?;
    let rec = &run.record;
    println!(
        "claude-shim: {} {} of {} change{} of {name} to {}{}",
        if args.check { "would apply" } else { "applying" },
        plan.apply.len(),
        r.changes.len(),
        if r.changes.len() == 1 { "" } else { "s" },
        rec.project.display(),
        if paths.is_empty() {
            " (every change the host would not run)"
        } else {
            ""
        }
    );
    let mut failed = plan.conflicts.len() + plan.refused.len();
    if args.check {
        for c in &plan.apply {
            println!("{}", line(c));
        }
    } else {
        for d in apply::execute(&plan, &r.upper, &r.project) {
            match &d.error {
                None => {
                    let mut l = line(&d.change);
                    if d.change.host_run.is_some() {
                        l.push_str(" (flagged, applied because it was named)");
                    }
                    println!("{l}");
                    record_applied(&mut run.record, &r.project, &d.change.rel);
                }
                Some(e) => {
                    failed += 1;
                    eprintln!("claude-shim: failed to apply {}: {e}", show(&d.change.rel));
                }
            }
        }
    }
    for c in &plan.conflicts {
        eprintln!(
            "claude-shim: conflict: {}: {} (left as it is on the host)",
            show(&c.rel),
            c.conflict.as_deref().unwrap_or("")
        );
    }
    for c in &plan.refused {
        eprintln!(
            "claude-shim: refused: {}: {}",
            show(&c.rel),
            c.refused.as_deref().unwrap_or("")
        );
    }
    for c in &plan.done {
        println!("  already applied: {}", show(&c.rel));
    }
    for p in &plan.already {
        println!("  already applied: {}", show(p));
    }
    let flagged_objects = plan
        .flagged
        .iter()
        .filter(|c| c.rel.starts_with(".git/objects"))
        .count();
    for c in plan.flagged.iter().filter(|c| !c.rel.starts_with(".git/objects")) {
        println!(
            "  left for review: {} (the host would run it: {}; `claude-shim apply {name} {}` brings it)",
            show(&c.rel),
            c.host_run.as_deref().unwrap_or(""),
            show(&c.rel)
        );
    }
    if !args.check {
        match bring_branch(&mut run, &r) {
            Ok(Some(l)) => println!("{l}"),
            Ok(None) => {}
            Err(e) => {
                failed += 1;
                eprintln!("claude-shim: failed to {e:#}");
            }
        }
        run.save()?;
        println!("  {name} is kept: `claude-shim changes {name}` shows what is left, `claude-shim discard {name}` removes it");
    } else if flagged_objects > 0 {
        println!("  the agent's commits would arrive as the branch claude-shim/{name}");
    }
    Ok(i32::from(failed > 0))
}

/// Records what `apply` wrote at `rel`: the path, and the ctimes it left on
/// it and on its folder (so a later `apply` of this run does not take its
/// own writes for the user's).
fn record_applied(rec: &mut store::Record, project: &crate::hostfs::Dir, rel: &Path) {
    rec.applied.insert(show(rel));
    for p in [Some(rel), rel.parent()].into_iter().flatten() {
        if let Ok(Some(st)) = project.stat(p) {
            rec.touched.insert(show(p), st.ctime_ns as i64);
        }
    }
}

/// The agent's commit as `claude-shim/RUN`, once.
fn bring_branch(run: &mut store::Run, r: &review::Read) -> Result<Option<String>> {
    let name = run.record.run.clone();
    if let Some(id) = &run.record.branch {
        return Ok(Some(format!(
            "  branch claude-shim/{name} is at {} (brought before)",
            &id[..12]
        )));
    }
    let Some((id, subject)) = branch::agent_commit(&r.upper, &r.project, run.record.head.as_deref())? else {
        return Ok(None);
    };
    let copied = branch::import(&r.upper, &r.project, &name, &id)?;
    run.record.branch = Some(id.clone());
    Ok(Some(format!(
        "  branch claude-shim/{name} -> {} {}({copied} git objects copied; HEAD, the index, the config and the hooks unchanged)",
        &id[..12],
        subject.map(|s| format!("\"{s}\" ")).unwrap_or_default()
    )))
}

pub fn discard(args: &DiscardArgs) -> Result<i32> {
    let name = run_name(args.run.as_deref())?;
    let run = store::Run::open_locked(&name)?;
    run.remove()?;
    println!("claude-shim: discarded review run {name}");
    Ok(0)
}
