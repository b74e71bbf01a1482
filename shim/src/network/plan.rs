//! The network plan of a container: what `prepare` decided from the spec's
//! annotations, saved as <state>/network.json by `attach` and read back by
//! the helpers. Below everything that makes or reads it.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::policy::{Mode, Policy, RawPolicy};

/// What a container's network is to be; saved as <state>/network.json for the helpers.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub mode: Mode,
    pub policy: RawPolicy,
    /// The runtime is unprivileged: enter the container's user namespace to act on its network.
    #[serde(default)]
    pub join_user: bool,
    /// The spec joins a network namespace by path (a pod's, made by the CRI
    /// and wired by CNI): its interfaces are not ours to remove.
    #[serde(default)]
    pub joined: bool,
    #[serde(default)]
    pub pasta: Option<PathBuf>,
    #[serde(default)]
    pub nft: Option<PathBuf>,
    /// `claude-shim claude`'s API gateway: its upstream URL and the server
    /// tools it lets through (allowlist mode only).
    #[serde(default)]
    pub gateway: Option<super::gateway::Config>,
    /// The ports published on the host's loopback, as (host port, port inside).
    #[serde(default)]
    pub publish: Vec<(u16, u16)>,
    /// The run's working directory (annotation `run.claude-shim.workdir`),
    /// which the proxy log names so that a kept log is found by project.
    #[serde(default)]
    pub workdir: Option<PathBuf>,
    /// Unprivileged: where the createContainer hook sends the container's namespaces.
    #[serde(skip)]
    pub(super) ns_socket: Option<std::os::fd::OwnedFd>,
    /// The listening sockets on 127.0.0.1 of `publish`, in its order, bound
    /// before the container exists so that a taken port refuses it.
    #[serde(skip)]
    pub(super) published: Vec<std::os::fd::OwnedFd>,
}

impl Plan {
    pub fn load(state_dir: &Path) -> Result<Self> {
        let path = state_dir.join("network.json");
        let raw = fs::read(&path).with_context(|| format!("read {}", path.display()))?;
        serde_json::from_slice(&raw).with_context(|| format!("parse {}", path.display()))
    }

    pub(super) fn save(&self, state_dir: &Path) -> Result<()> {
        let path = state_dir.join("network.json");
        fs::write(&path, serde_json::to_vec_pretty(self)?).with_context(|| format!("write {}", path.display()))
    }

    pub fn policy(&self) -> Result<Policy> {
        Ok(Policy::parse(&self.policy)?)
    }
}
