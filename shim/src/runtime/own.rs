//! The container's own processes, for `kill` and `delete --force`: never a
//! process that is not the container's. A cgroup can hold processes put there
//! from outside (or, with a cgroupsPath of `//`, the whole machine), so it is
//! the container's own processes that are signalled:
//! - with a pid namespace of its own, those in it (SIGKILL to the init ends
//!   them all, by the kernel);
//! - without one, those in its cgroup only when `create` made that cgroup for
//!   it (runtime/cgroup.rs);
//! - otherwise its init alone.
//!
//! Every signal goes through a pidfd opened before the process is checked, so
//! a recycled pid is never hit.

use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::network::process::{pidfd_open, pidfd_signal, start_time, wait_exit};

/// What tells the container's processes from others.
pub struct Container {
    pub id: String,
    /// The init's pid, from libcontainer's state.
    pub init: Option<i32>,
    /// The init's start time, recorded at create; without it the init is
    /// recognised by its cgroup.
    pub init_start: Option<u64>,
    /// The cleaned cgroupsPath, to recognise the init without a start time.
    pub cgroup_path: Option<PathBuf>,
    /// The container has a pid namespace of its own (not joined by path).
    pub own_pid_ns: bool,
    /// The cgroup directories `create` made, when it made every one of them.
    pub own_cgroup: Option<Vec<PathBuf>>,
}

/// nsfs' ioctl for a pid namespace's parent (linux/nsfs.h: _IO(0xb7, 0x2)).
const NS_GET_PARENT: libc::c_ulong = 0xb702;

impl Container {
    /// A pidfd on the init, if its pid still names the container's init.
    pub fn init_fd(&self) -> Option<OwnedFd> {
        let pid = self.init.filter(|p| *p > 0)?;
        let fd = pidfd_open(pid).ok()?;
        // Checked after opening: from here on the pidfd names this process.
        let same = match (self.init_start, &self.cgroup_path) {
            (Some(start), _) => start_time(pid) == Some(start),
            (None, Some(cgroup)) => {
                let cgroup = cgroup.to_string_lossy();
                fs::read_to_string(format!("/proc/{pid}/cgroup"))
                    .is_ok_and(|t| t.lines().any(|l| l.ends_with(cgroup.as_ref())))
            }
            (None, None) => false,
        };
        same.then_some(fd)
    }

    /// The container's processes now, each as a pidfd (the init first).
    fn members(&self) -> Vec<OwnedFd> {
        if self.own_pid_ns {
            let Some(init) = self.init_fd() else { return Vec::new() };
            // An unprivileged runtime may not read a non-dumpable init's
            // namespaces: then the init alone (whose SIGKILL ends them all).
            let Some(ns) = self.init.and_then(|p| ns_id(&format!("/proc/{p}/ns/pid"))) else {
                return vec![init];
            };
            let mut out = vec![init];
            for pid in all_pids() {
                if Some(pid) == self.init {
                    continue;
                }
                let Ok(fd) = pidfd_open(pid) else { continue };
                if in_pid_ns(pid, ns) {
                    out.push(fd);
                }
            }
            return out;
        }
        if let Some(dirs) = &self.own_cgroup {
            let mut pids: Vec<i32> = dirs.iter().flat_map(|d| super::cgroup::procs(d)).collect();
            pids.sort_unstable();
            pids.dedup();
            return pids.into_iter().filter_map(|p| pidfd_open(p).ok()).collect();
        }
        self.init_fd().into_iter().collect()
    }

    /// Sends `sig` to the init, if it is still the container's.
    pub fn signal_init(&self, sig: libc::c_int) -> Result<bool> {
        let Some(fd) = self.init_fd() else { return Ok(false) };
        match pidfd_signal(&fd, sig) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(false),
            Err(e) => bail!("signal the init of container {} ({sig}): {e}", self.id),
        }
    }

    /// Sends `sig` to every process of the container (`kill --all`).
    pub fn signal_all(&self, sig: libc::c_int) {
        if !self.own_pid_ns && self.own_cgroup.is_none() {
            tracing::warn!(
                "container {} has neither a pid namespace of its own nor a cgroup made for it: only its init is signalled",
                self.id
            );
        }
        for fd in self.members() {
            let _ = pidfd_signal(&fd, sig);
        }
    }

    /// SIGKILLs every process of the container and waits until they are gone
    /// (`delete --force`). With its own pid namespace the init's end is the
    /// end of all: the kernel kills the rest before the init is gone.
    pub fn kill_and_wait(&self, within: Duration) -> Result<()> {
        let deadline = Instant::now() + within;
        loop {
            let members = self.members();
            // An exited process waiting to be reaped (the init of a create
            // that failed is this process's own child) counts as gone: its
            // pidfd is readable, and /proc still lists it until its parent
            // waits for it.
            if members.iter().all(|fd| wait_exit(fd, Duration::ZERO)) {
                return Ok(());
            }
            for fd in &members {
                let _ = pidfd_signal(fd, libc::SIGKILL);
            }
            for fd in &members {
                let left = deadline.saturating_duration_since(Instant::now());
                wait_exit(fd, left.max(Duration::from_millis(1)));
            }
            if Instant::now() >= deadline {
                bail!("end the processes of container {}: some outlived SIGKILL", self.id);
            }
        }
    }
}

fn all_pids() -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect()
}

/// A namespace's identity: the device and inode of its nsfs file.
fn ns_id(path: &str) -> Option<(u64, u64)> {
    fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Whether `pid`'s pid namespace is `ns` or nested below it.
fn in_pid_ns(pid: i32, ns: (u64, u64)) -> bool {
    let Ok(mut file) = fs::File::open(format!("/proc/{pid}/ns/pid")) else {
        return false;
    };
    for _ in 0..33 {
        let Ok(m) = file.metadata() else { return false };
        if (m.dev(), m.ino()) == ns {
            return true;
        }
        // SAFETY: NS_GET_PARENT takes no argument and returns a new descriptor.
        let parent = unsafe { libc::ioctl(file.as_raw_fd(), NS_GET_PARENT) };
        if parent < 0 {
            return false;
        }
        // SAFETY: the kernel just returned this descriptor to us.
        file = unsafe { fs::File::from_raw_fd(parent) };
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_in_its_own_pid_namespace_and_not_in_a_child_one() {
        let me = std::process::id() as i32;
        let ns = ns_id("/proc/self/ns/pid").unwrap();
        assert!(in_pid_ns(me, ns));
        assert!(!in_pid_ns(me, (ns.0, ns.1 + 1)));
    }

    #[test]
    fn an_init_is_recognised_by_its_start_time_only() {
        let me = std::process::id() as i32;
        let mut c = Container {
            id: "x".into(),
            init: Some(me),
            init_start: start_time(me),
            cgroup_path: None,
            own_pid_ns: false,
            own_cgroup: None,
        };
        assert!(c.init_fd().is_some());
        c.init_start = c.init_start.map(|s| s + 1);
        assert!(c.init_fd().is_none(), "a recycled pid is not the init");
        c.init_start = None;
        assert!(c.init_fd().is_none(), "nothing to recognise it by");
    }
}
