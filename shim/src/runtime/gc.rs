//! What a killed runtime left under the state root, collected (`claude-shim
//! gc`, `delete --force`, and every `sandbox` on its way out): containers whose
//! runtime died before it handed them over, and half-made claims of an id.
//! Live containers are never touched: a container is stranded only when its
//! id lock is free (no `create` runs), it was not handed over to an engine,
//! and the runtime that created it (pid and start time, in meta.json) is gone.
//! Removing one is `remove_leftovers`: only the container's own processes,
//! the cgroups recorded for it, its mounts and its state.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use super::base::{validate_id, IdLock, Runtime, OURS};
use crate::network::process::{open_verified, start_time};

/// What one pass collected, and what it could not.
#[derive(Default, Debug)]
pub struct Collected {
    /// One line per thing removed.
    pub removed: Vec<String>,
    /// One line per thing that could not be removed.
    pub failed: Vec<String>,
}

impl Collected {
    pub fn merge(&mut self, other: Collected) {
        self.removed.extend(other.removed);
        self.failed.extend(other.failed);
    }
}

/// Whether the process that made `path` (whose pid is in its name) cannot be
/// alive: no process has that pid, or the one that has it started after
/// `path` last changed. Never true for the maker itself, which started
/// before it made the path; a pid reused within seconds keeps the path for
/// a later pass.
pub fn maker_gone(pid: i32, path: &Path) -> bool {
    if pid <= 0 {
        return false;
    }
    let Ok(meta) = fs::symlink_metadata(path) else {
        return false;
    };
    let Some(ticks) = start_time(pid) else {
        return true;
    };
    let changed = SystemTime::UNIX_EPOCH + Duration::new(meta.mtime().max(0) as u64, 0);
    match started_at(ticks) {
        // btime is whole seconds, rounded down: the computed start is never
        // later than the real one; the margin absorbs clock adjustments.
        Some(started) => started > changed + Duration::from_secs(2),
        None => false,
    }
}

/// A start time in clock ticks after boot (/proc/<pid>/stat), as wall time.
fn started_at(ticks: u64) -> Option<SystemTime> {
    let stat = fs::read_to_string("/proc/stat").ok()?;
    let btime: u64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok()??;
    let hz = u64::try_from(hz).ok().filter(|h| *h > 0)?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(btime) + Duration::from_millis(ticks * 1000 / hz))
}

/// A claim directory `.new-<pid>-<id>` (see `claim`): its pid and id.
fn parse_claim(name: &str) -> Option<(i32, &str)> {
    let rest = name.strip_prefix(".new-")?;
    let (pid, id) = rest.split_once('-')?;
    Some((pid.parse().ok()?, id))
}

impl Runtime {
    /// Why container `id` is stranded (its runtime died before handing it
    /// over), with its lock held while it is removed; None if it is live or
    /// its engine's.
    fn stranded(&self, id: &str) -> Option<(&'static str, Option<IdLock>)> {
        // A create that still runs holds the lock.
        let lock = self.try_lock(id).ok()?;
        let alive = |(pid, start): (i32, u64)| open_verified(pid, start).is_some();
        match self.read_meta(id) {
            Some(m) if m.handed_over => None,
            Some(m) if m.owner.is_some_and(alive) => None,
            // Written by a claude-shim that did not record its owner: a
            // finished create is its engine's.
            Some(m) if m.owner.is_none() && self.is_complete(id) => None,
            Some(m) if m.owner.is_some() => Some(("its runtime is gone", lock)),
            Some(_) => Some(("its create did not finish", lock)),
            None => Some(("its create ended before it was recorded", lock)),
        }
    }

    /// Removes every stranded container and dead claim under the root.
    pub fn collect_stranded(&self) -> Collected {
        let mut out = Collected::default();
        let ours = self.root.join(OURS);
        let Ok(entries) = fs::read_dir(&ours) else {
            return out;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if parse_claim(&name).is_some() {
                out.merge(self.collect_claim(&entry.path()));
                continue;
            }
            if validate_id(&name).is_err() {
                continue;
            }
            // Only directories that are a container's hold a lock (a
            // sandbox's bundle or a rootfs skeleton holds none, and neither
            // is ever empty). An empty one is what a removal killed after
            // the lock went left (`remove_meta_dir`); rmdir removes only an
            // empty directory.
            if !entry.path().join("lock").is_file() {
                if !name.starts_with('.') && fs::remove_dir(entry.path()).is_ok() {
                    out.removed.push(format!("empty state directory {name}"));
                }
                continue;
            }
            if let Some((why, _lock)) = self.stranded(&name) {
                match self.remove_leftovers(&name) {
                    Ok(()) => out.removed.push(format!("container {name} ({why})")),
                    Err(e) => out.failed.push(format!("remove container {name}: {e:#}")),
                }
            }
        }
        out
    }

    /// Removes the dead claims of `id` (`delete --force`).
    pub fn collect_claims_of(&self, id: &str) -> Collected {
        let mut out = Collected::default();
        let Ok(entries) = fs::read_dir(self.root.join(OURS)) else {
            return out;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if parse_claim(&name).is_some_and(|(_, of)| of == id) {
                out.merge(self.collect_claim(&entry.path()));
            }
        }
        out
    }

    /// A claim whose maker died between making it and renaming it into
    /// place: its lock is free and its maker gone.
    fn collect_claim(&self, dir: &Path) -> Collected {
        let mut out = Collected::default();
        let name = dir.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let Some((pid, _)) = parse_claim(&name) else { return out };
        let lock = match fs::OpenOptions::new().read(true).write(true).open(dir.join("lock")) {
            Ok(f) => match nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock) {
                Ok(l) => Some(l),
                Err(_) => return out,
            },
            Err(_) => None,
        };
        if !maker_gone(pid, dir) {
            return out;
        }
        match fs::remove_dir_all(dir) {
            Ok(()) => out.removed.push(format!("claim {}", dir.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => out.failed.push(format!("remove {}: {e}", dir.display())),
        }
        drop(lock);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_parse() {
        assert_eq!(parse_claim(".new-12-a-b"), Some((12, "a-b")));
        assert_eq!(parse_claim(".new-x-a"), None);
        assert_eq!(parse_claim("new-12-a"), None);
    }

    #[test]
    fn a_path_made_by_this_process_is_not_collected() {
        let t = tempfile::tempdir().unwrap();
        let me = std::process::id() as i32;
        assert!(!maker_gone(me, t.path()), "this process made it");
        // pid_max is at most 2^22: this pid names no process.
        assert!(maker_gone(1 << 23, t.path()));
        // pid 1 started before a path made now: it could be its maker.
        let f = t.path().join("f");
        std::fs::write(&f, "").unwrap();
        assert!(!maker_gone(1, &f));
        // This process started after a path last changed an hour ago.
        let hour_ago = nix::sys::time::TimeVal::new(
            (SystemTime::now() - Duration::from_secs(3600))
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_secs() as i64,
            0,
        );
        nix::sys::stat::utimes(&f, &hour_ago, &hour_ago).unwrap();
        assert!(
            maker_gone(me, &f),
            "a process that started after it cannot have made it"
        );
    }
}
