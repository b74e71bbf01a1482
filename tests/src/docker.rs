//! Harness for the Docker test: a private dockerd (hack/docker: its own
//! daemon.json, data root, exec root, socket and pidfile, no iptables, no
//! bridge, claude-shim under `runtimes`, the test rootfs imported) per test,
//! Debian's docker client, and a check at the end that nothing is left.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::engines::{
    assert_nothing_left, daemon_leaks, entries, expect_ok, remove_cgroup_tree, stop_daemon, tear_down, text,
    write_admin_policy, ADMIN_POLICY_ENV,
};
use crate::{output_of, rootfs, shim_path, workspace};

/// Debian's docker client (another may come first on PATH).
pub const DOCKER: &str = "/usr/bin/docker";

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub struct Docker {
    pub dir: tempfile::TempDir,
    pub cgroup_parent: String,
    shim_sockets_before: Vec<PathBuf>,
    finished: bool,
    _serial: std::sync::MutexGuard<'static, ()>,
}

impl Docker {
    /// A dockerd whose claude-shim applies the admin policy `admin`, if any.
    pub fn new(admin: Option<&str>) -> Self {
        Self::build(admin, None)
    }

    /// A dockerd whose runtimes are those registered in `daemon_json`
    /// (hack/install's), not the test binary.
    pub fn with_runtimes_from(daemon_json: &Path) -> Self {
        Self::build(None, Some(daemon_json))
    }

    fn build(admin: Option<&str>, runtimes_from: Option<&Path>) -> Self {
        crate::require_root();
        let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let shim_sockets_before = entries(Path::new("/run/containerd/s"));
        let dir = tempfile::Builder::new()
            .prefix("claude-shim-docker-")
            .tempdir()
            .unwrap();
        let mut c = Command::new(workspace().join("hack/docker"));
        c.arg(dir.path())
            .env("CLAUDE_SHIM", shim_path())
            .env("CLAUDE_SHIM_ROOTFS", rootfs())
            .env_remove(ADMIN_POLICY_ENV)
            .env_remove("CLAUDE_SHIM_DOCKER_RUNTIMES_FROM")
            .stdin(Stdio::null());
        if let Some(from) = runtimes_from {
            c.env("CLAUDE_SHIM_DOCKER_RUNTIMES_FROM", from);
        }
        if let Some(toml) = admin {
            c.env(ADMIN_POLICY_ENV, write_admin_policy(dir.path(), toml));
        }
        let out = output_of(c, dir.path());
        assert!(
            out.status.success(),
            "hack/docker {}: {}{}",
            dir.path().display(),
            text(&out.stdout),
            text(&out.stderr)
        );
        let name = dir.path().file_name().unwrap().to_string_lossy().into_owned();
        Self {
            cgroup_parent: format!("/{name}"),
            dir,
            shim_sockets_before,
            finished: false,
            _serial: serial,
        }
    }

    pub fn socket(&self) -> String {
        format!("unix://{}", self.dir.path().join("docker.sock").display())
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(DOCKER);
        c.env("DOCKER_CONFIG", self.dir.path().join("cli"))
            .arg("--host")
            .arg(self.socket())
            .args(args)
            .current_dir(self.dir.path());
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        output_of(self.command(args), self.dir.path())
    }

    pub fn ok(&self, args: &[&str]) -> String {
        expect_ok("docker", args, self.run(args))
    }

    /// Asserts docker and claude-shim left nothing: no container in `docker
    /// ps -a`, then (dockerd stopped) no shim, shim socket, mount, process or
    /// cgroup.
    pub fn finish(mut self) {
        let listed = self.ok(&["ps", "-a", "--format", "{{.ID}} {{.Names}} {{.Status}}"]);
        assert!(
            listed.trim().is_empty(),
            "docker ps -a lists containers left behind:\n{listed}"
        );
        // Containers only: the root also holds claude-shim's own .claude-shim.
        let state: Vec<PathBuf> = entries(&self.dir.path().join("exec/runtime-runc/moby"))
            .into_iter()
            .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
            .collect();
        assert!(state.is_empty(), "claude-shim state left behind: {state:?}");
        self.stop();
        let dir = self.dir.path();
        let mut leaks = daemon_leaks(dir, &self.shim_sockets_before);
        leaks.extend(remove_cgroup_tree(&self.cgroup_parent));
        assert_nothing_left("docker", dir, &leaks);
        self.finished = true;
    }

    fn stop(&self) {
        stop_daemon("docker", self.dir.path());
    }
}

impl Drop for Docker {
    fn drop(&mut self) {
        if !self.finished {
            tear_down("docker", self.dir.path(), &self.cgroup_parent);
        }
    }
}
