//! The probe of `verify` inside real sandboxes: a bundle hardened by hand the
//! way a policy hardens it (no capabilities, no_new_privs, the agent seccomp
//! profile of specs/seccomp, masked and read-only paths, an inverted home, a
//! workdir whose .git/config is read-only), run with `claude-shim run` and, for
//! comparison, with runc. Every check must pass under claude-shim; each negative test
//! removes one defence and asserts the checks of that defence fail.

use std::collections::BTreeMap;
use std::fs;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use claude_shim_e2e::*;
use serde_json::{json, Value};

const PROBE_PATH: &str = "/dev/.claude-shim-probe";
const HOSTNAME: &str = "claude-sandbox";
const GIT_CONFIG: &[u8] = b"[core]\n\trepositoryformatversion = 0\n";

/// Probes the agent profile must refuse with EPERM (specs/seccomp/README.md,
/// "Denied calls"), named as in verify's catalog.
const DENIED: &[&str] = &[
    "mount",
    "umount2",
    "pivot_root",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "setns",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "keyctl",
    "add_key",
    "request_key",
    "userfaultfd",
    "bpf",
    "perf_event_open",
    "open_by_handle_at",
    "ptrace(PTRACE_TRACEME)",
    "process_vm_readv",
    "process_vm_writev",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "clock_settime",
    "settimeofday",
    "adjtimex",
    "clock_adjtime",
    "acct",
    "syslog",
    "iopl",
    "ioperm",
];

/// The sandbox's seccomp profile, as the bundle crate generates it.
fn agent_profile() -> Value {
    let path = workspace().join("specs/seccomp/agent.json");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// What the sandbox must show for each probe of the syscall table.
fn syscall_expectations() -> BTreeMap<String, Value> {
    let blocked = json!({"blocked": ["EPERM"]});
    let mut m = BTreeMap::new();
    for name in DENIED {
        m.insert((*name).to_owned(), blocked.clone());
    }
    for flag in ["NEWUSER", "NEWNS", "NEWPID", "NEWNET", "NEWUTS", "NEWIPC", "NEWCGROUP"] {
        m.insert(format!("unshare(CLONE_{flag})"), blocked.clone());
        m.insert(format!("clone(CLONE_{flag})"), blocked.clone());
    }
    m.insert("unshare(CLONE_NEWTIME)".into(), blocked.clone());
    m.insert("unshare(CLONE_NEWUSER|1<<40)".into(), blocked.clone());
    m.insert("clone3".into(), json!({"blocked": ["ENOSYS"]}));
    m.insert("socket(AF_VSOCK)".into(), blocked.clone());
    m.insert("socket(AF_ALG)".into(), blocked.clone());
    m.insert("personality(ADDR_NO_RANDOMIZE)".into(), blocked);
    for allowed in [
        "fork",
        "thread",
        "socket(AF_UNIX)",
        "socket(AF_NETLINK)",
        "personality(0xffffffff)",
    ] {
        m.insert(allowed.into(), json!("allowed"));
    }
    // Raw sockets get through the filter and meet the kernel's CAP_NET_RAW
    // check (PROBES.md 22): refused either way.
    for raw in ["socket(AF_PACKET)", "socket(AF_INET,SOCK_RAW)"] {
        m.insert(raw.into(), json!({"refused": ["EPERM"]}));
    }
    m
}

fn ns_inode(kind: &str) -> u64 {
    fs::metadata(format!("/proc/self/ns/{kind}")).unwrap().ino()
}

/// The host side of a test sandbox: a workdir, a home full of secrets, a /tmp
/// with an IDE socket, an abstract socket, all of which the sandbox must
/// keep from the agent.
struct Host {
    env: Env,
    work: PathBuf,
    home: PathBuf,
    host_tmp: PathBuf,
    abstract_name: String,
    _ide: UnixListener,
    _abstract: UnixListener,
}

impl Host {
    fn new() -> Self {
        let env = Env::new();
        let d = env.dir.path().to_path_buf();
        let work = d.join("work");
        fs::create_dir_all(work.join(".git/hooks")).unwrap();
        fs::write(work.join(".git/config"), GIT_CONFIG).unwrap();
        fs::write(work.join(".git/hooks/pre-commit"), b"#!/bin/sh\n").unwrap();
        fs::write(work.join("README"), b"project\n").unwrap();
        let home = d.join("home");
        for dir in [".ssh", ".aws", ".claude"] {
            fs::create_dir_all(home.join(dir)).unwrap();
        }
        fs::write(home.join(".ssh/id_ed25519"), b"SECRET-KEY").unwrap();
        fs::write(home.join(".aws/credentials"), b"[default]\nkey=SECRET").unwrap();
        fs::write(home.join(".netrc"), b"machine example.com password SECRET").unwrap();
        fs::write(home.join(".Xauthority"), b"SECRET-COOKIE").unwrap();
        fs::write(home.join(".bashrc"), b"# rc\n").unwrap();
        fs::write(home.join(".claude/settings.json"), b"{}").unwrap();
        let host_tmp = d.join("hosttmp");
        fs::create_dir_all(&host_tmp).unwrap();
        let ide = UnixListener::bind(host_tmp.join("vscode-ipc-test.sock")).unwrap();
        let abstract_name = format!("claude-shim-verify-{}", unique_id("a"));
        let addr = SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
        let abs = UnixListener::bind_addr(&addr).unwrap();
        Self {
            env,
            work,
            home,
            host_tmp,
            abstract_name,
            _ide: ide,
            _abstract: abs,
        }
    }

    fn expectations(&self) -> Value {
        let read_only = |p: &str| json!({"path": p, "refused_with": ["EROFS"]});
        let proc_ro = |p: &str| json!({"path": p, "refused_with": ["EROFS", "EACCES"]});
        let mut exp = json!({
            "env": {
                "equals": {"IS_SANDBOX": "1", "GIT_CONFIG_SYSTEM": "/dev/null"},
                "absent": ["GITHUB_TOKEN", "ANTHROPIC_API_KEY", "SSH_AUTH_SOCK", "AWS_SECRET_ACCESS_KEY"],
                "allowed": ["PATH", "HOME", "IS_SANDBOX", "GIT_CONFIG_SYSTEM"]
            },
            "user": {"uid": 0, "gid": 0},
            "status": {"no_new_privs": 1, "seccomp": 2, "cap_inh": 0, "cap_prm": 0, "cap_eff": 0, "cap_bnd": 0, "cap_amb": 0},
            "namespaces": {
                "differ_from_host": {
                    "pid": ns_inode("pid"), "ipc": ns_inode("ipc"), "uts": ns_inode("uts"),
                    "mnt": ns_inode("mnt"), "net": ns_inode("net"), "cgroup": ns_inode("cgroup")
                },
                "hostname": HOSTNAME
            },
            "pid": {"probe_is_init": true, "host_pids": [std::process::id(), std::os::unix::process::parent_id()]},
            "tty": {
                "caller_sid": nix::unistd::getsid(None).unwrap().as_raw(),
                "probe_stdio": true,
                "host_pts_dev": fs::metadata("/dev/pts").unwrap().dev()
            },
            "paths": {
                "hidden": [
                    "/root/.ssh", "/root/.ssh/id_ed25519", "/root/.aws/credentials", "/root/.netrc",
                    "/root/.Xauthority", "/run/user", "/run/secrets", "/tmp",
                    "/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/acpi", "/proc/scsi", "/sys/firmware"
                ],
                "read_only": [
                    read_only("/"), read_only("/etc"), read_only("/bin/busybox"), read_only("/root/.bashrc"),
                    read_only("/work/.git/config"), read_only("/work/.git/hooks"),
                    read_only("/sys"),
                    proc_ro("/proc/sys/kernel/core_pattern")
                ],
                "writable": ["/tmp", "/work", "/root/.claude"]
            },
            "sockets": {"unix": ["/tmp/vscode-ipc-test.sock"], "abstract_names": [self.abstract_name]},
            "escapes": {
                "nested_userns": {"protected_file": "/work/.git/config"},
                "cgroup_release_agent": true,
                "exec_gains_nothing": true
            },
            "syscalls": syscall_expectations(),
            "network": {
                "mode": "none",
                "tamper_refused": true,
                "direct": [{"what": "loopback", "addr": "127.0.0.1:1", "refused_with": ["ECONNREFUSED"]}],
                "proxy": null
            }
        });
        // A read-only check needs a path that exists: only where this kernel has
        // sysrq (CONFIG_MAGIC_SYSRQ) does the sandbox have to protect it.
        if Path::new("/proc/sysrq-trigger").exists() {
            exp["paths"]["read_only"]
                .as_array_mut()
                .unwrap()
                .push(proc_ro("/proc/sysrq-trigger"));
        }
        exp
    }

    /// The hardened bundle, running the probe; `edit` then loosens it.
    fn bundle(&self, name: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
        let exp = self.expectations().to_string();
        self.env.bundle(name, |v| {
            set_args(v, &[PROBE_PATH, "__probe", "--expect-json", &exp]);
            v["hostname"] = json!(HOSTNAME);
            v["process"]["env"] = json!([
                "PATH=/usr/bin:/bin:/usr/sbin:/sbin",
                "HOME=/root",
                "IS_SANDBOX=1",
                "GIT_CONFIG_SYSTEM=/dev/null"
            ]);
            v["process"]["capabilities"] = json!({
                "bounding": [], "effective": [], "inheritable": [], "permitted": [], "ambient": []
            });
            v["process"]["noNewPrivileges"] = json!(true);
            v["linux"]["seccomp"] = agent_profile();
            let bind = |src: &Path, dst: &str, mode: &str| {
                json!({"destination": dst, "type": "bind", "source": src,
                       "options": ["rbind", mode, "nosuid", "nodev"]})
            };
            let tmpfs = |dst: &str, mode: &str| {
                json!({"destination": dst, "type": "tmpfs", "source": "tmpfs",
                       "options": ["nosuid", "nodev", format!("mode={mode}")]})
            };
            let null_over = |dst: &str| {
                json!({"destination": dst, "type": "bind", "source": "/dev/null", "options": ["bind", "ro", "nosuid"]})
            };
            let mounts = v["mounts"].as_array_mut().unwrap();
            // libcontainer 0.7 mounts the cgroup v1 hierarchies read-write
            // despite "ro" (runc honours it; see runc_runs_the_same_bundle...);
            // an agent needs none of them.
            mounts.retain(|m| m["type"] != "cgroup");
            mounts.extend([
                tmpfs("/tmp", "1777"),
                tmpfs("/run", "755"),
                tmpfs("/run/user", "755"),
                tmpfs("/run/secrets", "755"),
                // The home by inversion: empty, then only what the agent needs.
                tmpfs("/root", "700"),
                bind(&self.home.join(".claude"), "/root/.claude", "rw"),
                bind(&self.home.join(".bashrc"), "/root/.bashrc", "ro"),
                // /dev/null over a secret: a device node, so not nodev.
                null_over("/root/.netrc"),
                null_over("/root/.Xauthority"),
                bind(&self.work, "/work", "rw"),
                bind(&self.work.join(".git/config"), "/work/.git/config", "ro"),
                bind(&self.work.join(".git/hooks"), "/work/.git/hooks", "ro"),
                // The probe: the binary on disk, read-only, on the runtime's /dev tmpfs.
                bind(&shim_path(), PROBE_PATH, "ro"),
            ]);
            edit(v);
        })
    }
}

/// One probe run: its results by check id, in order, and how it ended.
struct Run {
    lines: Vec<Value>,
    code: Option<i32>,
    stderr: String,
}

impl Run {
    fn get(&self, check: &str) -> &Value {
        self.lines
            .iter()
            .find(|l| l["check"] == check)
            .unwrap_or_else(|| panic!("no result for {check:?}; stderr: {}", self.stderr))
    }

    fn pass(&self, check: &str) -> Option<bool> {
        self.get(check)["pass"].as_bool()
    }

    fn failures(&self) -> Vec<String> {
        self.lines
            .iter()
            .filter(|l| l["pass"] == false)
            .map(|l| format!("{} | {} | {}", l["check"], l["expected"], l["observed"]))
            .collect()
    }

    fn table(&self) -> String {
        let mut out = String::new();
        for l in &self.lines {
            let verdict = match l["pass"].as_bool() {
                Some(true) => "PASS",
                Some(false) => "FAIL",
                None => "N/A",
            };
            out += &format!(
                "{} | {} | {} | {verdict}\n",
                l["check"].as_str().unwrap(),
                l["expected"].as_str().unwrap(),
                l["observed"].as_str().unwrap()
            );
        }
        out
    }

    fn assert_all_pass(&self, runtime: &str) {
        assert_eq!(
            self.code,
            Some(0),
            "probe under {runtime} exited badly: {}",
            self.stderr
        );
        let fails = self.failures();
        assert!(
            fails.is_empty(),
            "under {runtime}, {} checks failed:\n{}\nall:\n{}",
            fails.len(),
            fails.join("\n"),
            self.table()
        );
        // Not applicable is allowed only where it cannot apply: stdout and
        // stderr are files here, not terminals.
        for l in self.lines.iter().filter(|l| l["pass"].is_null()) {
            let check = l["check"].as_str().unwrap();
            assert!(
                check == "TIOCSTI fd 1" || check == "TIOCSTI fd 2" || check == "TIOCSTI fd 0",
                "{check} is not applicable under {runtime}: {l}"
            );
            assert!(l["reason"].is_string(), "{l}");
        }
    }
}

fn parse(stdout: &[u8], code: Option<i32>, stderr: &[u8]) -> Run {
    let stdout = String::from_utf8_lossy(stdout);
    let stderr = String::from_utf8_lossy(stderr).into_owned();
    let lines = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("probe line {l:?}: {e}; stderr: {stderr}")))
        .collect();
    Run { lines, code, stderr }
}

fn under_shim(host: &Host, bundle: &Path) -> Run {
    let id = unique_id("verify");
    let out = host.env.run(&["run", "--bundle", bundle.to_str().unwrap(), &id]);
    host.env.assert_no_leaks(&id);
    assert_eq!(fs::read(host.work.join(".git/config")).unwrap(), GIT_CONFIG);
    parse(&out.stdout, out.status.code(), &out.stderr)
}

fn under_runc(host: &Host, bundle: &Path) -> Run {
    let id = unique_id("verify-runc");
    let root = host.env.dir.path().join("runc-state");
    let out_path = host.env.dir.path().join(format!("{id}.out"));
    let err_path = host.env.dir.path().join(format!("{id}.err"));
    let status = Command::new("runc")
        .arg("--root")
        .arg(&root)
        .args(["run", "--bundle", bundle.to_str().unwrap(), &id])
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out_path).unwrap())
        .stderr(fs::File::create(&err_path).unwrap())
        .status()
        .expect("runc is installed (hack/setup)");
    assert_gone(&root, &id);
    assert_eq!(fs::read(host.work.join(".git/config")).unwrap(), GIT_CONFIG);
    parse(
        &fs::read(&out_path).unwrap(),
        status.code(),
        &fs::read(&err_path).unwrap(),
    )
}

fn seccomp_checks(run: &Run) -> Vec<&Value> {
    run.lines.iter().filter(|l| l["group"] == "seccomp").collect()
}

#[test]
fn every_check_passes_under_claude_shim() {
    let host = Host::new();
    let bundle = host.bundle("hardened", |_| {});
    let run = under_shim(&host, &bundle);
    run.assert_all_pass("claude-shim");
    eprintln!("{}", run.table());
    let n_syscalls = syscall_expectations().len();
    assert_eq!(seccomp_checks(&run).len(), n_syscalls, "one result per syscall probe");
    // Spot checks of what passing means, so a PASS cannot come from nowhere.
    assert_eq!(run.get("syscall mount")["observed"], "EPERM (seccomp)");
    assert_eq!(
        run.get("syscall clone3")["observed"],
        "ENOSYS (seccomp, or not in this kernel)"
    );
    assert_eq!(run.get("syscall fork")["observed"], "succeeded");
    assert_eq!(
        run.get("nested user namespace chain")["observed"],
        "refused at unshare(NEWUSER|NEWNS): EPERM; file unchanged"
    );
    assert_eq!(run.get("read-only /work/.git/config")["observed"], "refused: EROFS");
    assert_eq!(
        run.get("hidden /root/.netrc")["observed"],
        "character device, reads empty"
    );
}

#[test]
fn runc_runs_the_same_bundle_the_same_way() {
    let host = Host::new();
    let bundle = host.bundle("runc", |_| {});
    let shim = under_shim(&host, &bundle);
    let runc = under_runc(&host, &bundle);
    shim.assert_all_pass("claude-shim");
    let differ = verdict_differences(&shim, &runc);
    assert!(differ.is_empty(), "claude-shim and runc differ:\n{}", differ.join("\n"));
    // The profile is in OCI semantics, value = mask (clone and unshare are
    // allowed when flags & 0x7E020080 == 0): runc reads it that way, and so
    // must claude-shim (guards.rs swaps the operands for libcontainer).
    assert_eq!(runc.pass("syscall personality(ADDR_NO_RANDOMIZE)"), Some(true));
    assert_eq!(runc.pass("syscall personality(0xffffffff)"), Some(true));
    assert_eq!(runc.pass("syscall unshare(CLONE_NEWUSER|1<<40)"), Some(true));
    assert_eq!(runc.pass("syscall fork"), Some(true));
    runc.assert_all_pass("runc");
}

/// Checks whose verdict differs between two runs.
fn verdict_differences(a: &Run, b: &Run) -> Vec<String> {
    let mut differ = Vec::new();
    for l in &a.lines {
        let check = l["check"].as_str().unwrap();
        let other = b.get(check);
        if other["pass"] != l["pass"] {
            differ.push(format!(
                "{check}: {} {} / {} {}",
                l["pass"], l["observed"], other["pass"], other["observed"]
            ));
        }
    }
    differ
}

/// The spec's own cgroup mount, "ro": runc mounts every v1 hierarchy
/// read-only; libcontainer 0.7 leaves them read-write, where a root process
/// creates cgroups (and could write its own limits), and claude-shim's guard
/// (guards::read_only_cgroup_v1) remounts them read-only. Both refuse with EROFS.
#[test]
fn cgroup_hierarchies_mounted_ro() {
    let host = Host::new();
    let controllers = ["memory", "pids"];
    for c in controllers {
        assert!(
            Path::new("/sys/fs/cgroup").join(c).is_dir(),
            "this test needs the cgroup v1 {c} hierarchy on the host"
        );
    }
    let mut exp = host.expectations();
    for c in controllers {
        exp["paths"]["read_only"]
            .as_array_mut()
            .unwrap()
            .push(json!({"path": format!("/sys/fs/cgroup/{c}"), "refused_with": ["EROFS"]}));
    }
    let exp = exp.to_string();
    let bundle = host.bundle("cgroup-ro", |v| {
        set_args(v, &[PROBE_PATH, "__probe", "--expect-json", &exp]);
        v["mounts"].as_array_mut().unwrap().push(json!({
            "destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
            "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]
        }));
    });
    let runc = under_runc(&host, &bundle);
    runc.assert_all_pass("runc");
    let shim = under_shim(&host, &bundle);
    shim.assert_all_pass("claude-shim");
    for c in controllers {
        let check = format!("read-only /sys/fs/cgroup/{c}");
        assert_eq!(runc.get(&check)["observed"], "refused: EROFS");
        assert_eq!(
            shim.get(&check)["observed"],
            "refused: EROFS",
            "{check} under claude-shim"
        );
    }
    let differ = verdict_differences(&shim, &runc);
    assert!(differ.is_empty(), "claude-shim / runc differ: {differ:?}");
}

#[test]
fn a_terminal_on_stdin_cannot_be_injected_into() {
    let host = Host::new();
    let bundle = host.bundle("tty", |_| {});
    let pty = nix::pty::openpty(None, None).unwrap();
    let id = unique_id("verify-tty");
    let out_path = host.env.dir.path().join("tty.out");
    let mut cmd = host.env.command(&["run", "--bundle", bundle.to_str().unwrap(), &id]);
    cmd.stdin(Stdio::from(pty.slave))
        .stdout(fs::File::create(&out_path).unwrap())
        .stderr(Stdio::piped());
    // SAFETY: setsid and ioctl are async-signal-safe; between fork and exec the
    // child makes the pty its controlling terminal, as a user's shell has.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid()?;
            if libc::ioctl(0, libc::TIOCSCTTY, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    host.env.assert_no_leaks(&id);
    let run = parse(&fs::read(&out_path).unwrap(), out.status.code(), &out.stderr);
    // The terminal is the runtime's controlling terminal; the sandbox must run
    // in a session of its own, where TIOCSTI on it is refused.
    let fd0 = run.get("TIOCSTI fd 0");
    assert_eq!(fd0["pass"], true, "{fd0}\n{}", run.table());
    assert_eq!(fd0["observed"], "refused: EPERM");
    run.assert_all_pass("claude-shim with a terminal on stdin");
    drop(pty.master);
}

fn assert_fails(run: &Run, checks: &[&str]) {
    assert_eq!(run.code, Some(0), "the probe itself must finish: {}", run.stderr);
    for check in checks {
        assert_eq!(
            run.pass(check),
            Some(false),
            "{check} should FAIL: {}\n{}",
            run.get(check),
            run.table()
        );
    }
}

#[test]
fn without_seccomp_every_blocked_syscall_fails() {
    let host = Host::new();
    let bundle = host.bundle("no-seccomp", |v| {
        v["linux"].as_object_mut().unwrap().remove("seccomp");
    });
    let run = under_shim(&host, &bundle);
    assert_fails(
        &run,
        &[
            "status Seccomp",
            "nested user namespace chain",
            "cgroup release_agent (CVE-2022-0492)",
        ],
    );
    let expectations = syscall_expectations();
    for l in seccomp_checks(&run) {
        let probe = l["check"].as_str().unwrap().trim_start_matches("syscall ");
        let blocked_by_the_filter = expectations[probe].get("blocked").is_some();
        // Only what the filter alone refused now fails: allowed calls still
        // work, and raw sockets still meet the kernel's capability check.
        assert_eq!(
            l["pass"].as_bool(),
            Some(!blocked_by_the_filter),
            "{probe}: {l}\n{}",
            run.table()
        );
        if blocked_by_the_filter {
            // Unfiltered, the call reaches the kernel, which refuses it
            // harmlessly; a syscall this kernel lacks (no CONFIG_MODULES here)
            // answers ENOSYS, which no EPERM expectation accepts.
            let observed = l["observed"].as_str().unwrap();
            assert!(
                observed.starts_with("not filtered") || observed.starts_with("ENOSYS"),
                "{probe}: {observed}"
            );
        }
    }
    // The chain got further without the filter, and still the file is intact
    // (the read-only bind holds); under_shim checked it on the host.
    let chain = run.get("nested user namespace chain")["observed"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(chain.starts_with("unshare(NEWUSER|NEWNS): ok"), "{chain}");
    assert!(chain.ends_with("file unchanged"), "{chain}");
}

#[test]
fn cap_sys_admin_in_the_bounding_set_fails_the_caps_check() {
    let host = Host::new();
    let bundle = host.bundle("cap-bnd", |v| {
        v["process"]["capabilities"]["bounding"] = json!(["CAP_SYS_ADMIN"]);
    });
    let run = under_shim(&host, &bundle);
    assert_fails(&run, &["status CapBnd"]);
    assert_eq!(run.get("status CapBnd")["observed"], "0000000000200000");
    // no_new_privs still keeps an execve from gaining it.
    assert_eq!(run.pass("status CapEff"), Some(true));
    assert_eq!(run.pass("execve gains nothing"), Some(true));
}

#[test]
fn without_no_new_privileges_the_nnp_check_fails() {
    let host = Host::new();
    let bundle = host.bundle("no-nnp", |v| {
        v["process"].as_object_mut().unwrap().remove("noNewPrivileges");
    });
    let run = under_shim(&host, &bundle);
    assert_fails(&run, &["status NoNewPrivs"]);
    assert_eq!(run.get("status NoNewPrivs")["observed"], "0");
}

#[test]
fn without_no_new_privileges_an_execve_regains_the_bounding_set() {
    let host = Host::new();
    let bundle = host.bundle("no-nnp-cap", |v| {
        v["process"].as_object_mut().unwrap().remove("noNewPrivileges");
        v["process"]["capabilities"]["bounding"] = json!(["CAP_SYS_ADMIN"]);
    });
    let run = under_shim(&host, &bundle);
    assert_fails(&run, &["status NoNewPrivs", "status CapBnd", "execve gains nothing"]);
    let observed = run.get("execve gains nothing")["observed"].as_str().unwrap().to_owned();
    assert!(observed.contains("CapEff 0000000000200000"), "{observed}");
}

#[test]
fn exposed_secrets_and_sockets_fail() {
    let host = Host::new();
    let home = host.home.clone();
    let host_tmp = host.host_tmp.clone();
    let bundle = host.bundle("exposed", |v| {
        let mounts = v["mounts"].as_array_mut().unwrap();
        // The host's /tmp instead of a fresh tmpfs, and ~/.ssh bound in.
        mounts.retain(|m| m["destination"] != "/tmp");
        mounts.push(json!({"destination": "/tmp", "type": "bind", "source": host_tmp, "options": ["rbind", "rw"]}));
        mounts.push(json!({"destination": "/root/.ssh", "type": "bind", "source": home.join(".ssh"), "options": ["rbind", "ro"]}));
        v["process"]["env"].as_array_mut().unwrap().push(json!("GITHUB_TOKEN=ghp_secret"));
    });
    let run = under_shim(&host, &bundle);
    assert_fails(
        &run,
        &[
            "hidden /root/.ssh",
            "hidden /root/.ssh/id_ed25519",
            "hidden /tmp",
            "socket /tmp/vscode-ipc-test.sock",
            "env GITHUB_TOKEN absent",
            "env allow-list",
        ],
    );
    let table = run.table();
    assert!(
        !table.contains("SECRET-KEY") && !table.contains("ghp_secret"),
        "{table}"
    );
    assert_eq!(run.get("socket /tmp/vscode-ipc-test.sock")["observed"], "connected");
}

#[test]
fn shared_namespaces_fail() {
    let host = Host::new();
    let bundle = host.bundle("shared-ns", |v| {
        let keep = ["mount", "cgroup"];
        v["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .retain(|n| keep.contains(&n["type"].as_str().unwrap()));
        v.as_object_mut().unwrap().remove("hostname");
    });
    let run = under_shim(&host, &bundle);
    assert_fails(
        &run,
        &[
            "namespace pid",
            "namespace ipc",
            "namespace uts",
            "namespace net",
            "pid 1",
            "host pids invisible",
            "hostname",
            &format!("socket @{}", host.abstract_name),
            "network none",
        ],
    );
}

#[test]
fn a_writable_protected_file_fails() {
    let host = Host::new();
    let bundle = host.bundle("writable-git", |v| {
        v["mounts"]
            .as_array_mut()
            .unwrap()
            .retain(|m| m["destination"] != "/work/.git/config" && m["destination"] != "/work/.git/hooks");
    });
    let run = under_shim(&host, &bundle);
    assert_fails(&run, &["read-only /work/.git/config", "read-only /work/.git/hooks"]);
    assert_eq!(
        run.get("read-only /work/.git/config")["observed"],
        "writable: opened for writing (nothing written)"
    );
    assert_eq!(
        fs::read_dir(host.work.join(".git/hooks")).unwrap().count(),
        1,
        "nothing left behind"
    );
}
