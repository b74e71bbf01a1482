//! The quarantine's store: `$XDG_STATE_HOME/claude-shim/quarantine/<run>/`,
//! one directory per run that moved something, holding the entries under
//! inert names (`1`, `2`...: no tool looks for them there) and
//! `manifest.json` with where each came from. Out of every sandbox's reach
//! (the home is not a project, claude::refuse_home), and read back as data:
//! the manifest is claude-shim's own, the entries are not.

use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::copy;
use super::outcome::{Left, Outcome};
use crate::hostfs::{Dir, Kind};

const MANIFEST: &str = "manifest.json";
const MANIFEST_LIMIT: u64 = 1 << 20;

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub run: String,
    /// RFC 3339, UTC.
    pub time: String,
    pub workdir: PathBuf,
    pub moved: Vec<Stored>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// Where it was (absolute).
    pub path: PathBuf,
    /// Its name in the run's directory.
    pub stored: String,
    /// Which tool runs what from it.
    pub runs: String,
}

pub fn root() -> Result<Dir> {
    crate::sandbox::state_dir("quarantine")
}

/// `rel` moved to `to_rel` below `to`; across filesystems copied, then removed.
fn move_one(from: &Dir, rel: &Path, to: &Dir, to_rel: &Path) -> std::result::Result<(), String> {
    match from.rename_to(rel, to, to_rel) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::CrossesDevices => {
            copy::tree(from, rel, to, to_rel)?;
            from.remove_all(rel).map_err(|e| e.to_string())
        }
        Err(e) => Err(e.to_string()),
    }
}

/// A run's directory in the quarantine, made when the run starts: a
/// missing state directory or a full filesystem then refuses the start
/// instead of leaving the exit nowhere to move what the run made.
pub(crate) struct Prepared {
    q: Dir,
    run: String,
    dir: Dir,
    time: chrono::DateTime<chrono::Utc>,
}

/// Makes the directory of the run `id` below the quarantine `root`.
pub(crate) fn prepare(root: &dyn Fn() -> Result<Dir>, id: &str) -> Result<Prepared> {
    let time = chrono::Utc::now();
    let run = format!("{}-{id}", time.format("%Y%m%dT%H%M%SZ"));
    let q = root()?;
    q.create_dir(Path::new(&run), 0o700)?;
    let dir = q.sub(Path::new(&run))?;
    Ok(Prepared { q, run, dir, time })
}

/// Whether `uid` may open up what it finds in the way: its own, or root's to do.
fn ours(uid: u32) -> bool {
    let me = nix::unistd::geteuid();
    me.is_root() || me.as_raw() == uid
}

/// What the sandbox may have done to keep `rel` where it is, undone
/// through handles (claude-shim is the owner, or root): the folder holding
/// it made writable, and what it holds made readable (a copy across
/// filesystems reads it all) and removable.
fn open_up(wd: &Dir, rel: &Path) {
    let parent = rel.parent().unwrap_or(Path::new(""));
    if let Ok(Some(st)) = wd.stat(parent) {
        if st.kind == Kind::Dir && ours(st.uid) && st.mode & 0o300 != 0o300 {
            let _ = wd.chmod(parent, st.mode | 0o700);
        }
    }
    let mut todo = vec![rel.to_path_buf()];
    while let Some(p) = todo.pop() {
        let Ok(Some(st)) = wd.stat(&p) else { continue };
        match st.kind {
            Kind::Dir => {
                if ours(st.uid) && st.mode & 0o700 != 0o700 {
                    let _ = wd.chmod(&p, st.mode | 0o700);
                }
                if let Ok(names) = wd.list(&p) {
                    todo.extend(names.into_iter().map(|(n, _)| p.join(n)));
                }
            }
            Kind::File if ours(st.uid) && st.mode & 0o400 == 0 => {
                let _ = wd.chmod(&p, st.mode | 0o400);
            }
            _ => {}
        }
    }
}

/// Where an entry that cannot be moved aside is renamed to in its own
/// folder: a dot name no tool looks for, no suffix a tool globs for
/// (`*.pth`, `*.md`, `*.toml`), naming the run.
fn inert_name(rel: &Path, run: &str, n: usize) -> PathBuf {
    rel.with_file_name(format!(".claude-shim-moved-{run}-{n}"))
}

/// How one entry was put out of the host's way.
enum Put {
    Moved,
    /// Renamed in place, to this path.
    Inert(PathBuf),
}

/// Moves `rel` into the quarantine as `stored`; failing that, opens up what
/// the sandbox closed and tries again; failing that, renames it in place to
/// an inert name.
fn put_away(wd: &Dir, rel: &Path, to: &Dir, stored: &Path, inert: &Path) -> std::result::Result<Put, String> {
    let first = match move_one(wd, rel, to, stored) {
        Ok(()) => return Ok(Put::Moved),
        Err(e) => e,
    };
    open_up(wd, rel);
    if move_one(wd, rel, to, stored).is_ok() {
        return Ok(Put::Moved);
    }
    // A copy that could not be finished has been removed; what is left is
    // the entry itself, in place.
    match wd.rename_to(rel, wd, inert) {
        Ok(()) => Ok(Put::Inert(inert.to_path_buf())),
        Err(e) => Err(format!("move it aside: {first}; rename it in place: {e}")),
    }
}

impl Prepared {
    /// The run moved nothing: its directory goes.
    pub(crate) fn discard(self) {
        if let Err(e) = self.q.remove_all(Path::new(&self.run)) {
            tracing::debug!("{e}");
        }
    }

    /// Moves each of `lefts` (relative to `wd`) into the run's directory and
    /// records it in `out`.
    pub(super) fn move_aside(self, wd: &Dir, lefts: Vec<Left>, out: &mut Outcome) {
        let mut manifest = Manifest {
            run: self.run.clone(),
            time: self.time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            workdir: wd.path().to_path_buf(),
            moved: Vec::new(),
        };
        for (n, l) in lefts.into_iter().enumerate() {
            let stored = (n + 1).to_string();
            let inert = inert_name(&l.rel, &self.run, n + 1);
            match put_away(wd, &l.rel, &self.dir, Path::new(&stored), &inert) {
                Ok(Put::Moved) => {
                    manifest.moved.push(Stored {
                        path: wd.join(&l.rel),
                        stored,
                        runs: l.runs.to_owned(),
                    });
                    out.moved.push(l);
                }
                Ok(Put::Inert(to)) => out.inert.push((l, to)),
                Err(e) => out.failed.push((l, e)),
            }
        }
        if manifest.moved.is_empty() {
            self.discard();
            return;
        }
        let json = serde_json::to_vec_pretty(&manifest).expect("a manifest serializes");
        if let Err(e) = self.dir.write_new(Path::new(MANIFEST), &json, 0o600) {
            // Moved all the same: what matters is that the host no longer
            // meets them. Restoring is then by hand.
            out.warnings.push(format!(
                "record what was moved aside: {e}; the entries are in {} as 1, 2... in the order above",
                self.dir.path().display()
            ));
        }
        out.run = Some(self.run);
    }
}

/// Every run in the quarantine, oldest first; one whose manifest cannot be
/// read is named with why.
pub fn runs() -> Result<Vec<std::result::Result<Manifest, String>>> {
    runs_in(&root()?)
}

fn runs_in(q: &Dir) -> Result<Vec<std::result::Result<Manifest, String>>> {
    let mut out = Vec::new();
    for (name, kind) in q.list(Path::new(""))? {
        if kind != Kind::Dir {
            continue;
        }
        let name = name.to_string_lossy().into_owned();
        out.push(read_manifest(q, &name).map_err(|e| format!("{name}: {e:#}")));
    }
    Ok(out)
}

fn read_manifest(q: &Dir, run: &str) -> Result<Manifest> {
    let raw = q.sub(Path::new(run))?.read(Path::new(MANIFEST), MANIFEST_LIMIT)?;
    serde_json::from_slice(&raw).with_context(|| format!("parse {}", q.join(run).join(MANIFEST).display()))
}

/// `run` as one plain name.
fn check_run(run: &str) -> Result<()> {
    let p = Path::new(run);
    if run.is_empty() || p.components().count() != 1 || !matches!(p.components().next(), Some(Component::Normal(_))) {
        bail!("restore {run:?}: not the name of a quarantine run (see `claude-shim quarantine list`)");
    }
    Ok(())
}

/// Puts every entry of `run` back where it was, unless something is there
/// now. Returns one line per entry; the run is removed once empty.
pub fn restore(run: &str) -> Result<Vec<String>> {
    restore_in(&root()?, run)
}

pub(super) fn restore_in(q: &Dir, run: &str) -> Result<Vec<String>> {
    check_run(run)?;
    let mut manifest = read_manifest(q, run).with_context(|| format!("restore {run}"))?;
    let dir = q.sub(Path::new(run))?;
    let wd = Dir::open(&manifest.workdir).with_context(|| format!("restore {run}"))?;
    let mut lines = Vec::new();
    let mut kept = Vec::new();
    for s in std::mem::take(&mut manifest.moved) {
        let rel = match s.path.strip_prefix(&manifest.workdir) {
            Ok(r) if !r.as_os_str().is_empty() => r.to_path_buf(),
            _ => {
                lines.push(format!(
                    "kept {}: it is not below {}",
                    s.path.display(),
                    manifest.workdir.display()
                ));
                kept.push(s);
                continue;
            }
        };
        let r = (|| -> std::result::Result<(), String> {
            if wd.stat(&rel).map_err(|e| e.to_string())?.is_some() {
                return Err("something is there now; move it away first".into());
            }
            if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
                wd.create_dir_all(parent, 0o755).map_err(|e| e.to_string())?;
            }
            move_one(&dir, Path::new(&s.stored), &wd, &rel)
        })();
        match r {
            Ok(()) => lines.push(format!("restored {}", s.path.display())),
            Err(e) => {
                lines.push(format!("kept {} in the quarantine: {e}", s.path.display()));
                kept.push(s);
            }
        }
    }
    manifest.moved = kept;
    if manifest.moved.is_empty() {
        q.remove_all(Path::new(run))?;
    } else {
        let json = serde_json::to_vec_pretty(&manifest).expect("a manifest serializes");
        dir.replace(Path::new(MANIFEST), &json, 0o600)?;
    }
    Ok(lines)
}

/// The names of the runs in the quarantine now (none when it was never made).
pub fn run_names() -> Result<std::collections::BTreeSet<String>> {
    let q = root()?;
    Ok(q.list(Path::new(""))?
        .into_iter()
        .filter(|(_, k)| *k == Kind::Dir)
        .map(|(n, _)| n.to_string_lossy().into_owned())
        .collect())
}

/// The report of a session of many runs (`claude --per-command`): every run
/// not in `before` whose working directory lies in `project`, one line per
/// entry moved aside, the restore command with each.
pub fn session_lines(before: &std::collections::BTreeSet<String>, project: &Path) -> Result<Vec<String>> {
    session_lines_in(&root()?, before, project)
}

pub(super) fn session_lines_in(
    q: &Dir,
    before: &std::collections::BTreeSet<String>,
    project: &Path,
) -> Result<Vec<String>> {
    let (mut warnings, mut entries) = (Vec::new(), Vec::new());
    for run in runs_in(q)? {
        match run {
            Ok(m) if !before.contains(&m.run) && m.workdir.starts_with(project) => {
                entries.extend(m.moved.iter().map(|s| {
                    format!(
                        "claude-shim:   {} ({}; restore: claude-shim quarantine restore {})",
                        s.path.display(),
                        s.runs,
                        m.run
                    )
                }));
            }
            Ok(_) => {}
            Err(e) => warnings.push(format!("claude-shim: warning: failed to read quarantine run {e}")),
        }
    }
    if !entries.is_empty() {
        warnings.push("claude-shim: this session's sandboxes left what the host would run; moved aside:".to_owned());
    }
    warnings.extend(entries);
    Ok(warnings)
}
