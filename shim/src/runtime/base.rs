//! The `Runtime` type and what every verb shares, in the place of youki's
//! `container/container.rs`: the state layout under the root, meta.json and
//! the effective spec, the per-id lock, loading a container, and the words
//! the verbs' errors use. Each verb adds its own `impl Runtime` in a file
//! named after it (create.rs, start.rs, kill.rs...), building on this file
//! and on the helpers; nothing here calls a verb.
//!
//! Named `base`: `runtime.rs` would repeat its module's name (clippy's
//! module_inception), `core` would shadow the core crate, and `container`
//! is the libcontainer type every verb loads.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use libcgroups::common::CgroupManager;
use libcontainer::container::{Container, ContainerStatus};
use libcontainer::oci_spec::runtime::{LinuxNamespaceType, Spec};
use nix::fcntl::{Flock, FlockArg};

use super::cgroup::cgroup_manager;
use super::kernel::{has_new_namespace, in_user_ns, is_root};
use super::{creator, own};
use crate::state::Meta;

/// Our directory under the root; never a valid container id.
pub(super) const OURS: &str = ".claude-shim";

pub struct Runtime {
    pub root: PathBuf,
    /// The link to the init this process created, until it hands it over.
    pub(super) creator: std::cell::RefCell<Option<(String, creator::Link)>>,
    /// `--systemd-cgroup`: containers in transient systemd scopes (cgroup v2).
    pub systemd_cgroup: bool,
}

/// A held per-id lock; released when dropped (or when the process dies).
pub struct IdLock(#[expect(dead_code, reason = "held for its lock")] pub(super) Flock<fs::File>);

pub fn validate_id(id: &str) -> Result<()> {
    if id.is_empty() {
        bail!("use an empty container id: ids are 1 or more of [A-Za-z0-9_+.-]");
    }
    // `bin`: <root>/.claude-shim/bin holds `claude --per-command`'s shell
    // entry, where a container's state directory of that name would go.
    if id == "." || id == ".." || id == OURS || id == "bin" {
        bail!("use container id {id:?}: it is reserved");
    }
    if let Some(c) = id.chars().find(|c| !(c.is_ascii_alphanumeric() || "_+-.".contains(*c))) {
        bail!("use container id {id:?}: it holds {c:?}; ids are made of [A-Za-z0-9_+.-]");
    }
    Ok(())
}

impl Runtime {
    /// The state root: `--root`, or runc's defaults under our name.
    pub fn new(root: Option<&Path>, systemd_cgroup: bool) -> Result<Self> {
        let root = match root {
            Some(r) => r.to_path_buf(),
            None => default_root(),
        };
        Ok(Self {
            root,
            creator: Default::default(),
            systemd_cgroup,
        })
    }

    pub fn container_dir(&self, id: &str) -> PathBuf {
        self.root.join(id)
    }

    pub fn meta_dir(&self, id: &str) -> PathBuf {
        self.root.join(OURS).join(id)
    }

    pub fn exists(&self, id: &str) -> bool {
        self.container_dir(id).exists() || self.meta_dir(id).exists()
    }

    pub fn read_meta(&self, id: &str) -> Option<Meta> {
        let raw = fs::read(self.meta_dir(id).join("meta.json")).ok()?;
        serde_json::from_slice(&raw).ok()
    }

    pub fn write_meta(&self, id: &str, meta: &Meta) -> Result<()> {
        let path = self.meta_dir(id).join("meta.json");
        let tmp = path.with_extension("json.tmp");
        fs::write(&tmp, serde_json::to_vec(meta)?).with_context(|| format!("write {}", tmp.display()))?;
        crate::replace::replace(&tmp, &path).with_context(|| format!("write {}", path.display()))
    }

    /// The effective spec libcontainer runs, as written at create.
    pub fn effective_spec(&self, id: &str) -> Result<Spec> {
        let path = self.meta_dir(id).join("config.json");
        Spec::load(&path).with_context(|| format!("read {}", path.display()))
    }

    pub(super) fn try_lock(&self, id: &str) -> Result<Option<IdLock>> {
        let path = self.meta_dir(id).join("lock");
        let file = match fs::OpenOptions::new().read(true).write(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("open {}", path.display())),
        };
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => Ok(Some(IdLock(lock))),
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                bail!("use container {id}: it is being created by another process")
            }
            Err((_, e)) => Err(e).with_context(|| format!("lock {}", path.display())),
        }
    }

    /// A container whose create finished: state.json with a pid.
    pub(super) fn is_complete(&self, id: &str) -> bool {
        match Container::load(self.container_dir(id)) {
            Ok(c) => c.pid().is_some() && c.status() != ContainerStatus::Creating,
            Err(_) => false,
        }
    }

    /// What tells the container's own processes from others.
    pub(super) fn own(&self, id: &str, c: Option<&Container>) -> own::Container {
        let meta = self.read_meta(id).unwrap_or_default();
        let spec = self.effective_spec(id).ok();
        own::Container {
            id: id.to_owned(),
            init: c.and_then(|c| c.pid()).map(|p| p.as_raw()),
            init_start: meta.init_start,
            cgroup_path: spec
                .as_ref()
                .and_then(|s| s.linux().as_ref().and_then(|l| l.cgroups_path().clone())),
            own_pid_ns: spec
                .as_ref()
                .is_some_and(|s| has_new_namespace(s, LinuxNamespaceType::Pid)),
            own_cgroup: meta.cgroup_own.then_some(meta.cgroup_dirs),
        }
    }

    /// Freezes or thaws the container's cgroup (pause left it frozen).
    pub(super) fn set_freezer(&self, id: &str, c: &Container, state: libcgroups::common::FreezerState) {
        let Ok(config) = c.spec() else { return };
        if let Ok(m) = cgroup_manager(&config.cgroup_path, id, c.systemd()) {
            if let Err(e) = m.freeze(state) {
                tracing::debug!("set the freezer of container {id}: {e}");
            }
        }
    }

    /// Loads a container, or says it does not exist.
    pub fn load(&self, id: &str) -> Result<Container> {
        validate_id(id)?;
        let dir = self.container_dir(id);
        if !dir.join("state.json").exists() {
            bail!("find container {id}: it does not exist");
        }
        // libcontainer rewrites state.json in place; a reader can catch it half-written.
        let mut tries = 0;
        loop {
            match Container::load(dir.clone()) {
                Ok(mut c) => {
                    // Paused is what the freezer holds, as runc reads it.
                    super::freezer::settle_status(&mut c);
                    return Ok(c);
                }
                // A `delete` removed it between the check above and the read.
                Err(_) if !dir.join("state.json").exists() => {
                    bail!("find container {id}: it does not exist")
                }
                Err(e) if tries < 5 => {
                    tries += 1;
                    tracing::debug!("retrying state of {id}: {e}");
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                Err(e) => bail!("load container {id}: {e}"),
            }
        }
    }
}

/// Where state goes without `--root`, as runc chooses it: root of the
/// initial user namespace keeps /run; anyone else, including uid 0 in a user
/// namespace an engine made (rootless podman passes no --root and cannot
/// write /run), uses $XDG_RUNTIME_DIR. runc leaves a namespace's root whose
/// $USER says root (a container's own root) on /run; so does this.
fn default_root() -> PathBuf {
    let xdg = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| Path::new(d).is_dir());
    let namespace_root = is_root() && in_user_ns() && std::env::var_os("USER").is_none_or(|u| u != "root");
    match xdg {
        Some(dir) if !is_root() || namespace_root => Path::new(&dir).join("claude-shim"),
        _ if is_root() => PathBuf::from("/run/claude-shim"),
        _ => std::env::temp_dir().join(format!("claude-shim-{}", nix::unistd::geteuid())),
    }
}

pub fn status_name(s: ContainerStatus) -> &'static str {
    match s {
        ContainerStatus::Creating => "creating",
        ContainerStatus::Created => "created",
        ContainerStatus::Running => "running",
        ContainerStatus::Stopped => "stopped",
        ContainerStatus::Paused => "paused",
    }
}

/// libcontainer's errors nest their cause; show the whole chain on one line.
/// The init's own error arrives wrapped twice ("exec process failed with
/// error error in executing process : <chain>"); the chain is what matters.
pub fn libcontainer_error(e: &dyn std::error::Error) -> String {
    const WRAP: &str = "exec process failed with error error in executing process : ";
    let mut parts: Vec<String> = Vec::new();
    let mut next: Option<&dyn std::error::Error> = Some(e);
    while let Some(err) = next {
        let text = err.to_string().replace(WRAP, "");
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = err.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_runc_rules() {
        for ok in ["abc", "a.b-c_d+e", "0"] {
            validate_id(ok).unwrap();
        }
        for bad in ["", "../x", "a/b", ".", "..", ".claude-shim", "bin", "a b"] {
            assert!(validate_id(bad).is_err(), "{bad}");
        }
    }
}
