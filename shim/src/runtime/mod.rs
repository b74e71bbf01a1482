//! The container runtime: the only module that talks to libcontainer. It owns
//! the state directory, adapts each spec through `guards` before libcontainer
//! sees it, and drives the lifecycle (create, start, kill, delete, exec...).
//!
//! State layout under the root (default /run/claude-shim):
//!   <root>/<id>/               libcontainer's container directory (state.json...)
//!   <root>/.claude-shim/<id>/  ours: the effective config.json libcontainer
//!                              reads, meta.json (the engine's bundle, helper
//!                              pids), and a lock held while `create` runs.
//!
//! Laid out as youki's libcontainer `container/`: base.rs holds the `Runtime`
//! type and what every verb shares, each verb adds its `impl Runtime` in a
//! file named after it (create.rs, start.rs, kill.rs, delete.rs...), and the
//! helpers below them keep a concern each (cgroups, devices, guards...). This
//! file only declares the modules and re-exports what the commands use.

pub mod apparmor;
mod base;
pub mod cgroup;
pub mod cgroup_userns;
pub mod cgroup_v1_unprivileged;
pub mod cgroup_v2;
mod check_bundle;
mod copy_up_tests;
mod create;
pub mod creator;
mod delete;
pub mod devices;
pub mod events;
mod exec;
pub mod executor;
pub mod foreground;
pub mod freezer;
#[cfg(test)]
mod fuzz;
pub mod gc;
pub mod guards;
pub mod host_mounts;
mod kernel;
mod kill;
mod leftovers;
pub mod loopback;
pub mod own;
mod pause;
pub mod pid_file;
mod ps;
pub mod seccomp_cache;
mod start;
pub mod started;
mod state;
pub mod unknown_caps;
mod update;
pub mod validate;

pub use self::base::Runtime;
pub use self::create::{Adapt, CreateRequest};
pub use self::exec::ExecRequest;
