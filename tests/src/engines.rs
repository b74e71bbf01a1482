//! Harness for the engine tests: a private podman (hack/podman), containerd
//! (hack/containerd) or rootless dockerd (hack/docker-rootless) per test,
//! driving the real claude-shim binary, with a check at the end that the
//! engine and the runtime left nothing behind.

mod command;
mod containerd;
mod daemon;
mod leaks;
mod podman;
mod user_docker;
mod user_podman;
mod workload;

pub use crate::output_of;

pub use command::{at_terminal, expect_ok, same_as_runc, text, wait_until};
pub use containerd::Containerd;
pub use daemon::{stop_daemon, tear_down, write_admin_policy, ADMIN_POLICY_ENV, IMAGE};
pub use leaks::{
    assert_nothing_left, daemon_leaks, entries, mounts_under, processes_mentioning, remove_cgroup_tree, sockets_under,
};
pub use podman::{Podman, DEFAULT_ROOT};
pub use user_docker::UserDocker;
pub use user_podman::{UserPodman, USER_IMAGE};
pub use workload::{assert_workload_matches, WORKLOAD};
