//! Rootless podman as the unprivileged test user runs it: the user's own
//! storage, configuration and runtime directory, all in a scratch directory
//! the user owns, the runtime registered the way a user does (a
//! containers.conf naming it under [engine.runtimes]), and the test rootfs
//! imported into that storage (no registry). Nothing of the user's real
//! home or of root's podman is read or written.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::{command_as, output_of, rootfs, shim_path, test_user};

use super::command::{at_terminal, expect_ok, text};

/// The image in the user's storage.
pub const USER_IMAGE: &str = "localhost/claude-shim-rootless:latest";

pub struct UserPodman {
    pub dir: tempfile::TempDir,
    pub uid: u32,
    pub gid: u32,
}

impl UserPodman {
    pub fn new() -> Self {
        crate::require_root();
        let (uid, gid) = test_user();
        let dir = tempfile::Builder::new()
            .prefix("claude-shim-user-podman-")
            .tempdir()
            .unwrap();
        let top = dir.path().to_path_buf();
        let top = top.as_path();
        for (sub, mode) in [("", 0o755), ("home", 0o700), ("xdg", 0o700), ("storage", 0o700)] {
            let d = top.join(sub);
            fs::create_dir_all(&d).unwrap();
            fs::set_permissions(&d, fs::Permissions::from_mode(mode)).unwrap();
            nix::unistd::chown(&d, Some(uid.into()), Some(gid.into())).unwrap();
        }
        let conf = format!(
            "[containers]\n\
             # podman's defaults exceed the hard limits an unprivileged user may set.\n\
             default_ulimits = [\"nofile=20000:20000\", \"nproc=32768:32768\"]\n\
             netns = \"none\"\n\
             [engine]\n\
             cgroup_manager = \"cgroupfs\"\n\
             events_logger = \"file\"\n\
             events_logfile_path = \"{top}/events.log\"\n\
             runtime_supports_json = [\"claude-shim\", \"runc\"]\n\
             [engine.runtimes]\n\
             claude-shim = [\"{shim}\"]\n\
             runc = [\"{runc}\"]\n",
            top = top.display(),
            shim = shim_path().display(),
            runc = which("runc").display(),
        );
        let storage = format!(
            "[storage]\ndriver = \"overlay\"\ngraphroot = \"{0}/storage/graph\"\nrunroot = \"{0}/xdg/containers\"\n",
            top.display()
        );
        for (name, body) in [("containers.conf", conf), ("storage.conf", storage)] {
            fs::write(top.join(name), body).unwrap();
        }
        let pm = Self { dir, uid, gid };
        let layer = top.join("rootfs.tar");
        let out = Command::new("tar")
            .args(["--sort=name", "--owner=0", "--group=0", "--numeric-owner", "-C"])
            .arg(rootfs())
            .arg("-cf")
            .arg(&layer)
            .arg(".")
            .output()
            .unwrap();
        assert!(out.status.success(), "tar: {}", text(&out.stderr));
        fs::set_permissions(&layer, fs::Permissions::from_mode(0o644)).unwrap();
        pm.ok(&[
            "import",
            "-q",
            "--change",
            "ENV=PATH=/usr/sbin:/usr/bin:/sbin:/bin",
            "--change",
            "CMD=[\"/bin/sh\"]",
            layer.to_str().unwrap(),
            USER_IMAGE,
        ]);
        fs::remove_file(&layer).unwrap();
        pm
    }

    /// $XDG_RUNTIME_DIR of the user's podman (the runtime's too).
    pub fn xdg(&self) -> PathBuf {
        self.dir.path().join("xdg")
    }

    /// The environment of a login session, in the scratch directory.
    fn envs(&self) -> Vec<(&'static str, PathBuf)> {
        let top = self.dir.path();
        vec![
            ("HOME", top.join("home")),
            ("XDG_RUNTIME_DIR", self.xdg()),
            ("XDG_CONFIG_HOME", top.join("home/.config")),
            ("XDG_DATA_HOME", top.join("home/.local/share")),
            ("CONTAINERS_CONF", top.join("containers.conf")),
            ("CONTAINERS_STORAGE_CONF", top.join("storage.conf")),
            ("USER", PathBuf::from("claude-shim-test")),
            ("PATH", PathBuf::from("/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")),
        ]
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = command_as(Some((self.uid, self.gid)), Path::new("podman"));
        c.env_clear().envs(self.envs()).current_dir(self.dir.path()).args(args);
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        output_of(self.command(args), self.dir.path())
    }

    pub fn ok(&self, args: &[&str]) -> String {
        expect_ok("podman (as claude-shim-test)", args, self.run(args))
    }

    /// The full id of container `name`.
    pub fn inspect_id(&self, name: &str) -> String {
        self.ok(&["inspect", "--format", "{{.Id}}", name]).trim().to_owned()
    }

    /// `podman ARGS` as the user at a terminal: exit code and what it showed.
    pub fn at_pty(&self, args: &[&str]) -> (Option<i32>, String) {
        let (uid, gid) = (format!("--reuid={}", self.uid), format!("--regid={}", self.gid));
        let mut argv = vec!["setpriv", &uid, &gid, "--clear-groups", "--", "podman"];
        argv.extend_from_slice(args);
        let envs = self.envs();
        let envs: Vec<(&str, &Path)> = envs.iter().map(|(k, v)| (*k, v.as_path())).collect();
        at_terminal(&argv, &envs, self.dir.path())
    }

    /// Every container id this podman created (from its event log).
    pub fn container_ids(&self) -> Vec<String> {
        super::podman::container_ids_in(&self.dir.path().join("events.log"))
    }

    /// Removes what the user's podman made: containers, then the image.
    pub fn teardown(&self) {
        let _ = self.run(&["rm", "--all", "--force", "--time", "0"]);
        let _ = self.run(&["rmi", "--all", "--force"]);
    }
}

impl Default for UserPodman {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for UserPodman {
    fn drop(&mut self) {
        self.teardown();
    }
}

fn which(program: &str) -> PathBuf {
    let out = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .unwrap();
    assert!(out.status.success(), "{program} is not installed: run hack/setup");
    PathBuf::from(text(&out.stdout).trim())
}
