//! Placeholders shared by concurrent sandboxes on one working directory.
//! `sandbox` and `verify` create missing protected paths (`.git/hooks`,
//! `.mcp.json`...) empty so they can be mounted read-only, and remove them
//! afterwards. Two sandboxes on the same directory must not pull a placeholder
//! from under each other: each holds a shared lease on the directory while it
//! runs, and only the last one out removes what any of them created.
//!
//! Two flock(2)s per directory, in `<state>/.claude-shim/`:
//! `.workdir-<hash>.lease`, held shared by every sandbox running there, and
//! `.workdir-<hash>.lock`, held exclusively while placeholders are created (from before
//! the policy is compiled until the lease is shared) or removed (by a sandbox
//! that finds the lease free on its way out). The placeholders created so far
//! are listed in `.workdir-<hash>.json`, so one left by a killed sandbox is removed by
//! the next that finishes.
//!
//! The runs on a directory are recorded too (`.workdir-<hash>.runs.json`):
//! each registers when it takes the lock, before compiling, and leaves under
//! the lock after its sandbox is gone. A run that shared the directory with
//! another at any time cannot tell its own new entries from the other's
//! without tracking (issue 35 item 4): it moves none of them and records
//! them as pending, and the last run to leave moves what is pending. So an
//! exit never takes a live neighbour's entries, and never moves what a run
//! that is starting (registered, compiling, mounting) has found.
//!
//! The sandbox can write the working directory: placeholders are created and
//! removed below a handle on it taken before the run (`hostfs`), so a link
//! planted during the run (`.git` pointing elsewhere) makes a removal fail,
//! never remove something elsewhere.

use std::fs::{File, OpenOptions};
use std::hash::Hasher;
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use claude_shim_bundle::Placeholder;

use crate::hostfs::{Dir, Kind};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
struct Entry {
    path: PathBuf,
    dir: bool,
}

struct Paths {
    lock: PathBuf,
    lease: PathBuf,
    registry: PathBuf,
    runs: PathBuf,
}

impl Paths {
    fn of(state: &Path, k: &str) -> Self {
        Paths {
            lock: state.join(format!(".workdir-{k}.lock")),
            lease: state.join(format!(".workdir-{k}.lease")),
            registry: state.join(format!(".workdir-{k}.json")),
            runs: state.join(format!(".workdir-{k}.runs.json")),
        }
    }
}

/// One run on the directory: its claude-shim process (pid and start time,
/// so that a killed run's record is told from a live one's).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
struct RunRecord {
    id: String,
    pid: u32,
    start: u64,
    /// Another run was on the directory at some time during this one.
    shared: bool,
}

#[derive(Serialize, Deserialize, Debug, Default)]
struct Runs {
    runs: Vec<RunRecord>,
    /// Entries left by runs that shared the directory, for the last to leave.
    pending: Vec<PathBuf>,
}

/// When process `pid` started (clock ticks after boot), if it runs.
fn started(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name, which may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(19)?.parse().ok()
}

fn alive(r: &RunRecord) -> bool {
    started(r.pid) == Some(r.start)
}

/// What a leaving run learns of the others on its directory.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Neighbours {
    /// Another run was on the directory at some time during this one.
    pub shared: bool,
    /// No other run is on it now: what is pending is this run's to move.
    pub last: bool,
    /// What earlier runs that shared the directory left for the last one.
    pub pending: Vec<PathBuf>,
}

impl Neighbours {
    /// A run that had the directory to itself.
    pub fn alone() -> Neighbours {
        Neighbours {
            shared: false,
            last: true,
            pending: Vec::new(),
        }
    }
}

/// A sandbox's hold on its working directory: `acquire` (exclusive, before
/// compiling), `create`, `share` (while it runs), `release`.
pub struct Lease {
    paths: Paths,
    /// The exclusive lock, held from `acquire` to `share`.
    mutex: Option<File>,
    lease: File,
    /// The working directory, opened before the sandbox ran.
    wd: Dir,
    /// The run registered on the directory, if any.
    id: Option<String>,
}

fn key(workdir: &Path) -> String {
    let mut h = fnv::FnvHasher::default();
    h.write(workdir.as_os_str().as_encoded_bytes());
    format!("{:016x}", h.finish())
}

fn open(path: &Path) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("open lock {}", path.display()))
}

/// Locks the file at `path` exclusively. The cleaner unlinks it while holding
/// it, so a lock taken on an inode no longer at the path is retried.
fn lock_current(path: &Path) -> Result<File> {
    loop {
        let file = open(path)?;
        file.lock().with_context(|| format!("lock {}", path.display()))?;
        match std::fs::metadata(path) {
            Ok(m) if m.ino() == file.metadata()?.ino() => return Ok(file),
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("stat lock {}", path.display())),
        }
    }
}

fn entries(registry: &Path) -> Result<Vec<Entry>> {
    match std::fs::read(registry) {
        Ok(bytes) => serde_json::from_slice(&bytes).with_context(|| format!("parse {}", registry.display())),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e).with_context(|| format!("read {}", registry.display())),
    }
}

impl Lease {
    /// Takes the directory's lock (waiting while another sandbox creates or
    /// removes placeholders there, never while one merely runs). Call it
    /// before the policy is compiled: compiling decides what already exists.
    pub fn acquire(state: &Path, workdir: &Path) -> Result<Lease> {
        std::fs::create_dir_all(state).with_context(|| format!("create state directory {}", state.display()))?;
        // Dot files beside the per-container directories, which are named by id.
        let paths = Paths::of(state, &key(workdir));
        let mutex = lock_current(&paths.lock)?;
        // Only a cleaner holding the lock unlinks the lease file: under the
        // lock, the file at the path is the current one.
        let lease = open(&paths.lease)?;
        Ok(Lease {
            paths,
            mutex: Some(mutex),
            lease,
            wd: Dir::open(workdir)?,
            id: None,
        })
    }

    fn runs(&self) -> Result<Runs> {
        let r = &self.paths.runs;
        match std::fs::read(r) {
            Ok(bytes) => serde_json::from_slice(&bytes).with_context(|| format!("parse {}", r.display())),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(Runs::default()),
            Err(e) => Err(e).with_context(|| format!("read {}", r.display())),
        }
    }

    fn store_runs(&self, runs: &Runs) -> Result<()> {
        let r = &self.paths.runs;
        let tmp = r.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec(runs)?).with_context(|| format!("write {}", tmp.display()))?;
        crate::replace::replace(&tmp, r).with_context(|| format!("write {}", r.display()))
    }

    /// Records the run `id` on the directory (under the lock, before
    /// compiling); every run on it now, this one included, is marked as
    /// shared when there is more than one.
    pub fn register(&mut self, id: &str) -> Result<()> {
        let me = std::process::id();
        let start = started(me).context("read this process's start time from /proc")?;
        let mut runs = self.runs()?;
        runs.runs.retain(alive);
        let shared = !runs.runs.is_empty();
        for r in &mut runs.runs {
            r.shared |= shared;
        }
        runs.runs.push(RunRecord {
            id: id.to_owned(),
            pid: me,
            start,
            shared,
        });
        self.store_runs(&runs)?;
        self.id = Some(id.to_owned());
        Ok(())
    }

    /// After the sandbox is gone: takes the lock (held until `release`, so
    /// that no run registers while this one moves things), takes this run
    /// off the record, and says what the others were and left.
    pub fn leave(&mut self) -> Result<Neighbours> {
        if self.mutex.is_none() {
            self.mutex = Some(lock_current(&self.paths.lock)?);
        }
        let Some(id) = self.id.take() else {
            return Ok(Neighbours::alone());
        };
        let mut runs = self.runs()?;
        let shared = runs.runs.iter().any(|r| r.id == id && r.shared);
        runs.runs.retain(|r| r.id != id && alive(r));
        let last = runs.runs.is_empty();
        let pending = if last {
            std::mem::take(&mut runs.pending)
        } else {
            Vec::new()
        };
        self.store_runs(&runs)?;
        Ok(Neighbours { shared, last, pending })
    }

    /// Records `paths` for the last run to leave (after `leave`).
    pub fn defer(&self, paths: &[PathBuf]) -> Result<()> {
        let mut runs = self.runs()?;
        for p in paths {
            if !runs.pending.contains(p) {
                runs.pending.push(p.clone());
            }
        }
        self.store_runs(&runs)
    }

    fn store(&self, entries: &[Entry]) -> Result<()> {
        let r = &self.paths.registry;
        let tmp = r.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec(entries)?).with_context(|| format!("write {}", tmp.display()))?;
        crate::replace::replace(&tmp, r).with_context(|| format!("write {}", r.display()))
    }

    /// Creates the placeholders that are missing and records them. Returns
    /// the ones this call created. The missing ones are recorded before any
    /// is created, so that a sandbox killed half-way has said what it may
    /// have made (one it did not make is removed only if it is still empty).
    pub fn create(&self, placeholders: &[Placeholder]) -> Result<Vec<Placeholder>> {
        let mut entries = entries(&self.paths.registry)?;
        let mut missing = Vec::new();
        for p in placeholders {
            let rel = p.path.strip_prefix(self.wd.path()).unwrap_or(&p.path);
            if self.wd.stat(rel)?.is_none() {
                missing.push(p);
            }
        }
        if missing.is_empty() {
            return Ok(Vec::new());
        }
        for p in &missing {
            let e = Entry {
                path: p.path.clone(),
                dir: p.dir,
            };
            if !entries.contains(&e) {
                entries.push(e);
            }
        }
        self.store(&entries)?;
        let mut made = Vec::new();
        for p in missing {
            if super::create_placeholder(&self.wd, p)? {
                made.push(p.clone());
            }
        }
        Ok(made)
    }

    /// Every placeholder recorded for the directory (by this sandbox or
    /// another one on it): claude-shim's own, not something a run left.
    pub fn placeholders(&self) -> Vec<PathBuf> {
        match entries(&self.paths.registry) {
            Ok(e) => e.into_iter().map(|e| e.path).collect(),
            Err(e) => {
                tracing::warn!("{e:#}");
                Vec::new()
            }
        }
    }

    /// Holds the lease shared and lets other sandboxes on the directory start.
    pub fn share(&mut self) -> Result<()> {
        self.lease
            .lock_shared()
            .with_context(|| format!("lock {}", self.paths.lease.display()))?;
        self.mutex = None;
        Ok(())
    }

    /// Gives the lease up. If no other sandbox holds it, removes every
    /// recorded placeholder still empty, the record and the lock files.
    /// Cleanup problems are logged, not fatal: the command's result stands.
    pub fn release(self) {
        if let Err(e) = self.clean() {
            tracing::warn!("remove placeholders: {e:#}");
        }
    }

    fn clean(self) -> Result<()> {
        let Lease {
            paths,
            mutex,
            lease,
            wd,
            id: _,
        } = self;
        // Our shared hold ends here, before the lock is taken: of sandboxes
        // leaving together, the last to take the lock finds the lease free.
        drop(lease);
        let _mutex = match mutex {
            Some(m) => m,
            None => lock_current(&paths.lock)?,
        };
        clean_locked(&paths, &wd).map(|_| ())
    }
}

/// `gc`: what sandboxes killed on a working directory left there (their
/// placeholders and the lease files, named by `key`), removed once no
/// sandbox holds the directory's lease. A sandbox creating or removing
/// placeholders there (holding the lock) is left alone. True if removed.
pub fn collect(state: &Path, key: &str) -> Result<bool> {
    let paths = Paths::of(state, key);
    let file = open(&paths.lock)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => return Ok(false),
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("lock {}", paths.lock.display()))
        }
    }
    // A lock file another cleaner unlinked meanwhile is not the current one.
    match std::fs::metadata(&paths.lock) {
        Ok(m) if m.ino() == file.metadata()?.ino() => {}
        _ => return Ok(false),
    }
    // The working directory is not known here: its placeholders are
    // resolved from / (the paths were resolved when they were made), as
    // strictly: no link on the way.
    clean_locked(&paths, &Dir::open(Path::new("/"))?)
}

/// The working-directory key of a lease file's name, if it is one.
pub fn key_of(file_name: &str) -> Option<&str> {
    let rest = file_name.strip_prefix(".workdir-")?;
    let (key, ext) = rest.split_once('.')?;
    matches!(
        ext,
        "lock" | "lease" | "json" | "json.tmp" | "runs.json" | "runs.json.tmp"
    )
    .then_some(key)
}

/// With the directory's lock held: if no sandbox holds the lease, removes
/// every recorded placeholder still empty (below `base`), the record and
/// the lease files.
fn clean_locked(paths: &Paths, base: &Dir) -> Result<bool> {
    // Under the lock, the lease at the path is the current one. Without one
    // no sandbox holds it (a sandbox killed before it opened one, or another
    // cleaner came first).
    match File::open(&paths.lease) {
        Ok(lease) => match lease.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Ok(false),
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("lock {}", paths.lease.display()))
            }
        },
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("open {}", paths.lease.display())),
    }
    remove_placeholders(&entries(&paths.registry)?, base);
    let tmp = paths.registry.with_extension("json.tmp");
    // What is pending stays for the next run on the directory.
    let keep_runs = std::fs::read(&paths.runs)
        .ok()
        .and_then(|b| serde_json::from_slice::<Runs>(&b).ok())
        .is_some_and(|r| !r.pending.is_empty());
    let runs_tmp = paths.runs.with_extension("json.tmp");
    let mut files = vec![&tmp, &paths.registry, &runs_tmp];
    if !keep_runs {
        files.push(&paths.runs);
    }
    files.extend([&paths.lease, &paths.lock]);
    for p in files {
        if let Err(e) = std::fs::remove_file(p) {
            if e.kind() != ErrorKind::NotFound {
                return Err(e).with_context(|| format!("remove {}", p.display()));
            }
        }
    }
    Ok(true)
}

/// Removes placeholders that are still empty; one the user has since filled
/// is kept, and so is one a link now stands in the way of.
fn remove_placeholders(entries: &[Entry], base: &Dir) {
    for p in entries.iter().rev() {
        let Ok(rel) = p.path.strip_prefix(base.path()) else {
            tracing::debug!(
                "kept placeholder {}: not below {}",
                p.path.display(),
                base.path().display()
            );
            continue;
        };
        let r = if p.dir {
            base.remove_dir(rel)
        } else {
            match base.stat(rel) {
                Ok(Some(st)) if st.kind == Kind::File && st.len == 0 => base.remove_file(rel),
                Ok(_) => Ok(()),
                Err(e) => Err(e),
            }
        };
        if let Err(e) = r {
            if !e.is_not_found() {
                tracing::debug!("kept placeholder {}: {e}", p.path.display());
            }
        }
    }
}

#[cfg(test)]
mod tests;
