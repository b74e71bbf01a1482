//! Harness for the end-to-end tests: the real `claude-shim` binary (built once
//! by hack/test, shared by every test), the busybox rootfs from hack/rootfs,
//! bundles in temporary directories, and a check after every test that nothing
//! leaked: no state, cgroup, mount or process is left behind.
//!
//! Tests need root and the kernel features a container needs; where they are
//! missing a test fails, it never skips.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub mod background;
pub mod claude_world;
pub mod cri;
pub mod docker;
pub mod engine_files;
pub mod engines;
pub mod oracle;
pub use background::Background;
pub use claude_shim_mock_api as mock_api;

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The binary under test: $CLAUDE_SHIM, or the release build.
pub fn shim_path() -> PathBuf {
    let p = std::env::var_os("CLAUDE_SHIM")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/x86_64-unknown-linux-gnu/release/claude-shim"));
    assert!(
        p.is_file(),
        "claude-shim binary {} is missing: run hack/test (or cargo build --release)",
        p.display()
    );
    p
}

/// The test rootfs: $CLAUDE_SHIM_ROOTFS, or target/rootfs from hack/rootfs.
pub fn rootfs() -> PathBuf {
    let p = std::env::var_os("CLAUDE_SHIM_ROOTFS")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/rootfs"));
    assert!(
        p.join("bin/busybox").is_file(),
        "rootfs {} is missing: run hack/rootfs",
        p.display()
    );
    p
}

/// Why `path` cannot be seen inside an agent sandbox, if it cannot: the
/// sandbox has its own /tmp, /var/tmp and /run (and an empty home), so a
/// binary there is not the host's. hack/test stages the binary and the rootfs
/// under /var/lib, where a sandbox and the test user both reach them.
pub fn hidden_in_a_sandbox(path: &Path) -> Option<String> {
    ["/tmp", "/var/tmp", "/run"]
        .iter()
        .find(|d| path.starts_with(d))
        .map(|d| format!("{} is under {d}, which a sandbox replaces with its own: run the tests through hack/test (it stages the binary under /var/lib) or set CLAUDE_SHIM to a copy elsewhere", path.display()))
}

/// Why the test user cannot reach `path`, if it cannot: a directory on the
/// way that others may not enter (a 0700 home directory holding the clone).
pub fn unreachable_by_others(path: &Path) -> Option<String> {
    path.ancestors().skip(1).find_map(|d| {
        let mode = fs::metadata(d).ok()?.permissions().mode();
        (mode & 0o001 == 0).then(|| {
            format!(
                "{} is inside {} (mode {:o}), which claude-shim-test cannot enter: run the tests through hack/test (it stages the binary and the rootfs under /var/lib) or set CLAUDE_SHIM and CLAUDE_SHIM_ROOTFS to copies elsewhere",
                path.display(),
                d.display(),
                mode & 0o7777
            )
        })
    })
}

/// `s` as one word of a POSIX shell command line (a path with spaces).
pub fn shell_word(s: impl AsRef<std::ffi::OsStr>) -> String {
    format!("'{}'", s.as_ref().to_string_lossy().replace('\'', "'\\''"))
}

pub fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "end-to-end tests run as root (hack/test does)"
    );
}

/// A unique container id for a test.
/// `program` as the caller, or as `user` (uid, gid) with no supplementary
/// groups, through util-linux's setpriv.
pub fn command_as(user: Option<(u32, u32)>, program: &Path) -> Command {
    let Some((uid, gid)) = user else {
        return Command::new(program);
    };
    if let Some(why) = unreachable_by_others(program) {
        panic!("{why}");
    }
    let mut c = Command::new("setpriv");
    c.args([
        format!("--reuid={uid}"),
        format!("--regid={gid}"),
        "--clear-groups".into(),
    ]);
    c.arg("--").arg(program);
    c
}

/// Sets SIGINT's and SIGHUP's disposition for the spawned process.
pub fn with_dispositions(c: &mut Command, handler: nix::sys::signal::SigHandler) {
    use std::os::unix::process::CommandExt;
    // SAFETY: signal(2) is async-signal-safe and touches only the child.
    unsafe {
        c.pre_exec(move || {
            for s in [nix::sys::signal::Signal::SIGINT, nix::sys::signal::Signal::SIGHUP] {
                nix::sys::signal::signal(s, handler).map_err(std::io::Error::from)?;
            }
            Ok(())
        });
    }
}

pub fn unique_id(name: &str) -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    format!("t-{name}-{}-{n}", std::process::id())
}

/// A state root for one test, so tests never see each other's containers.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    /// Run the binary as this uid (rootless tests); None is root.
    pub as_user: Option<(u32, u32)>,
}

impl Default for Env {
    fn default() -> Self {
        Self::new()
    }
}

impl Env {
    pub fn new() -> Self {
        require_root();
        let dir = tempfile::Builder::new().prefix("claude-shim-e2e-").tempdir().unwrap();
        let root = dir.path().join("state");
        Self {
            dir,
            root,
            as_user: None,
        }
    }

    /// An environment whose commands run as an unprivileged user.
    pub fn as_user(uid: u32, gid: u32) -> Self {
        if let Some(why) = unreachable_by_others(&rootfs()) {
            panic!("{why}");
        }
        let mut env = Self::new();
        fs::set_permissions(env.dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        fs::create_dir(&env.root).unwrap();
        nix::unistd::chown(&env.root, Some(uid.into()), Some(gid.into())).unwrap();
        // The user's own ~/.local (HOME is the test's directory, root's):
        // claude-shim keeps its state directory (the quarantine) below it.
        let local = env.dir.path().join(".local");
        fs::create_dir(&local).unwrap();
        nix::unistd::chown(&local, Some(uid.into()), Some(gid.into())).unwrap();
        env.as_user = Some((uid, gid));
        env
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = command_as(self.as_user, &shim_path());
        if self.as_user.is_some() {
            c.env("XDG_RUNTIME_DIR", &self.root);
            c.env("HOME", self.dir.path());
        }
        c.arg("--root").arg(&self.root).args(args);
        c
    }

    /// Runs to completion with stdin closed; returns the output. stdout and
    /// stderr go through files, not pipes: a container started by `create` or
    /// `run -d` keeps the runtime's stdio open for as long as it runs.
    pub fn run(&self, args: &[&str]) -> Output {
        output_of(self.command(args), self.dir.path())
    }

    /// Runs and asserts success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "claude-shim {args:?} failed with {:?}\nstdout: {}\nstderr: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs and asserts a one-line error, runc's exit status for a failure
    /// (255 for `exec`, 1 otherwise) and no panic; returns the line.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let code = if args.first() == Some(&"exec") { 255 } else { 1 };
        assert_eq!(
            out.status.code(),
            Some(code),
            "claude-shim {args:?} should fail with {code}; stderr: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "claude-shim {args:?} panicked: {stderr}");
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.contains("warning:")).collect();
        assert_eq!(
            lines.len(),
            1,
            "claude-shim {args:?} should print one error line, got: {stderr:?}"
        );
        assert!(
            lines[0].starts_with("claude-shim: error: failed to "),
            "error line {:?} should read 'failed to ...'",
            lines[0]
        );
        lines[0].to_owned()
    }

    pub fn state(&self, id: &str) -> Value {
        serde_json::from_str(&self.ok(&["state", id])).unwrap()
    }

    pub fn status(&self, id: &str) -> String {
        self.state(id)["status"].as_str().unwrap().to_owned()
    }

    /// Polls until the container reaches `status`.
    pub fn wait_status(&self, id: &str, status: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            // The container may not exist yet (a `run` still starting).
            let out = self.run(&["state", id]);
            let s = serde_json::from_slice::<Value>(&out.stdout)
                .map(|v| v["status"].as_str().unwrap_or_default().to_owned())
                .unwrap_or_else(|_| "absent".to_owned());
            if s == status {
                return;
            }
            assert!(Instant::now() < deadline, "container {id} stayed {s}, never {status}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A fresh bundle directory: config.json from `claude-shim spec`, edited by `edit`.
    pub fn bundle(&self, name: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
        let dir = self.dir.path().join(format!("bundle-{name}"));
        fs::create_dir_all(&dir).unwrap();
        if let Some((uid, gid)) = self.as_user {
            nix::unistd::chown(&dir, Some(uid.into()), Some(gid.into())).unwrap();
        }
        let mut spec_args = vec!["spec", "--bundle", dir.to_str().unwrap()];
        if self.as_user.is_some() {
            spec_args.push("--rootless");
        }
        let out = self.command(&spec_args).output().unwrap();
        assert!(out.status.success(), "spec: {}", String::from_utf8_lossy(&out.stderr));
        let path = dir.join("config.json");
        let mut v: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        v["root"] = serde_json::json!({"path": rootfs(), "readonly": true});
        v["process"]["terminal"] = Value::Bool(false);
        edit(&mut v);
        fs::write(&path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
        if let Some((uid, gid)) = self.as_user {
            fs::set_permissions(self.dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
            for p in [&dir, &path] {
                nix::unistd::chown(p, Some(uid.into()), Some(gid.into())).unwrap();
            }
        }
        dir
    }

    /// Asserts nothing of container `id` is left anywhere.
    pub fn assert_no_leaks(&self, id: &str) {
        assert_gone(&self.root, id);
    }
}

/// Runs a command to completion with stdin closed; stdout and stderr go
/// through files in `scratch`, not pipes: a container started by `create` or
/// `run -d` keeps the runtime's stdio open for as long as it runs.
pub fn output_of(mut cmd: Command, scratch: &Path) -> Output {
    let out_path = scratch.join(format!("{}.out", unique_id("o")));
    let err_path = out_path.with_extension("err");
    let status = cmd
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out_path).unwrap())
        .stderr(fs::File::create(&err_path).unwrap())
        .status()
        .unwrap();
    let output = Output {
        status,
        stdout: fs::read(&out_path).unwrap(),
        stderr: fs::read(&err_path).unwrap(),
    };
    let _ = fs::remove_file(&out_path);
    let _ = fs::remove_file(&err_path);
    output
}

pub fn set_args(v: &mut Value, args: &[&str]) {
    v["process"]["args"] = serde_json::json!(args);
}

/// Everything a container can leave behind, checked by its id.
pub fn assert_gone(root: &Path, id: &str) {
    let mut leaks = Vec::new();
    for dir in [root.join(id), root.join(".claude-shim").join(id)] {
        if dir.exists() {
            leaks.push(format!("state directory {}", dir.display()));
        }
    }
    if let Ok(entries) = fs::read_dir(root.join(".claude-shim")) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.contains(id) {
                leaks.push(format!("state entry {}", e.path().display()));
            }
        }
    }
    if let Ok(controllers) = fs::read_dir("/sys/fs/cgroup") {
        for c in controllers.flatten() {
            let mut stack = vec![c.path()];
            while let Some(d) = stack.pop() {
                let Ok(entries) = fs::read_dir(&d) else { continue };
                for e in entries.flatten() {
                    if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                        if e.file_name().to_string_lossy().contains(id) {
                            leaks.push(format!("cgroup {}", e.path().display()));
                        }
                        if stack.len() < 64 {
                            stack.push(e.path());
                        }
                    }
                }
            }
        }
    }
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    for line in mountinfo.lines().filter(|l| l.contains(id)) {
        leaks.push(format!("mount {line}"));
    }
    for p in processes_of(id) {
        leaks.push(format!("process {}: {}", p.pid, p.describe()));
    }
    assert!(leaks.is_empty(), "container {id} left behind:\n{}", leaks.join("\n"));
}

/// A process as the leak checks see it.
pub struct Proc {
    pub pid: i32,
    /// The command line, arguments joined by spaces.
    pub cmdline: String,
    pub cgroup: String,
}

impl Proc {
    /// Whether the command line mentions `needle`, not counting the test
    /// harness itself (cargo, the test binaries), whose arguments name ids.
    pub fn mentions(&self, needle: &str) -> bool {
        self.cmdline.contains(needle) && !self.cmdline.contains("cargo") && !self.cmdline.contains("claude_shim_e2e")
    }

    /// The command line and the pids cgroup, for a leak report.
    pub fn describe(&self) -> String {
        let cgroup = self
            .cgroup
            .lines()
            .find(|l| l.contains("pids") || l.starts_with("0::"))
            .unwrap_or("");
        format!("{} (cgroup {cgroup})", self.cmdline.trim())
    }
}

/// Every process but this one.
pub fn processes() -> Vec<Proc> {
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if pid == std::process::id() as i32 {
            continue;
        }
        let cmdline = fs::read(e.path().join("cmdline")).unwrap_or_default();
        out.push(Proc {
            pid,
            cmdline: String::from_utf8_lossy(&cmdline).replace('\0', " "),
            cgroup: fs::read_to_string(e.path().join("cgroup")).unwrap_or_default(),
        });
    }
    out
}

/// Live processes whose cgroup or command line names `id`. A zombie has
/// ended and holds nothing but its pid; reaping it is its parent's job (here
/// PID 1, which may be slow), and on a hybrid host it still names its removed
/// cgroup2 cgroup ("0::/ID (deleted)").
pub fn processes_of(id: &str) -> Vec<Proc> {
    processes()
        .into_iter()
        .filter(|p| p.cgroup.contains(id) || p.mentions(id))
        .filter(|p| !is_zombie(p.pid))
        .collect()
}

fn is_zombie(pid: i32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.starts_with('Z')))
        .unwrap_or(false)
}

/// Waits for a file to appear (a pid file, a marker).
pub fn wait_for_file(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !path.exists() {
        assert!(Instant::now() < deadline, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What claude-shim keeps in its state root on purpose, between runs: the
/// shared caches (rootfs skeletons, the `.env` and root-only indexes).
pub fn is_kept_cache(name: &str) -> bool {
    ["rootfs-", ".env-index-", ".root-only-index-"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// The unprivileged user the rootless tests run as (created by hack/setup).
pub fn test_user() -> (u32, u32) {
    let out = Command::new("id").args(["-u", "claude-shim-test"]).output().unwrap();
    assert!(out.status.success(), "user claude-shim-test is missing: run hack/setup");
    let uid: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let out = Command::new("id").args(["-g", "claude-shim-test"]).output().unwrap();
    let gid: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    (uid, gid)
}

/// A console socket like an engine's: receives the pty master of a container process.
pub struct ConsoleServer {
    listener: std::os::unix::net::UnixListener,
    pub path: PathBuf,
}

impl ConsoleServer {
    pub fn new(dir: &Path) -> Self {
        let path = dir.join(format!("console-{}.sock", unique_id("c")));
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        Self { listener, path }
    }

    /// The pty master, as a File.
    pub fn receive(&self) -> fs::File {
        use std::os::fd::{AsRawFd, FromRawFd};
        let (stream, _) = self.listener.accept().unwrap();
        let mut buf = [0u8; 1024];
        let mut iov = [std::io::IoSliceMut::new(&mut buf)];
        let mut space = nix::cmsg_space!([std::os::fd::RawFd; 1]);
        let msg = nix::sys::socket::recvmsg::<()>(
            stream.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            nix::sys::socket::MsgFlags::empty(),
        )
        .unwrap();
        for cmsg in msg.cmsgs().unwrap() {
            if let nix::sys::socket::ControlMessageOwned::ScmRights(fds) = cmsg {
                // SAFETY: the descriptor was just received and is ours.
                return unsafe { fs::File::from_raw_fd(fds[0]) };
            }
        }
        panic!("no pty master received on {}", self.path.display());
    }
}

/// Reads from a pty master until `needle` shows up or the time is over.
pub fn read_until(master: &mut fs::File, needle: &str, within: Duration) -> String {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let deadline = Instant::now() + within;
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    while !seen.contains(needle) && Instant::now() < deadline {
        let mut fds = [nix::poll::PollFd::new(
            std::os::fd::AsFd::as_fd(master),
            nix::poll::PollFlags::POLLIN,
        )];
        let _ = master.as_raw_fd();
        if nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(100u16)).unwrap_or(0) == 0 {
            continue;
        }
        match master.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
        }
    }
    seen
}

/// Adds a tmpfs at /tmp (the shared rootfs is read-only).
pub fn with_tmp(v: &mut Value) {
    v["mounts"].as_array_mut().unwrap().push(serde_json::json!({
        "destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=1777"]
    }));
}

/// A peer "runtime" for `verify --runtime`: runc on a copy of the bundle whose
/// config.json went through `jq_filter` (a sandbox loosened on purpose, so
/// verify must fail it). Handles `--root R run --bundle B ID` and passes
/// everything else (`delete --force`) to runc.
pub fn loosened_runc(dir: &Path, name: &str, jq_filter: &str) -> PathBuf {
    let path = dir.join(name);
    let script = format!(
        "#!/bin/sh\n# --root R run --bundle B ID  |  --root R delete --force ID\n\
         if [ \"$3\" = run ]; then b=$5; l=$(mktemp -d); cp -a \"$b\"/. \"$l\"/;\n\
         jq '{jq_filter}' \"$b/config.json\" > \"$l/config.json\";\n\
         runc --root \"$2\" run --bundle \"$l\" \"$6\"; s=$?; rm -rf \"$l\"; exit $s; fi\nexec runc \"$@\"\n"
    );
    fs::write(&path, script).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    path
}
