//! `remove_leftovers`: everything a container (whole or half-created) holds,
//! removed. Below the verbs that end a container: `delete`, a failed or
//! half-made `create`, and `gc`.

use std::fs;
use std::io::ErrorKind;
use std::path::Path;

use anyhow::{anyhow, Context, Result};
use libcontainer::container::{Container, ContainerStatus};

use super::base::{libcontainer_error, Runtime};
use super::{cgroup, freezer, host_mounts};

impl Runtime {
    /// Removes everything a container (whole or half-created) holds: its
    /// own processes (runtime/own.rs), helper processes, the cgroup
    /// directories create made, and both state directories. libcontainer's
    /// delete is not used: it kills every process in the cgroup.
    pub fn remove_leftovers(&self, id: &str) -> Result<()> {
        let dir = self.container_dir(id);
        let mut errors = Vec::new();
        let meta = self.read_meta(id);
        if let Some(meta) = &meta {
            crate::network::stop_helpers(meta);
        }
        // state.json is missing when create was killed early.
        let mut container = load_settled(&dir);
        if let Some(c) = &mut container {
            // Frozen whatever state.json says (a pause that failed to record
            // itself): a frozen process cannot die on cgroup v1.
            freezer::settle_status(c);
            if c.status() == ContainerStatus::Paused {
                self.set_freezer(id, c, libcgroups::common::FreezerState::Thawed);
            }
        }
        let own = self.own(id, container.as_ref());
        if let Err(e) = own.kill_and_wait(std::time::Duration::from_secs(10)) {
            // Its state stays, so that another `delete --force` finds what
            // is left, rather than processes and cgroups no state names.
            return Err(e).with_context(|| format!("remove container {id} (its state is kept)"));
        }
        if let Some(meta) = &meta {
            // What is left in them is not the container's: it stays, and so do they.
            if let Err(e) = cgroup::remove(&meta.cgroup_dirs) {
                tracing::warn!("{e:#}");
            }
        }
        if let Some(meta) = &meta {
            if let Some(before) = &meta.host_mounts_before {
                if let Err(e) = host_mounts::detach_new(&meta.rootfs, before) {
                    errors.push(format!("{e:#}"));
                }
            }
        }
        if let Some(c) = container {
            run_poststop(id, c);
        }
        match fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => errors.push(format!("remove {}: {e}", dir.display())),
        }
        if let Err(e) = remove_meta_dir(&self.meta_dir(id)) {
            errors.push(e);
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(anyhow!(errors.join("; ")))
        }
    }
}

/// Removes our state directory of a container with its lock file last, so
/// that a runtime killed half-way leaves either a lock (the container is
/// collected again) or an empty directory (which `gc` removes).
///
/// A create killed while its network helpers started leaves them running
/// unrecorded for a moment: they see the init gone, stop pasta and exit,
/// writing their last log lines here meanwhile. So a directory that fills
/// again while it is emptied is emptied again, for up to a second.
fn remove_meta_dir(dir: &Path) -> std::result::Result<(), String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        match empty_and_remove(dir) {
            Err((e, true)) if std::time::Instant::now() < deadline => {
                tracing::debug!("{e}; emptying it again");
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            r => return r.map_err(|(e, _)| e),
        }
    }
}

/// One pass of remove_meta_dir; an error says whether the directory was
/// found not empty at the end (written to meanwhile).
fn empty_and_remove(dir: &Path) -> std::result::Result<(), (String, bool)> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err((format!("read {}: {e}", dir.display()), false)),
    };
    let gone = |r: std::io::Result<()>, p: &Path| match r {
        Err(e) if e.kind() != ErrorKind::NotFound => Err((
            format!("remove {}: {e}", p.display()),
            e.kind() == ErrorKind::DirectoryNotEmpty,
        )),
        _ => Ok(()),
    };
    for e in entries.flatten() {
        if e.file_name() == "lock" {
            continue;
        }
        let p = e.path();
        // remove_dir_all does not follow symlinks.
        let r = if e.file_type().is_ok_and(|t| t.is_dir()) {
            fs::remove_dir_all(&p)
        } else {
            fs::remove_file(&p)
        };
        gone(r, &p)?;
    }
    gone(fs::remove_file(dir.join("lock")), &dir.join("lock"))?;
    gone(fs::remove_dir(dir), dir)
}

/// libcontainer's state of a container, if readable; a reader can catch the
/// init vanishing between two reads of /proc, so it tries again.
fn load_settled(dir: &Path) -> Option<Container> {
    for _ in 0..5 {
        match Container::load(dir.to_path_buf()) {
            Ok(c) => return Some(c),
            Err(libcontainer::error::LibcontainerError::Procfs(_)) => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(_) => return None,
        }
    }
    None
}

/// What libcontainer's delete does once the processes are gone, without its
/// cgroup-wide kill: the poststop hooks. A failing hook is a warning and the
/// next one runs, as the OCI spec says.
fn run_poststop(id: &str, mut c: Container) {
    let Ok(config) = libcontainer::config::YoukiConfig::load(&c.root) else {
        return;
    };
    let Some(hooks) = config.hooks.as_ref() else { return };
    c.set_status(ContainerStatus::Stopped);
    // One at a time: run_hooks stops at the first failure, and the spec says
    // the remaining hooks still run.
    for hook in hooks.poststop().iter().flatten() {
        let one = Some(vec![hook.clone()]);
        if let Err(e) = libcontainer::hooks::run_hooks(one.as_ref(), Some(&c.state), None, None, None) {
            tracing::warn!(
                "poststop hook {} of container {id}: {}",
                hook.path().display(),
                libcontainer_error(&e)
            );
        }
    }
}
