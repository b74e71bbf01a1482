//! Harness for the engine tests: a private podman (hack/podman) or containerd
//! (hack/containerd) per test, driving the real claude-shim binary, with a
//! check at the end that the engine and the runtime left nothing behind.

use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub use crate::output_of;
use crate::{assert_gone, processes, rootfs, shim_path, unique_id, workspace};

/// Where claude-shim keeps state when an engine does not pass --root (podman).
pub const DEFAULT_ROOT: &str = "/run/claude-shim";

/// The image hack/podman and hack/containerd build from the test rootfs.
pub const IMAGE: &str = "localhost/claude-shim-test:latest";

/// The environment variable through which the tests choose an admin policy.
pub const ADMIN_POLICY_ENV: &str = "CLAUDE_SHIM_ADMIN_POLICY";

/// Writes an admin policy into `dir` (root's, 0700), readable, root's alone.
pub fn write_admin_policy(dir: &Path, toml: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("admin-policy.toml");
    fs::write(&path, toml).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    path
}

fn hack(script: &str, dir: &Path, admin_policy: Option<&Path>) {
    let mut c = Command::new(workspace().join("hack").join(script));
    c.arg(dir)
        .env("CLAUDE_SHIM", shim_path())
        .env("CLAUDE_SHIM_ROOTFS", rootfs())
        .env_remove(ADMIN_POLICY_ENV)
        .stdin(Stdio::null());
    if let Some(p) = admin_policy {
        c.env(ADMIN_POLICY_ENV, p);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "hack/{script} {} failed: {}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Asserts `out` succeeded; returns its stdout.
pub fn expect_ok(tool: &str, args: &[&str], out: Output) -> String {
    assert!(
        out.status.success(),
        "{tool} {args:?} failed with {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// What an ordinary workload sees, which must not depend on the runtime:
/// identity, limits, confinement, devices, mounts, links, whether its cgroup
/// limits can be raised, and loopback (the client retries until the
/// listener is up, and the listener's stdin stays open so that it reads the
/// message before it sees end of input: a slow machine loses nothing).
pub const WORKLOAD: &str = "id; hostname; pwd; echo $PATH; ulimit -n; \
    grep -E '^(Cap|NoNewPrivs|Seccomp:)' /proc/self/status; \
    ls /dev; cut -d' ' -f2,3 /proc/self/mounts | sort -u; \
    ip -o link | cut -d' ' -f2,3; \
    echo 50 > /sys/fs/cgroup/pids/pids.max 2>/dev/null && echo cgroup-writable || echo cgroup-read-only; \
    (sleep 10 | nc -l -p 5555 > /tmp/got &); i=0; \
    until echo over-loopback | nc 127.0.0.1 5555 2>/dev/null || [ $i -ge 50 ]; do i=$((i+1)); sleep 0.1; done; \
    i=0; until [ -s /tmp/got ] || [ $i -ge 50 ]; do i=$((i+1)); sleep 0.1; done; cat /tmp/got";

/// WORKLOAD's output under runc (`baseline`) and claude-shim (`ours`): lo up
/// and working, cgroups read-only, and the rest the same.
pub fn assert_workload_matches(baseline: &str, ours: &str) {
    assert!(ours.contains("lo: <LOOPBACK,UP,LOWER_UP>"), "lo is up:\n{ours}");
    assert!(ours.contains("over-loopback"), "127.0.0.1 works:\n{ours}");
    assert!(
        ours.contains("cgroup-read-only"),
        "cgroup limits cannot be raised:\n{ours}"
    );
    assert_eq!(baseline, ours, "runc (left) and claude-shim (right) differ");
}

/// Mount points at or under `dir`.
pub fn mounts_under(dir: &Path) -> Vec<String> {
    let prefix = dir.to_string_lossy().into_owned();
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(str::to_owned))
        .filter(|m| m == &prefix || m.starts_with(&format!("{prefix}/")))
        .collect()
}

/// Unix sockets at or under `dir`.
pub fn sockets_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let Ok(t) = e.file_type() else { continue };
            if t.is_socket() {
                out.push(e.path());
            } else if t.is_dir() {
                stack.push(e.path());
            }
        }
    }
    out
}

/// Pids and command lines of processes that mention `needle` (a private path).
pub fn processes_mentioning(needle: &str) -> Vec<(i32, String)> {
    processes()
        .into_iter()
        .filter(|p| p.mentions(needle))
        .map(|p| (p.pid, p.cmdline))
        .collect()
}

/// Removes cgroup `rel` (and its empty children) in every hierarchy; returns
/// what could not be removed.
pub fn remove_cgroup_tree(rel: &str) -> Vec<String> {
    let mut left = Vec::new();
    let Ok(hierarchies) = fs::read_dir("/sys/fs/cgroup") else {
        return left;
    };
    for h in hierarchies.flatten() {
        let top = h.path().join(rel.trim_start_matches('/'));
        if !top.is_dir() {
            continue;
        }
        let mut dirs = vec![top.clone()];
        let mut i = 0;
        while i < dirs.len() {
            if let Ok(entries) = fs::read_dir(&dirs[i]) {
                for e in entries.flatten() {
                    if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                        dirs.push(e.path());
                    }
                }
            }
            i += 1;
        }
        for d in dirs.iter().rev() {
            if let Err(e) = fs::remove_dir(d) {
                let procs = fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default();
                left.push(format!("cgroup {} ({e}; processes: {})", d.display(), procs.trim()));
            }
        }
    }
    left
}

/// Polls `f` until it returns Some or `within` is over.
pub fn wait_until<T>(within: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

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
        let log = fs::read_to_string(self.dir.path().join("events.log")).unwrap_or_default();
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

/// containerd tests run one at a time: every shim's socket, and ctr's FIFOs,
/// go under /run/containerd whatever the daemon's state directory, and the
/// leftover check looks there.
static CONTAINERD: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Entries of a directory, or none when it does not exist.
pub fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .map(|e| e.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

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

/// Runs `argv` under a pseudo-terminal (util-linux script), as a user at a
/// terminal would (its input open, nothing typed); returns the exit code and
/// what the terminal showed, without NULs and CRs.
pub fn at_terminal(argv: &[&str], envs: &[(&str, &Path)], dir: &Path) -> (Option<i32>, String) {
    let quoted: Vec<String> = argv.iter().map(|a| format!("'{}'", a.replace('\'', "'\\''"))).collect();
    let mut c = Command::new("script");
    c.args(["-qec", &quoted.join(" "), "/dev/null"])
        .env("SHELL", "/bin/sh")
        .current_dir(dir);
    for (k, v) in envs {
        c.env(k, v);
    }
    // script's stdin stays open until the command ends: at end of input
    // script hangs the terminal up, which could cut the command's output.
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take();
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    let seen = text(&out.stdout).replace(['\0', '\r'], "");
    (out.status.code(), seen)
}

/// `hack/SCRIPT stop DIR`: ends a private daemon a test started there.
pub fn stop_daemon(script: &str, dir: &Path) {
    let out = Command::new(workspace().join("hack").join(script))
        .arg("stop")
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "hack/{script} stop: {}", text(&out.stderr));
}

/// After a failed test: ends the daemon, detaches what is mounted under its
/// directory and removes its cgroups, so that later tests start clean.
pub fn tear_down(script: &str, dir: &Path, cgroup_parent: &str) {
    let _ = Command::new(workspace().join("hack").join(script))
        .arg("stop")
        .arg(dir)
        .output();
    for m in mounts_under(dir).iter().rev() {
        let _ = nix::mount::umount2(m.as_str(), nix::mount::MntFlags::MNT_DETACH);
    }
    let _ = remove_cgroup_tree(cgroup_parent);
}

/// Mounts under the daemon's directory, shim sockets that were not there
/// before it, and processes naming its directory: what a daemon and the
/// runtime it drove must not leave.
pub fn daemon_leaks(dir: &Path, shim_sockets_before: &[PathBuf]) -> Vec<String> {
    let mut leaks: Vec<String> = mounts_under(dir).into_iter().map(|m| format!("mount {m}")).collect();
    leaks.extend(
        entries(Path::new("/run/containerd/s"))
            .into_iter()
            .filter(|s| !shim_sockets_before.contains(s))
            .map(|s| format!("shim socket {}", s.display())),
    );
    leaks.extend(
        processes_mentioning(&dir.to_string_lossy())
            .into_iter()
            .map(|(pid, cmd)| format!("process {pid}: {cmd}")),
    );
    leaks
}

/// Fails the test with one line per thing `daemon` left in `dir`.
pub fn assert_nothing_left(daemon: &str, dir: &Path, leaks: &[String]) {
    assert!(
        leaks.is_empty(),
        "{daemon} in {} left behind:\n{}",
        dir.display(),
        leaks.join("\n")
    );
}
