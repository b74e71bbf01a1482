//! A private podman for one test, and the check that it and claude-shim left
//! nothing behind.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use crate::{assert_gone, output_of};

use super::command::{expect_ok, text, wait_until};
use super::daemon::{hack, write_admin_policy};
use super::leaks::{mounts_under, processes_mentioning, remove_cgroup_tree, sockets_under};

/// Where claude-shim keeps state when an engine does not pass --root (podman).
pub const DEFAULT_ROOT: &str = "/run/claude-shim";

/// A private podman (configuration, storage and image from hack/podman) for one
/// test, with its own cgroup parent so that podman's cgroups can be checked and
/// removed too.
pub struct Podman {
    pub dir: tempfile::TempDir,
    pub cgroup_parent: String,
    finished: bool,
}

impl Default for Podman {
    fn default() -> Self {
        Self::new()
    }
}

impl Podman {
    pub fn new() -> Self {
        Self::build(None)
    }

    /// A podman whose runtime applies the admin policy `toml`.
    pub fn with_admin_policy(toml: &str) -> Self {
        Self::build(Some(toml))
    }

    fn build(admin: Option<&str>) -> Self {
        crate::require_root();
        let dir = tempfile::Builder::new()
            .prefix("claude-shim-podman-")
            .tempdir()
            .unwrap();
        let policy = admin.map(|t| write_admin_policy(dir.path(), t));
        hack("podman", dir.path(), policy.as_deref());
        let name = dir.path().file_name().unwrap().to_string_lossy().into_owned();
        Self {
            cgroup_parent: format!("/{name}"),
            dir,
            finished: false,
        }
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new("podman");
        c.env("CONTAINERS_CONF", self.dir.path().join("containers.conf"))
            .env("CONTAINERS_STORAGE_CONF", self.dir.path().join("storage.conf"))
            .current_dir(self.dir.path())
            .args(args);
        c
    }

    /// The flags every container of a test gets: the runtime, the private
    /// cgroup parent, no registry, and no podman network.
    pub fn container_flags(&self, runtime: &str) -> Vec<String> {
        vec![
            format!("--runtime={runtime}"),
            format!("--cgroup-parent={}", self.cgroup_parent),
            "--pull=never".into(),
            "--network=none".into(),
        ]
    }

    /// `podman VERB <container flags> REST...` (VERB is run or create); a
    /// --network in REST replaces the default one.
    pub fn container_command(&self, verb: &str, runtime: &str, rest: &[&str]) -> Command {
        let mut c = self.command(&[verb]);
        let own_network = rest.iter().any(|a| a.starts_with("--network"));
        c.args(
            self.container_flags(runtime)
                .into_iter()
                .filter(|f| !(own_network && f.starts_with("--network"))),
        )
        .args(rest);
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        output_of(self.command(args), self.dir.path())
    }

    pub fn ok(&self, args: &[&str]) -> String {
        expect_ok("podman", args, self.run(args))
    }

    /// `podman run` (or create) under `runtime`; the whole output.
    pub fn run_container(&self, verb: &str, runtime: &str, rest: &[&str]) -> Output {
        output_of(self.container_command(verb, runtime, rest), self.dir.path())
    }

    pub fn inspect(&self, name: &str, format: &str) -> String {
        self.ok(&["inspect", "--format", format, name]).trim().to_owned()
    }

    pub fn status(&self, name: &str) -> String {
        self.inspect(name, "{{.State.Status}}")
    }

    pub fn wait_status(&self, name: &str, status: &str) {
        wait_until(Duration::from_secs(15), &format!("{name} to be {status}"), || {
            // The container may not exist yet (a `podman run` still starting).
            let out = self.run(&["inspect", "--format", "{{.State.Status}}", name]);
            (text(&out.stdout).trim() == status).then_some(())
        });
    }

    /// Every container id this podman ever created (from its event log).
    pub fn container_ids(&self) -> Vec<String> {
        container_ids_in(&self.dir.path().join("events.log"))
    }

    /// Asserts podman and claude-shim left nothing: no container in `podman
    /// ps -a`, no runtime state, cgroup, mount or process of any container,
    /// no conmon, mount or socket under the private directory, and a cgroup
    /// parent that is empty (it is removed here).
    pub fn finish(mut self) {
        self.finished = true;
        let listed = self.ok(&["ps", "-a", "--format", "{{.ID}} {{.Names}} {{.Status}}"]);
        assert!(
            listed.trim().is_empty(),
            "podman ps -a lists containers left behind:\n{listed}"
        );
        let ids = self.container_ids();
        assert!(
            !ids.is_empty(),
            "the event log of {} names no container",
            self.dir.path().display()
        );
        self.wait_for_exit_commands();
        for id in &ids {
            assert_gone(Path::new(DEFAULT_ROOT), id);
        }
        self.teardown();
        let dir = self.dir.path();
        let mut leaks: Vec<String> = mounts_under(dir).into_iter().map(|m| format!("mount {m}")).collect();
        leaks.extend(
            sockets_under(dir)
                .into_iter()
                .map(|s| format!("socket {}", s.display())),
        );
        leaks.extend(
            processes_mentioning(&dir.to_string_lossy())
                .into_iter()
                .map(|(pid, cmd)| format!("process {pid}: {cmd}")),
        );
        leaks.extend(remove_cgroup_tree(&self.cgroup_parent));
        assert!(
            leaks.is_empty(),
            "podman in {} left behind:\n{}",
            dir.display(),
            leaks.join("\n")
        );
    }

    /// Waits for podman's own asynchronous tail: `podman rm` can return while
    /// conmon is still running the container's exit command (`podman container
    /// cleanup ID`). Those two are podman's processes, not the container's;
    /// anything of the runtime or the container is still checked at once.
    fn wait_for_exit_commands(&self) {
        let dir = self.dir.path().to_string_lossy().into_owned();
        wait_until(
            Duration::from_secs(20),
            "conmon and podman's exit commands to end",
            || {
                processes_mentioning(&dir)
                    .into_iter()
                    .all(|(_, cmd)| !(cmd.starts_with("/usr/bin/conmon ") || cmd.contains(" container cleanup ")))
                    .then_some(())
            },
        );
    }

    /// Removes containers and images (which unmounts podman's storage).
    fn teardown(&self) {
        let _ = self.run(&["rm", "--all", "--force", "--time", "0"]);
        let _ = self.run(&["rmi", "--all", "--force"]);
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        // A failed test: remove what can be removed so later tests start clean.
        self.teardown();
        for m in mounts_under(self.dir.path()).iter().rev() {
            let _ = nix::mount::umount2(m.as_str(), nix::mount::MntFlags::MNT_DETACH);
        }
        let _ = remove_cgroup_tree(&self.cgroup_parent);
    }
}

/// Every container id a podman event log (events_logger = "file") names.
pub fn container_ids_in(events_log: &Path) -> Vec<String> {
    let log = fs::read_to_string(events_log).unwrap_or_default();
    let mut ids: Vec<String> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["Type"] == "container")
        .filter_map(|v| v["ID"].as_str().map(str::to_owned))
        .collect();
    ids.sort();
    ids.dedup();
    ids
}
