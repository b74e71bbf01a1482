//! verify's probe (the same static binary, verb `__probe`) inside a container
//! started standalone, by podman and by containerd, all three under the same
//! admin policy: every check passes in each, and each check observes the
//! same thing in each, so an engine-started sandbox is the standalone one.

use std::collections::BTreeMap;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{SocketAddr, UnixListener};

use claude_shim_e2e::engines::*;
use claude_shim_e2e::*;
use serde_json::{json, Value};

const PROBE_PATH: &str = "/dev/.claude-shim-probe";

fn ns_inode(kind: &str) -> u64 {
    std::fs::metadata(format!("/proc/self/ns/{kind}")).unwrap().ino()
}

/// What an agent sandbox under the default admin policy (`version = 1`)
/// shows from inside, whoever started it: no capability, no_new_privs, the
/// agent filter, namespaces of its own, kernel paths masked or read-only,
/// loopback only. (ctr's spec mounts no cgroup filesystem, so the read-only
/// cgroup limits are checked by the workload tests, not here.)
fn expectations(abstract_name: &str) -> Value {
    let blocked = json!({"blocked": ["EPERM"]});
    let mut syscalls = BTreeMap::new();
    for name in [
        "mount",
        "umount2",
        "pivot_root",
        "open_tree",
        "move_mount",
        "fsopen",
        "setns",
        "io_uring_setup",
        "keyctl",
        "add_key",
        "userfaultfd",
        "bpf",
        "perf_event_open",
        "open_by_handle_at",
        "process_vm_readv",
        "init_module",
        "kexec_load",
        "reboot",
        "clock_settime",
        "unshare(CLONE_NEWUSER)",
        "unshare(CLONE_NEWUSER|1<<40)",
        "unshare(CLONE_NEWNS)",
        "clone(CLONE_NEWUSER)",
        "clone(CLONE_NEWNET)",
        "socket(AF_VSOCK)",
        "socket(AF_ALG)",
        "personality(ADDR_NO_RANDOMIZE)",
        "ioctl(TIOCSTI)",
        "ioctl(TIOCSETD)",
        "modify_ldt",
        "socket(AF_NETLINK,NETLINK_KOBJECT_UEVENT)",
        // The engine's profile admits i386: its rules and the agent's must
        // hold through int 0x80 too.
        "socket(AF_VSOCK) via int 0x80",
        "unshare(CLONE_NEWUSER) via int 0x80",
        "ioctl(TIOCSTI) via int 0x80",
        "ioctl(TIOCSETD) via int 0x80",
        "modify_ldt via int 0x80",
        "socket(AF_NETLINK,NETLINK_KOBJECT_UEVENT) via int 0x80",
    ] {
        syscalls.insert(name.to_owned(), blocked.clone());
    }
    syscalls.insert("clone3".to_owned(), json!({"blocked": ["ENOSYS"]}));
    // Allowed by the engine's profile, made ENOSYS by the socketcall guard.
    syscalls.insert(
        "socketcall(SYS_SOCKET) via int 0x80".to_owned(),
        json!({"blocked": ["ENOSYS"]}),
    );
    for allowed in ["fork", "thread", "socket(AF_UNIX)", "socket(AF_NETLINK,NETLINK_ROUTE)"] {
        syscalls.insert(allowed.to_owned(), json!("allowed"));
    }
    let read_only = |p: &str, errnos: &[&str]| json!({"path": p, "refused_with": errnos});
    json!({
        "env": {"equals": {}, "absent": ["GITHUB_TOKEN", "ANTHROPIC_API_KEY", "SSH_AUTH_SOCK"], "allowed": null},
        "user": {"uid": 0, "gid": 0},
        "status": {"no_new_privs": 1, "seccomp": 2, "cap_inh": 0, "cap_prm": 0, "cap_eff": 0, "cap_bnd": 0, "cap_amb": 0},
        "namespaces": {
            "differ_from_host": {
                "pid": ns_inode("pid"), "ipc": ns_inode("ipc"), "uts": ns_inode("uts"),
                "mnt": ns_inode("mnt"), "net": ns_inode("net")
            },
            "hostname": null
        },
        "pid": {"probe_is_init": true, "host_pids": [std::process::id()]},
        "tty": {"caller_sid": null, "probe_stdio": true, "host_pts_dev": std::fs::metadata("/dev/pts").unwrap().dev()},
        "paths": {
            "hidden": ["/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/acpi", "/proc/scsi", "/sys/firmware", "/run/secrets"],
            "read_only": [
                read_only("/sys", &["EROFS"]),
                read_only("/proc/sys/kernel/core_pattern", &["EROFS", "EACCES"])
            ],
            "writable": [],
            "pinned": []
        },
        "sockets": {"unix": [], "abstract_names": [abstract_name]},
        "escapes": {"nested_userns": null, "cgroup_release_agent": true, "exec_gains_nothing": true},
        "syscalls": syscalls,
        "network": {
                "mode": "none",
                "tamper_refused": true,
                "direct": [{"what": "loopback", "addr": "127.0.0.1:1", "refused_with": ["ECONNREFUSED"]}],
                "proxy": null
            }
    })
}

/// The probe's lines by check: (pass, observed).
fn results(runner: &str, out: &std::process::Output) -> BTreeMap<String, (Value, String)> {
    assert_eq!(
        out.status.code(),
        Some(0),
        "probe under {runner}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let mut m = BTreeMap::new();
    for line in text(&out.stdout).lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{runner}: probe line {line:?}: {e}"));
        let check = v["check"].as_str().unwrap().to_owned();
        // A namespace's inode and the file behind stdio belong to one run;
        // everything else a check observes must be the same everywhere.
        let observed = if check.starts_with("namespace ") {
            "(this run's namespace)".to_owned()
        } else if check.starts_with("TIOCSTI") {
            "(this run's stdio)".to_owned()
        } else {
            v["observed"].as_str().unwrap_or_default().to_owned()
        };
        m.insert(check, (v["pass"].clone(), observed));
    }
    assert!(
        m.len() > 40,
        "{runner}: only {} checks ran:\n{}",
        m.len(),
        text(&out.stdout)
    );
    let failed: Vec<String> = m
        .iter()
        .filter(|(_, (pass, _))| pass == &json!(false))
        .map(|(c, (_, o))| format!("{c}: {o}"))
        .collect();
    assert!(
        failed.is_empty(),
        "under {runner}, checks failed:\n{}",
        failed.join("\n")
    );
    for (check, (pass, _)) in &m {
        assert!(
            pass == &json!(true) || check.starts_with("TIOCSTI"),
            "{check} is not applicable under {runner}"
        );
    }
    m
}

#[test]
fn the_probe_sees_the_same_sandbox_standalone_under_podman_and_under_containerd() {
    const ADMIN: &str = "version = 1\n";
    let abstract_name = format!("claude-shim-engines-{}", unique_id("a"));
    let _listener =
        UnixListener::bind_addr(&SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap()).unwrap();
    let exp = expectations(&abstract_name).to_string();
    let shim = shim_path();
    let probe_cmd = [PROBE_PATH, "__probe", "--expect-json", exp.as_str()];

    // Standalone: runc's sample spec, the probe bound in read-only.
    let env = Env::new();
    let policy = write_admin_policy(env.dir.path(), ADMIN);
    let bundle = env.bundle("probe", |v| {
        set_args(v, &probe_cmd);
        v["mounts"].as_array_mut().unwrap().push(json!({
            "destination": PROBE_PATH, "type": "bind", "source": shim,
            "options": ["bind", "ro", "nosuid", "nodev"]
        }));
    });
    let id = unique_id("probe");
    let mut c = env.command(&["run", "--bundle", bundle.to_str().unwrap(), &id]);
    c.env(ADMIN_POLICY_ENV, &policy);
    let standalone = results("claude-shim run", &output_of(c, env.dir.path()));
    env.assert_no_leaks(&id);

    // podman.
    let pm = Podman::with_admin_policy(ADMIN);
    let volume = format!("{}:{PROBE_PATH}:ro", shim.display());
    let mut rest = vec!["--rm", "-v", &volume, IMAGE];
    rest.extend(probe_cmd);
    let podman = results("podman", &pm.run_container("run", "claude-shim", &rest));
    pm.finish();

    // containerd.
    let cd = Containerd::with_admin_policy(ADMIN);
    let id = cd.new_id("probe");
    let mount = format!("type=bind,src={},dst={PROBE_PATH},options=rbind:ro", shim.display());
    let ctr = results(
        "containerd",
        &cd.run_container("claude-shim", &["--rm", "--mount", &mount], &id, &probe_cmd),
    );
    cd.finish();

    for (runner, seen) in [("podman", &podman), ("containerd", &ctr)] {
        let differ: Vec<String> = standalone
            .iter()
            .filter(|(check, r)| seen.get(*check) != Some(r))
            .map(|(check, r)| format!("{check}: standalone {r:?}, {runner} {:?}", seen.get(check)))
            .collect();
        assert!(
            differ.is_empty(),
            "the probe under {runner} differs:\n{}",
            differ.join("\n")
        );
        assert_eq!(seen.len(), standalone.len(), "{runner} ran other checks");
    }
    eprintln!(
        "{} checks pass, with the same observations, standalone, under podman and under containerd",
        standalone.len()
    );
}

/// Without an admin policy, podman's own profile (containers-common, for
/// `--cap-drop ALL`: socket rules on the family and protocol, socketcall
/// allowed) must hold through `int 0x80` too: claude-shim puts its
/// socketcall guard in front of the profile's program, loaded as runc loads
/// the profile (no no_new_privs imposed).
#[test]
fn podmans_own_profile_holds_through_int_0x80() {
    let abstract_name = format!("claude-shim-engines-{}", unique_id("a"));
    let exp = expectations(&abstract_name).to_string();
    let probe_cmd = [PROBE_PATH, "__probe", "--expect-json", exp.as_str()];
    let pm = Podman::new();
    let volume = format!("{}:{PROBE_PATH}:ro", shim_path().display());
    let mut rest = vec!["--rm", "--cap-drop", "ALL", "-v", &volume, IMAGE];
    rest.extend(probe_cmd);
    let out = pm.run_container("run", "claude-shim", &rest);
    pm.finish();
    // Rows of the agent sandbox that podman's profile does not share fail
    // here (the probe exits 1); only these two are the point.
    let mut rows = BTreeMap::new();
    for line in text(&out.stdout).lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("probe line {line:?}: {e}"));
        rows.insert(v["check"].as_str().unwrap().to_owned(), v);
    }
    let socketcall = &rows["syscall socketcall(SYS_SOCKET) via int 0x80"];
    assert_eq!(socketcall["pass"], json!(true), "{socketcall}");
    assert!(
        socketcall["observed"].as_str().unwrap().starts_with("ENOSYS"),
        "{socketcall}"
    );
    let nnp = &rows["status NoNewPrivs"];
    assert_eq!(nnp["observed"], json!("0"), "as under runc: {nnp}");
}
