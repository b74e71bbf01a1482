//! The record claude-shim keeps about a container beside libcontainer's own
//! state (meta.json in its state directory). A layer below both the runtime,
//! which writes it at create, and the network helpers and admin policy, which
//! fill parts of it; so the arrows between those modules point one way.

use std::collections::HashMap;
use std::path::PathBuf;

use libcontainer::oci_spec::runtime::LinuxSeccomp;
use serde::{Deserialize, Serialize};

/// What the runtime keeps about a container beside libcontainer's state.
#[derive(Serialize, Deserialize, Debug, Default, Clone)]
pub struct Meta {
    /// The bundle the engine or user gave; libcontainer only sees our copy.
    pub bundle: PathBuf,
    /// The rootfs, absolute.
    pub rootfs: PathBuf,
    /// Processes claude-shim started beside the container (pasta, proxy), by name.
    #[serde(default)]
    pub helpers: HashMap<String, i32>,
    /// The admin policy applied at create (shim/src/admin.rs), if any; exec'd
    /// processes are held to it too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_policy: Option<PathBuf>,
    /// Seccomp filters every process of the container loads on top of the
    /// spec's own (the admin policy's), already adapted for libcontainer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stacked_seccomp: Vec<LinuxSeccomp>,
    /// Each helper's start time (/proc/<pid>/stat field 22), so that a pid
    /// reused by another process is never taken for the helper.
    #[serde(default)]
    pub helper_starts: HashMap<String, u64>,
    /// The cgroup directories `create` made for the container, recorded
    /// before they are made: only these are ever removed, and removing one
    /// never signals anything (runtime/cgroup.rs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cgroup_dirs: Vec<PathBuf>,
    /// `create` made every one of the container's cgroup directories: the
    /// cgroup is the container's own, and `kill --all` of a container without
    /// a pid namespace may signal through it.
    #[serde(default)]
    pub cgroup_own: bool,
    /// The init's start time, so that a recycled pid is never taken for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_start: Option<u64>,
    /// The runtime process that created the container, as (pid, start
    /// time). A foreground runtime (`run` without --detach, `sandbox`) never
    /// hands the container over: it lives and dies with its owner, and `gc`
    /// collects a container whose owner is gone and that was not handed over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<(i32, u64)>,
    /// `create` (or `run --detach`) finished and handed the container to its
    /// engine: it outlives the runtime, and only `delete` removes it.
    #[serde(default)]
    pub handed_over: bool,
    /// Without a mount namespace of its own: the mounts at or under the rootfs
    /// before create (runtime/host_mounts.rs); `delete` detaches the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_mounts_before: Option<Vec<u64>>,
    /// Created with `--systemd-cgroup`: the cgroup is a systemd scope.
    #[serde(default)]
    pub systemd_cgroup: bool,
}
