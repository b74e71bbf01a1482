//! A private containerd for one test (one at a time), driven through ctr, and
//! the check that it and claude-shim left nothing behind.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::{assert_gone, output_of, unique_id};

use super::command::{expect_ok, text, wait_until};
use super::daemon::{hack, stop_daemon, tear_down, write_admin_policy, IMAGE};
use super::leaks::{
    assert_nothing_left, entries, mounts_under, processes_mentioning, remove_cgroup_tree, sockets_under,
};

/// containerd tests run one at a time: every shim's socket, and ctr's FIFOs,
/// go under /run/containerd whatever the daemon's state directory, and the
/// leftover check looks there.
static CONTAINERD: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A private containerd (hack/containerd) for one test: its own config, root,
/// state and sockets, the test image imported, claude-shim state under a
/// private --runc-root, and a private cgroup parent.
pub struct Containerd {
    pub dir: tempfile::TempDir,
    pub cgroup_parent: String,
    pub runc_root: PathBuf,
    ids: std::sync::Mutex<Vec<String>>,
    shim_sockets_before: Vec<PathBuf>,
    finished: bool,
    _serial: std::sync::MutexGuard<'static, ()>,
}

impl Default for Containerd {
    fn default() -> Self {
        Self::new()
    }
}

impl Containerd {
    pub fn new() -> Self {
        Self::build(None)
    }

    /// A containerd whose runtime applies the admin policy `toml`.
    pub fn with_admin_policy(toml: &str) -> Self {
        Self::build(Some(toml))
    }

    fn build(admin: Option<&str>) -> Self {
        crate::require_root();
        let serial = CONTAINERD.lock().unwrap_or_else(|e| e.into_inner());
        let shim_sockets_before = entries(Path::new("/run/containerd/s"));
        let dir = tempfile::Builder::new().prefix("claude-shim-ctrd-").tempdir().unwrap();
        let policy = admin.map(|t| write_admin_policy(dir.path(), t));
        hack("containerd", dir.path(), policy.as_deref());
        let name = dir.path().file_name().unwrap().to_string_lossy().into_owned();
        Self {
            cgroup_parent: format!("/{name}"),
            runc_root: dir.path().join("runc"),
            dir,
            ids: std::sync::Mutex::new(Vec::new()),
            shim_sockets_before,
            finished: false,
            _serial: serial,
        }
    }

    pub fn ctr(&self, args: &[&str]) -> Command {
        let mut c = Command::new("ctr");
        c.arg("--address")
            .arg(self.dir.path().join("containerd.sock"))
            .args(args)
            .current_dir(self.dir.path());
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        output_of(self.ctr(args), self.dir.path())
    }

    pub fn ok(&self, args: &[&str]) -> String {
        expect_ok("ctr", args, self.run(args))
    }

    /// A fresh container id, remembered for the leftover check.
    pub fn new_id(&self, name: &str) -> String {
        let id = unique_id(name);
        self.ids.lock().unwrap().push(id.clone());
        id
    }

    /// The arguments of `ctr run [flags] --runc-binary B ... IMAGE ID CMD...`.
    pub fn run_args(&self, binary: &str, flags: &[&str], id: &str, cmd: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = vec!["run".into()];
        v.extend(flags.iter().map(|s| s.to_string()));
        v.extend([
            "--runc-binary".into(),
            binary.into(),
            "--runc-root".into(),
            self.runc_root.to_string_lossy().into_owned(),
            "--cgroup".into(),
            format!("{}/{id}", self.cgroup_parent),
            IMAGE.into(),
            id.into(),
        ]);
        v.extend(cmd.iter().map(|s| s.to_string()));
        v
    }

    /// `ctr run` of `cmd` in container `id` under `binary`; the whole output.
    pub fn run_container(&self, binary: &str, flags: &[&str], id: &str, cmd: &[&str]) -> Output {
        let args = self.run_args(binary, flags, id, cmd);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run(&refs)
    }

    /// The task's status as `ctr task ls` shows it (RUNNING, PAUSED, STOPPED...).
    pub fn task_status(&self, id: &str) -> Option<String> {
        let out = self.run(&["task", "ls"]);
        text(&out.stdout)
            .lines()
            .find(|l| l.split_whitespace().next() == Some(id))
            .and_then(|l| l.split_whitespace().nth(2).map(str::to_owned))
    }

    pub fn task_pid(&self, id: &str) -> i32 {
        let out = self.ok(&["task", "ls"]);
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(id))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("task {id} is not listed:\n{out}"))
    }

    pub fn wait_task(&self, id: &str, status: &str) {
        wait_until(Duration::from_secs(15), &format!("task {id} to be {status}"), || {
            (self.task_status(id).as_deref() == Some(status)).then_some(())
        });
    }

    /// Asserts containerd and claude-shim left nothing: no task or container in
    /// ctr's lists, no runtime state, cgroup, mount or process of any container;
    /// then stops containerd and asserts no shim, mount, socket (here or in
    /// /run/containerd/s) or cgroup of it remains.
    pub fn finish(mut self) {
        self.finished = true;
        let tasks = self.ok(&["task", "ls", "-q"]);
        assert!(tasks.trim().is_empty(), "ctr task ls lists tasks left behind:\n{tasks}");
        let containers = self.ok(&["container", "ls", "-q"]);
        assert!(
            containers.trim().is_empty(),
            "ctr container ls lists containers left behind:\n{containers}"
        );
        let ids = self.ids.lock().unwrap().clone();
        assert!(!ids.is_empty(), "the test ran no container");
        let fifos: Vec<PathBuf> = entries(Path::new("/run/containerd/fifo"))
            .into_iter()
            .flat_map(|d| entries(&d))
            .filter(|f| ids.iter().any(|id| f.to_string_lossy().contains(id.as_str())))
            .collect();
        assert!(fifos.is_empty(), "ctr left FIFOs behind: {fifos:?}");
        for id in &ids {
            assert_gone(&self.runc_root.join("default"), id);
        }
        self.stop();
        let dir = self.dir.path();
        let mut leaks: Vec<String> = mounts_under(dir).into_iter().map(|m| format!("mount {m}")).collect();
        leaks.extend(
            sockets_under(dir)
                .into_iter()
                .map(|s| format!("socket {}", s.display())),
        );
        leaks.extend(
            entries(Path::new("/run/containerd/s"))
                .into_iter()
                .filter(|s| !self.shim_sockets_before.contains(s))
                .map(|s| format!("shim socket {}", s.display())),
        );
        leaks.extend(
            processes_mentioning(&dir.to_string_lossy())
                .into_iter()
                .map(|(pid, cmd)| format!("process {pid}: {cmd}")),
        );
        leaks.extend(remove_cgroup_tree(&self.cgroup_parent));
        assert_nothing_left("containerd", dir, &leaks);
    }

    fn stop(&self) {
        stop_daemon("containerd", self.dir.path());
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        tear_down("containerd", self.dir.path(), &self.cgroup_parent);
    }
}
