//! Where review runs are kept: `$XDG_STATE_HOME/claude-shim/review/<RUN>/`,
//! one directory per run holding the overlay's `upper` layer (what the
//! sandbox wrote) and `work` directory, the run's record `run.json` (its
//! project, when it began, who the sandbox ran as, the project's HEAD at the
//! start, and what `apply` has brought since) and a `lock` the running
//! sandbox holds (flock), so that `apply` and `discard` wait for no live
//! run. The record is claude-shim's own; the layer is the sandbox's.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::hostfs::{Dir, Kind};

pub const UPPER: &str = "upper";
pub const WORK: &str = "work";
const RECORD: &str = "run.json";
const LOCK: &str = "lock";
const RECORD_LIMIT: u64 = 64 << 20;

/// A change the user made on the host this long before the run began still
/// counts as made during it: a file's ctime comes from the kernel's coarse
/// clock, which lags the time read here by up to a tick.
pub const START_MARGIN_NS: i64 = 50_000_000;

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub run: String,
    /// The project (the lower layer), absolute.
    pub project: PathBuf,
    /// When the run began, RFC 3339, UTC.
    pub time: String,
    /// When the run began, ns since the epoch, less START_MARGIN_NS: a path
    /// of the project whose ctime is later was changed during the run.
    pub start_ns: i64,
    /// The project's device and inode at start: `apply` refuses another
    /// directory put at its path since.
    pub dev: u64,
    pub ino: u64,
    /// Who the sandbox ran as (the upper layer's owner).
    pub uid: u32,
    pub gid: u32,
    /// The commit the project's HEAD named at start, if it is a repository.
    pub head: Option<String>,
    /// What `apply` brought: each path as `changes` prints it, and the ctime
    /// it left there and on the folders it wrote in (its own, not the user's).
    #[serde(default)]
    pub applied: BTreeSet<String>,
    #[serde(default)]
    pub touched: BTreeMap<String, i64>,
    /// The commit `apply` made the branch `claude-shim/RUN` point at.
    #[serde(default)]
    pub branch: Option<String>,
    /// The project's filesystem gives file handles, so overlayfs marks each
    /// copied-up entry with its origin and a new one is known to be new.
    #[serde(default)]
    pub origins: bool,
    /// The layer's folders the sandbox closed to their owner (mode 000),
    /// opened once it ended so that they can be read (`fds::open_up`):
    /// each (as `changes` prints it, `""` the top) with the mode it left.
    #[serde(default)]
    pub closed: BTreeMap<String, u32>,
}

/// One run's directory, its record, and (for `apply`, `discard` and the
/// running sandbox) its lock.
pub struct Run {
    pub dir: Dir,
    pub record: Record,
    _lock: Option<File>,
}

pub fn root() -> Result<Dir> {
    crate::sandbox::state_dir("review")
}

/// `name` as one plain name of a run.
fn check_name(name: &str) -> Result<()> {
    let p = Path::new(name);
    if name.is_empty() || p.components().count() != 1 || !matches!(p.components().next(), Some(Component::Normal(_))) {
        bail!("use review run {name:?}: not the name of one (see `claude-shim changes --list`)");
    }
    Ok(())
}

fn lock_file(dir: &Dir) -> Result<File> {
    match dir.create_new(Path::new(LOCK), 0o600) {
        Ok(f) => Ok(f),
        Err(e) if e.is_exists() => Ok(dir.open_file(Path::new(LOCK))?),
        Err(e) => Err(e.into()),
    }
}

impl Run {
    /// A new run's directory for the sandbox `id` on `project`, the upper
    /// layer's root given the project's mode and `owner` (whoever the sandbox
    /// runs as, so that the project's top is theirs inside as outside), and
    /// the lock held until the run is dropped.
    pub fn create(id: &str, project: &Path, owner: (u32, u32), head: Option<String>) -> Result<Run> {
        use std::os::unix::fs::MetadataExt;
        let now = chrono::Utc::now();
        let name = format!("{}-{id}", now.format("%Y%m%dT%H%M%SZ"));
        let meta = std::fs::metadata(project).with_context(|| format!("stat {}", project.display()))?;
        let root = root()?;
        root.create_dir(Path::new(&name), 0o700)?;
        let dir = root.sub(Path::new(&name))?;
        let lock = lock_file(&dir)?;
        lock.lock()
            .with_context(|| format!("lock {}", dir.join(LOCK).display()))?;
        dir.create_dir(Path::new(UPPER), 0o700)?;
        dir.chmod(Path::new(UPPER), meta.mode() & 0o7777)?;
        if (owner.0, owner.1) != (nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw()) {
            dir.chown(Path::new(UPPER), owner.0, owner.1)?;
        }
        dir.create_dir(Path::new(WORK), 0o700)?;
        let record = Record {
            run: name,
            project: project.to_path_buf(),
            time: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            start_ns: now.timestamp_nanos_opt().unwrap_or(i64::MAX) - START_MARGIN_NS,
            dev: meta.dev(),
            ino: meta.ino(),
            uid: owner.0,
            gid: owner.1,
            head,
            applied: BTreeSet::new(),
            touched: BTreeMap::new(),
            branch: None,
            closed: BTreeMap::new(),
            origins: crate::hostfs::Dir::open(project)
                .and_then(|d| d.open_fd())
                .is_ok_and(|fd| super::fds::gives_file_handles(std::os::fd::AsFd::as_fd(&fd))),
        };
        let run = Run {
            dir,
            record,
            _lock: Some(lock),
        };
        run.save()?;
        Ok(run)
    }

    /// The run `name`, its lock taken: refused while its sandbox runs.
    pub fn open_locked(name: &str) -> Result<Run> {
        let mut run = Run::open(name)?;
        let lock = lock_file(&run.dir)?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                bail!("use review run {name}: its sandbox is still running")
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(e).context(format!("lock review run {name}")),
        }
        // Read again under the lock: an `apply` that held it may have written it.
        run.record = read_record(&run.dir)?;
        run._lock = Some(lock);
        // A run whose claude-shim was killed before its exit was not opened.
        run.open_up()?;
        Ok(run)
    }

    /// The run `name`, read without its lock (for `changes`).
    pub fn open(name: &str) -> Result<Run> {
        check_name(name)?;
        let root = root()?;
        let dir = root.sub(Path::new(name)).map_err(|e| {
            if e.is_not_found() {
                anyhow::anyhow!("use review run {name}: there is none (see `claude-shim changes --list`)")
            } else {
                e.into()
            }
        })?;
        let record = read_record(&dir)?;
        Ok(Run {
            dir,
            record,
            _lock: None,
        })
    }

    /// Whether its sandbox is still running (someone holds the lock).
    pub fn running(&self) -> bool {
        // Held here: by this process, and no sandbox runs on it.
        if self._lock.is_some() {
            return false;
        }
        let Ok(f) = lock_file(&self.dir) else { return false };
        matches!(f.try_lock_shared(), Err(std::fs::TryLockError::WouldBlock))
    }

    pub fn upper(&self) -> Result<Dir> {
        Ok(self.dir.sub(Path::new(UPPER))?)
    }

    pub fn save(&self) -> Result<()> {
        let json = serde_json::to_vec_pretty(&self.record).expect("a record serializes");
        Ok(self.dir.replace(Path::new(RECORD), &json, 0o600)?)
    }

    /// Once its sandbox is gone (the lock held): the layer's folders the
    /// sandbox closed to their owner opened, and their modes recorded.
    pub fn open_up(&mut self) -> Result<()> {
        let fd = self.dir.open_fd()?;
        let opened =
            super::fds::open_up(std::os::fd::AsFd::as_fd(&fd), std::ffi::OsStr::new(UPPER)).with_context(|| {
                format!(
                    "open the folders the sandbox closed in {}",
                    self.dir.join(UPPER).display()
                )
            })?;
        if opened.is_empty() {
            return Ok(());
        }
        for (rel, mode) in opened {
            self.record.closed.entry(super::layer::show(&rel)).or_insert(mode);
        }
        self.save()
    }

    /// Removes the overlay's work directory (it matters only while mounted).
    pub fn drop_work(&self) -> Result<()> {
        let fd = self.dir.open_fd()?;
        super::fds::remove_all_at(std::os::fd::AsFd::as_fd(&fd), std::ffi::OsStr::new(WORK))
            .with_context(|| format!("remove {}", self.dir.join(WORK).display()))
    }

    /// Removes the whole run.
    pub fn remove(self) -> Result<()> {
        let root = root()?;
        let fd = root.open_fd()?;
        let name = self.record.run.clone();
        super::fds::remove_all_at(std::os::fd::AsFd::as_fd(&fd), std::ffi::OsStr::new(&name))
            .with_context(|| format!("remove review run {}", root.join(&name).display()))
    }
}

fn read_record(dir: &Dir) -> Result<Record> {
    let raw = dir.read(Path::new(RECORD), RECORD_LIMIT)?;
    serde_json::from_slice(&raw).with_context(|| format!("parse {}", dir.join(RECORD).display()))
}

/// Every kept run's record, oldest first; one that cannot be read is named.
pub fn list() -> Result<Vec<std::result::Result<Record, String>>> {
    let root = root()?;
    let mut out = Vec::new();
    for (name, kind) in root.list(Path::new(""))? {
        if kind != Kind::Dir {
            continue;
        }
        let name = name.to_string_lossy().into_owned();
        out.push(
            root.sub(Path::new(&name))
                .map_err(anyhow::Error::from)
                .and_then(|d| read_record(&d))
                .map_err(|e| format!("{name}: {e:#}")),
        );
    }
    Ok(out)
}

/// The latest run whose project is `cwd` or a folder above it.
pub fn latest_for(cwd: &Path) -> Result<String> {
    let mut best: Option<Record> = None;
    for r in list()?.into_iter().flatten() {
        if cwd.starts_with(&r.project) && best.as_ref().is_none_or(|b| (&r.time, &r.run) > (&b.time, &b.run)) {
            best = Some(r);
        }
    }
    match best {
        Some(r) => Ok(r.run),
        None => bail!(
            "find a review run of {}: there is none (claude-shim sandbox --review, claude-shim claude --review)",
            cwd.display()
        ),
    }
}
