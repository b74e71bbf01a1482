//! Docker rootless as the unprivileged test user runs it (issue 25):
//! hack/docker-rootless starts Docker's own dockerd-rootless.sh as that user
//! with everything in a scratch directory, claude-shim added beside runc, the
//! test rootfs imported; the user's docker client drives it. At the end the
//! daemon is stopped by its pid and nothing of it may be left: no process
//! naming its directory, no directory.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::{command_as, output_of, rootfs, shim_path, test_user, workspace};

use super::command::{at_terminal, expect_ok, text};
use super::daemon::ADMIN_POLICY_ENV;
use super::leaks::processes_mentioning;

/// Debian's docker client, as the user runs it.
const DOCKER: &str = "/usr/bin/docker";

/// One rootless dockerd at a time: each is a rootlesskit, a dockerd and a
/// containerd on a 2-core machine.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub struct UserDocker {
    /// Root's scratch directory; the daemon's own, the user's, is `daemon_dir()`.
    pub dir: tempfile::TempDir,
    pub uid: u32,
    pub gid: u32,
    finished: bool,
    _serial: std::sync::MutexGuard<'static, ()>,
}

impl UserDocker {
    /// A rootless dockerd whose claude-shim reads the admin policy `admin`
    /// (a file owned by host root), if any.
    pub fn new(admin: Option<&str>) -> Self {
        crate::require_root();
        let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let (uid, gid) = test_user();
        let dir = tempfile::Builder::new()
            .prefix("claude-shim-user-docker-")
            .tempdir()
            .unwrap();
        // The user must reach the daemon's directory inside it.
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let d = Self {
            dir,
            uid,
            gid,
            finished: false,
            _serial: serial,
        };
        let mut c = Command::new(workspace().join("hack/docker-rootless"));
        c.arg(d.daemon_dir())
            .env("CLAUDE_SHIM", shim_path())
            .env("CLAUDE_SHIM_ROOTFS", rootfs())
            .env_remove(ADMIN_POLICY_ENV)
            .stdin(Stdio::null());
        if let Some(toml) = admin {
            let path = d.dir.path().join("admin-policy.toml");
            fs::write(&path, toml).unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
            c.env(ADMIN_POLICY_ENV, path);
        }
        let out = output_of(c, d.dir.path());
        assert!(
            out.status.success(),
            "hack/docker-rootless {}: {}{}",
            d.daemon_dir().display(),
            text(&out.stdout),
            text(&out.stderr)
        );
        d
    }

    /// The daemon's scratch directory, owned by the user.
    pub fn daemon_dir(&self) -> PathBuf {
        self.dir.path().join("daemon")
    }

    /// The user's environment for the client, in the scratch directory.
    fn envs(&self) -> Vec<(&'static str, PathBuf)> {
        let d = self.daemon_dir();
        vec![
            ("HOME", d.join("home")),
            ("DOCKER_CONFIG", d.join("home/.docker")),
            (
                "DOCKER_HOST",
                PathBuf::from(format!("unix://{}", d.join("xdg/docker.sock").display())),
            ),
            ("PATH", PathBuf::from("/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")),
        ]
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = command_as(Some((self.uid, self.gid)), Path::new(DOCKER));
        c.env_clear().envs(self.envs()).current_dir(self.dir.path()).args(args);
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        output_of(self.command(args), self.dir.path())
    }

    pub fn ok(&self, args: &[&str]) -> String {
        expect_ok("docker (rootless, as claude-shim-test)", args, self.run(args))
    }

    /// `docker ARGS` as the user at a terminal: exit code and what it showed.
    pub fn at_pty(&self, args: &[&str]) -> (Option<i32>, String) {
        let (uid, gid) = (format!("--reuid={}", self.uid), format!("--regid={}", self.gid));
        let mut argv = vec!["setpriv", &uid, &gid, "--clear-groups", "--", DOCKER];
        argv.extend_from_slice(args);
        let envs = self.envs();
        let envs: Vec<(&str, &Path)> = envs.iter().map(|(k, v)| (*k, v.as_path())).collect();
        at_terminal(&argv, &envs, self.dir.path())
    }

    /// Asserts docker lists no container, stops the daemon by its pid, then
    /// asserts no process names its directory and the directory is gone.
    pub fn finish(mut self) {
        let listed = self.ok(&["ps", "-a", "--format", "{{.ID}} {{.Names}} {{.Status}}"]);
        assert!(listed.trim().is_empty(), "docker ps -a lists:\n{listed}");
        self.stop();
        self.finished = true;
        let d = self.daemon_dir();
        let left = processes_mentioning(&d.to_string_lossy());
        assert!(left.is_empty(), "processes of the rootless dockerd are left: {left:?}");
        assert!(!d.exists(), "{} is left", d.display());
    }

    fn stop(&self) {
        let out = Command::new(workspace().join("hack/docker-rootless"))
            .arg("stop")
            .arg(self.daemon_dir())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "hack/docker-rootless stop: {}", text(&out.stderr));
    }
}

impl Drop for UserDocker {
    fn drop(&mut self) {
        if !self.finished {
            let _ = Command::new(workspace().join("hack/docker-rootless"))
                .arg("stop")
                .arg(self.daemon_dir())
                .output();
        }
    }
}
