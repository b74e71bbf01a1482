//! The one bundle every OCI runtime runs: a skeleton rootfs whose /usr and /etc
//! are the host's, read-only (as claude-shim's sandbox shows the host), the
//! generated source tree bind-mounted read-write at its host path, and the
//! bench binary's directory read-only so the probes run inside. Variants differ
//! only in the process, the seccomp profile, the network namespace and the
//! annotations (claude-shim's network mode).

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::{json, Value};

/// runc's default capability set (`runc spec`), the same for every runtime.
pub const CAPS: &[&str] = &["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"];

/// The directories the rootfs shares with the host.
pub struct Layout {
    pub rootfs: PathBuf,
    /// Read-only bind mounts from the host: /usr, /etc, and the top-level
    /// directories that are not links into /usr on this host.
    pub ro_dirs: Vec<PathBuf>,
    /// Read-write at the same path inside.
    pub tree: PathBuf,
    /// The bench binary's directory, read-only at the same path inside.
    pub bin_dir: PathBuf,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Net {
    /// A new, empty network namespace (loopback only), made by the runtime.
    Own,
    /// This existing namespace (one pasta is attached to).
    Path(PathBuf),
    /// No network namespace in the spec: the runtime's own (runsc --network=host
    /// started inside a prepared namespace).
    Inherit,
}

pub struct Variant<'a> {
    pub args: Vec<String>,
    pub cwd: String,
    pub seccomp: Option<&'a Value>,
    pub net: Net,
    pub annotations: BTreeMap<String, String>,
}

impl<'a> Variant<'a> {
    pub fn new(args: Vec<String>) -> Self {
        Self {
            args,
            cwd: "/".into(),
            seccomp: None,
            net: Net::Own,
            annotations: BTreeMap::new(),
        }
    }
}

/// Builds the rootfs skeleton: mount points, and the host's top-level links
/// into /usr copied as links (merged /usr) or bound when they are directories.
pub fn prepare_rootfs(rootfs: &Path, tree: &Path, bin_dir: &Path) -> Result<Layout> {
    let _ = fs::remove_dir_all(rootfs);
    for d in ["usr", "etc", "proc", "dev", "sys", "tmp", "run", "root"] {
        fs::create_dir_all(rootfs.join(d)).with_context(|| format!("create {}", rootfs.join(d).display()))?;
    }
    let mut ro_dirs = vec![PathBuf::from("/usr"), PathBuf::from("/etc")];
    for top in ["bin", "sbin", "lib", "lib32", "lib64", "libx32"] {
        let host = Path::new("/").join(top);
        let inside = rootfs.join(top);
        match fs::symlink_metadata(&host) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = fs::read_link(&host).with_context(|| format!("read link {}", host.display()))?;
                symlink(&target, &inside).with_context(|| format!("create link {}", inside.display()))?;
            }
            Ok(m) if m.is_dir() => {
                fs::create_dir_all(&inside).with_context(|| format!("create {}", inside.display()))?;
                ro_dirs.push(host);
            }
            _ => {}
        }
    }
    for p in [tree, bin_dir] {
        let inside = rootfs.join(p.strip_prefix("/").unwrap_or(p));
        fs::create_dir_all(&inside).with_context(|| format!("create {}", inside.display()))?;
    }
    Ok(Layout {
        rootfs: rootfs.to_path_buf(),
        ro_dirs,
        tree: tree.to_path_buf(),
        bin_dir: bin_dir.to_path_buf(),
    })
}

fn bind(src: &Path, rw: bool) -> Value {
    json!({
        "destination": src, "type": "bind", "source": src,
        "options": ["rbind", if rw { "rw" } else { "ro" }, "nosuid", "nodev"]
    })
}

/// The config.json of one variant: runc's defaults (`runc spec`) plus the layout.
pub fn config(layout: &Layout, v: &Variant) -> Value {
    let mut mounts = vec![
        json!({"destination": "/proc", "type": "proc", "source": "proc"}),
        json!({"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
               "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]}),
        json!({"destination": "/dev/pts", "type": "devpts", "source": "devpts",
               "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]}),
        json!({"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
               "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]}),
        json!({"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue",
               "options": ["nosuid", "noexec", "nodev"]}),
        json!({"destination": "/sys", "type": "sysfs", "source": "sysfs",
               "options": ["nosuid", "noexec", "nodev", "ro"]}),
        json!({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
               "options": ["nosuid", "nodev", "mode=1777"]}),
    ];
    mounts.extend(layout.ro_dirs.iter().map(|d| bind(d, false)));
    mounts.push(bind(&layout.tree, true));
    mounts.push(bind(&layout.bin_dir, false));

    let mut namespaces = vec![
        json!({"type": "pid"}),
        json!({"type": "ipc"}),
        json!({"type": "uts"}),
        json!({"type": "mount"}),
    ];
    match &v.net {
        Net::Own => namespaces.push(json!({"type": "network"})),
        Net::Path(p) => namespaces.push(json!({"type": "network", "path": p})),
        Net::Inherit => {}
    }
    let mut linux = json!({
        "namespaces": namespaces,
        "maskedPaths": ["/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
                        "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi"],
        "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"],
    });
    if let Some(s) = v.seccomp {
        linux["seccomp"] = s.clone();
    }
    let mut spec = json!({
        "ociVersion": "1.0.2",
        "process": {
            "terminal": false,
            "user": {"uid": 0, "gid": 0},
            "args": v.args,
            "env": ["PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME=/root", "TERM=xterm"],
            "cwd": v.cwd,
            "capabilities": {"bounding": CAPS, "effective": CAPS, "permitted": CAPS},
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}],
            "noNewPrivileges": true
        },
        "root": {"path": layout.rootfs, "readonly": true},
        "hostname": "bench",
        "mounts": mounts,
        "linux": linux,
    });
    if !v.annotations.is_empty() {
        spec["annotations"] = json!(v.annotations);
    }
    spec
}

/// What `runc spec --rootless` changes in `runc spec`'s bundle, for a caller
/// that is `uid`:`gid` on the host: a user namespace mapping root to it, no
/// network namespace (an unprivileged user gets no veth), /sys bound from
/// the host (sysfs cannot be mounted without owning the network namespace)
/// and no `gid=` for devpts (the group is not mapped).
pub fn rootless(config: &mut Value, uid: u32, gid: u32) {
    let linux = &mut config["linux"];
    if let Some(ns) = linux["namespaces"].as_array_mut() {
        ns.retain(|n| n["type"] != "network");
        ns.push(json!({"type": "user"}));
    }
    linux["uidMappings"] = json!([{"containerID": 0, "hostID": uid, "size": 1}]);
    linux["gidMappings"] = json!([{"containerID": 0, "hostID": gid, "size": 1}]);
    for m in config["mounts"].as_array_mut().into_iter().flatten() {
        if m["destination"] == "/sys" {
            *m = json!({"destination": "/sys", "type": "none", "source": "/sys",
                        "options": ["rbind", "nosuid", "noexec", "nodev", "ro"]});
        } else if let Some(opts) = m["options"].as_array_mut() {
            opts.retain(|o| !o.as_str().is_some_and(|o| o.starts_with("gid=")));
        }
    }
}

pub fn write_config(dir: &Path, config: &Value) -> Result<PathBuf> {
    fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let path = dir.join("config.json");
    let text = serde_json::to_vec_pretty(config)?;
    fs::write(&path, text).with_context(|| format!("write {}", path.display()))?;
    Ok(dir.to_path_buf())
}

pub fn write(dir: &Path, layout: &Layout, v: &Variant) -> Result<PathBuf> {
    write_config(dir, &config(layout, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout {
            rootfs: "/b/rootfs".into(),
            ro_dirs: vec!["/usr".into(), "/etc".into()],
            tree: "/w/tree".into(),
            bin_dir: "/w/bin".into(),
        }
    }

    #[test]
    fn the_tree_is_writable_and_the_host_read_only() {
        let c = config(&layout(), &Variant::new(vec!["/bin/true".into()]));
        let m = c["mounts"].as_array().unwrap();
        let find = |d: &str| m.iter().find(|x| x["destination"] == d).unwrap().clone();
        assert!(find("/usr")["options"].as_array().unwrap().contains(&json!("ro")));
        assert!(find("/w/tree")["options"].as_array().unwrap().contains(&json!("rw")));
        assert!(find("/w/bin")["options"].as_array().unwrap().contains(&json!("ro")));
        assert_eq!(c["root"]["readonly"], true);
        assert!(c.get("annotations").is_none());
        assert!(c["linux"].get("seccomp").is_none());
    }

    #[test]
    fn network_variants() {
        let mut v = Variant::new(vec!["/bin/true".into()]);
        let ns = |c: &Value| {
            c["linux"]["namespaces"]
                .as_array()
                .unwrap()
                .iter()
                .find(|n| n["type"] == "network")
                .cloned()
        };
        assert_eq!(ns(&config(&layout(), &v)), Some(json!({"type": "network"})));
        v.net = Net::Path("/w/netns/a".into());
        assert_eq!(
            ns(&config(&layout(), &v)),
            Some(json!({"type": "network", "path": "/w/netns/a"}))
        );
        v.net = Net::Inherit;
        assert_eq!(ns(&config(&layout(), &v)), None);
    }

    #[test]
    fn seccomp_and_annotations_are_carried() {
        let profile = json!({"defaultAction": "SCMP_ACT_ALLOW"});
        let mut v = Variant::new(vec!["/bin/true".into()]);
        v.seccomp = Some(&profile);
        v.annotations
            .insert("run.claude-shim.network".into(), "allowlist".into());
        let c = config(&layout(), &v);
        assert_eq!(c["linux"]["seccomp"], profile);
        assert_eq!(c["annotations"]["run.claude-shim.network"], "allowlist");
    }

    #[test]
    fn rootless_is_what_runc_spec_rootless_changes() {
        let mut c = config(&layout(), &Variant::new(vec!["/bin/true".into()]));
        rootless(&mut c, 1001, 1002);
        let types: Vec<&str> = c["linux"]["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["pid", "ipc", "uts", "mount", "user"]);
        assert_eq!(
            c["linux"]["uidMappings"],
            json!([{"containerID": 0, "hostID": 1001, "size": 1}])
        );
        assert_eq!(
            c["linux"]["gidMappings"],
            json!([{"containerID": 0, "hostID": 1002, "size": 1}])
        );
        let m = c["mounts"].as_array().unwrap();
        let find = |d: &str| m.iter().find(|x| x["destination"] == d).unwrap().clone();
        assert_eq!(find("/sys")["type"], "none");
        assert_eq!(find("/sys")["source"], "/sys");
        assert!(!find("/dev/pts")["options"]
            .as_array()
            .unwrap()
            .contains(&json!("gid=5")));
    }
}
