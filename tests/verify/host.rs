//! The host side of a test sandbox (a workdir, a home of secrets, sockets) and
//! the hardened bundle that runs the probe in it, with the expectations it is
//! held to; each test loosens the bundle through an edit.

use std::fs;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::{Path, PathBuf};

use claude_shim_e2e::*;
use serde_json::{json, Value};

use crate::expect::{agent_profile, ns_inode, syscall_expectations};

pub(crate) const PROBE_PATH: &str = "/dev/.claude-shim-probe";
const HOSTNAME: &str = "claude-sandbox";
pub(crate) const GIT_CONFIG: &[u8] = b"[core]\n\trepositoryformatversion = 0\n";

/// The host side of a test sandbox: a workdir, a home full of secrets, a /tmp
/// with an IDE socket, an abstract socket, all of which the sandbox must
/// keep from the agent.
pub(crate) struct Host {
    pub(crate) env: Env,
    pub(crate) work: PathBuf,
    pub(crate) home: PathBuf,
    pub(crate) host_tmp: PathBuf,
    pub(crate) abstract_name: String,
    _ide: UnixListener,
    _abstract: UnixListener,
}

impl Host {
    pub(crate) fn new() -> Self {
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

    pub(crate) fn expectations(&self) -> Value {
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
                "writable": ["/tmp", "/work", "/root/.claude"],
                "pinned": []
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
    pub(crate) fn bundle(&self, name: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
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
            // A cgroup namespace as the policy compiler always gives one
            // (bundle/compile/linux.rs): `spec`'s template, like runc's,
            // leaves it out on a v1 or hybrid host.
            let ns = v["linux"]["namespaces"].as_array_mut().unwrap();
            if !ns.iter().any(|n| n["type"] == "cgroup") {
                ns.push(json!({"type": "cgroup"}));
            }
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
