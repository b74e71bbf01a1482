//! Device access (`linux.resources.devices`) on cgroup v2, where the kernel
//! has no devices.allow file: a BPF_PROG_TYPE_CGROUP_DEVICE program attached
//! to the container's cgroup decides every open and mknod of a device node.
//! Called by runtime/create.rs around libcontainer's create and update.
//!
//! Who enforces what:
//! - root, cgroupfs: libcgroups' v2 manager (feature `cgroupsv2_devices`)
//!   builds and attaches the program; `check_attached` then reads the
//!   kernel's list of programs on the cgroup, so a build or a path that
//!   attached nothing is refused rather than run with every device open.
//! - root, `--systemd-cgroup`: libcgroups' systemd manager sets no device
//!   property, so `attach` puts the same program on the scope's cgroup
//!   before the container's process starts.
//! - rootless: the kernel refuses BPF_PROG_LOAD and BPF_PROG_ATTACH without
//!   CAP_SYS_ADMIN or CAP_BPF in the initial user namespace, as runc and
//!   crun find; they skip the rules. claude-shim runs such a container only
//!   when the rules cannot matter (`check_rootless_spec` before the create,
//!   `check_rootless_running` after it), and refuses it otherwise.
//!
//! Why the rules are moot for a rootless container: every process of it is
//! in a user namespace other than the initial one (checked on the running
//! init), so none holds or can gain a capability there. Then (1) mknod of a
//! device node fails (vfs_mknod asks for CAP_MKNOD in the initial user
//! namespace); (2) every filesystem it mounts is SB_I_NODEV, so no node on it
//! opens; (3) what is left are nodes on the host's own mounts, bound in by
//! the spec, which it opens with the caller's uid and groups only (host
//! inodes are owned by ids unmapped in its namespace, so its capabilities do
//! not override their modes). It reaches no device its caller cannot open
//! anyway. The spec check adds that no node it binds in from the host (a
//! `linux.devices` entry, a bind-mounted node, or anything under a bound
//! /dev) is one its own rules deny, so the rules never promise what is not
//! enforced.

use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use libcontainer::oci_spec::runtime::{LinuxDeviceCgroup, LinuxDeviceType, Spec};

/// The rules libcgroups adds after the spec's (common.rs `default_devices`
/// and `default_allow_devices`, the same list runc appends): they always
/// win, so a spec cannot deny these. (type, major, minor, access); -1 is any.
const APPENDED: &[(char, i64, i64, &str)] = &[
    ('c', 1, 3, "rwm"),    // null
    ('c', 1, 5, "rwm"),    // zero
    ('c', 1, 7, "rwm"),    // full
    ('c', 5, 0, "rwm"),    // tty
    ('c', 1, 9, "rwm"),    // urandom
    ('c', 1, 8, "rwm"),    // random
    ('c', -1, -1, "m"),    // mknod of any char device
    ('b', -1, -1, "m"),    // mknod of any block device
    ('c', 5, 1, "rwm"),    // console
    ('c', 136, -1, "rwm"), // pts
    ('c', 5, 2, "rwm"),    // ptmx
    ('c', 10, 200, "rwm"), // tun
];

/// One rule as the BPF program reads it.
#[derive(Debug, Clone)]
struct Rule {
    allow: bool,
    /// 'a' for all, 'c', 'b'.
    typ: char,
    major: i64,
    minor: i64,
    access: String,
}

fn from_spec(r: &LinuxDeviceCgroup) -> Rule {
    let typ = match r.typ().unwrap_or(LinuxDeviceType::A) {
        LinuxDeviceType::C | LinuxDeviceType::U => 'c',
        LinuxDeviceType::B => 'b',
        LinuxDeviceType::P => 'p',
        LinuxDeviceType::A => 'a',
    };
    Rule {
        allow: r.allow(),
        typ,
        major: r.major().unwrap_or(-1),
        minor: r.minor().unwrap_or(-1),
        access: r.access().clone().unwrap_or_default(),
    }
}

/// Whether the program libcgroups builds from `rules` lets `access` (a
/// subset of "rwm") through for the device. Its emulator: an "a" rule drops
/// the rules before it and sets the default; then the last rule that names
/// the device with all the asked access decides; else the default (deny
/// unless an "a" rule allowed all).
fn allows(rules: &[LinuxDeviceCgroup], typ: char, major: i64, minor: i64, access: &str) -> bool {
    let mut default_allow = false;
    let mut list: Vec<Rule> = Vec::new();
    let appended = APPENDED.iter().map(|&(typ, major, minor, access)| Rule {
        allow: true,
        typ,
        major,
        minor,
        access: access.to_owned(),
    });
    for r in rules.iter().map(from_spec).chain(appended) {
        if r.typ == 'a' {
            default_allow = r.allow;
            list.clear();
        } else if !r.access.is_empty() {
            list.push(r);
        }
    }
    for r in list.iter().rev() {
        let covers = access.chars().all(|a| r.access.contains(a));
        if r.typ == typ && (r.major < 0 || r.major == major) && (r.minor < 0 || r.minor == minor) && covers {
            return r.allow;
        }
    }
    default_allow
}

/// Whether the rules keep a process from opening the device in any mode.
fn restricts(rules: &[LinuxDeviceCgroup], typ: char, major: i64, minor: i64) -> bool {
    ["r", "w", "rw"].iter().any(|a| !allows(rules, typ, major, minor, a))
}

/// A device node the container can reach on a host mount.
struct Node {
    what: String,
    typ: char,
    major: i64,
    minor: i64,
}

fn node_at(path: &Path, what: String) -> Option<Node> {
    let m = fs::metadata(path).ok()?;
    let typ = if m.file_type().is_char_device() {
        'c'
    } else if m.file_type().is_block_device() {
        'b'
    } else {
        return None;
    };
    let rdev = m.rdev();
    Some(Node {
        what,
        typ,
        major: i64::from(nix::sys::stat::major(rdev) as u32),
        minor: i64::from(nix::sys::stat::minor(rdev) as u32),
    })
}

/// How many entries of a bound /dev are looked at before giving up (and
/// refusing): the host's /dev holds a few hundred.
const WALK_LIMIT: usize = 20_000;

/// The host device nodes a rootless container gets from its spec.
fn reachable(spec: &Spec) -> Result<Vec<Node>> {
    let mut out = Vec::new();
    let linux = spec.linux().as_ref();
    for d in linux.and_then(|l| l.devices().as_ref()).into_iter().flatten() {
        let typ = match d.typ() {
            LinuxDeviceType::B => 'b',
            LinuxDeviceType::C | LinuxDeviceType::U => 'c',
            _ => continue,
        };
        out.push(Node {
            what: format!("linux.devices entry {}", d.path().display()),
            typ,
            major: d.major(),
            minor: d.minor(),
        });
    }
    for m in spec.mounts().iter().flatten() {
        let bind =
            m.typ().as_deref() == Some("bind") || m.options().iter().flatten().any(|o| o == "bind" || o == "rbind");
        let Some(src) = m.source().as_ref().filter(|_| bind) else {
            continue;
        };
        let Ok(real) = fs::canonicalize(src) else { continue };
        let what = |p: &Path| format!("{} (bind-mounted at {})", p.display(), m.destination().display());
        if let Some(n) = node_at(&real, what(&real)) {
            out.push(n);
            continue;
        }
        // A directory of device nodes: the host's /dev or a part of it.
        if real.is_dir() && real.starts_with("/dev") {
            let mut stack = vec![real.clone()];
            let mut seen = 0usize;
            while let Some(dir) = stack.pop() {
                for e in fs::read_dir(&dir).with_context(|| format!("read {}", dir.display()))? {
                    let e = e.with_context(|| format!("read {}", dir.display()))?;
                    seen += 1;
                    if seen > WALK_LIMIT {
                        bail!(
                            "{} holds more than {WALK_LIMIT} entries to check against linux.resources.devices",
                            real.display()
                        );
                    }
                    let ft = e.file_type().with_context(|| format!("read {}", e.path().display()))?;
                    if ft.is_dir() {
                        stack.push(e.path());
                    } else if ft.is_char_device() || ft.is_block_device() {
                        if let Some(n) = node_at(&e.path(), what(&e.path())) {
                            out.push(n);
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

const ROOTLESS_WHY: &str = "a rootless runtime cannot attach the device program on cgroup v2 (the kernel allows BPF_PROG_LOAD only with CAP_SYS_ADMIN or CAP_BPF)";

/// Before a rootless create on cgroup v2: refuses a spec that binds in a
/// host device node its own rules deny (see the module's comment).
pub fn check_rootless_spec(spec: &Spec) -> Result<()> {
    let rules = spec
        .linux()
        .as_ref()
        .and_then(|l| l.resources().as_ref())
        .and_then(|r| r.devices().clone())
        .unwrap_or_default();
    for n in reachable(spec)? {
        if restricts(&rules, n.typ, n.major, n.minor) {
            bail!(
                "enforce linux.resources.devices: it denies {} {}:{}, which the container reaches as {}, and {ROOTLESS_WHY}; drop the device or the rule, or run as root",
                n.typ,
                n.major,
                n.minor,
                n.what
            );
        }
    }
    Ok(())
}

/// After a rootless create: the init runs in a user namespace other than the
/// initial one, which is what makes the rules moot (the module's comment).
/// The initial namespace's uid_map is the only one that maps all 2^32 ids.
pub fn check_rootless_running(pid: i32) -> Result<()> {
    let path = format!("/proc/{pid}/uid_map");
    let map = fs::read_to_string(&path).with_context(|| format!("read {path}"))?;
    if map.contains("4294967295") {
        bail!(
            "enforce linux.resources.devices: the container's init runs in the initial user namespace ({path}: {}) and {ROOTLESS_WHY}",
            map.trim()
        );
    }
    Ok(())
}

/// The cgroup v2 directory a process runs in.
fn dir_of(pid: i32) -> Result<PathBuf> {
    let rel = super::cgroup_v2::cgroup_of(pid)?;
    Ok(Path::new(libcgroups::common::DEFAULT_CGROUP_ROOT).join(rel.strip_prefix("/").unwrap_or(&rel)))
}

/// `--systemd-cgroup` as root: puts the device program on the scope the
/// init runs in (libcgroups' systemd manager leaves devices alone).
pub fn attach(pid: i32, rules: &Option<Vec<LinuxDeviceCgroup>>) -> Result<PathBuf> {
    let dir = dir_of(pid)?;
    libcgroups::v2::devices::Devices::apply_devices(&dir, rules)
        .map_err(|e| anyhow!("enforce linux.resources.devices on cgroup {}: {e}", dir.display()))?;
    Ok(dir)
}

/// Root on cgroup v2: the kernel's own list of device programs attached to
/// the init's cgroup must not be empty.
pub fn check_attached(pid: i32) -> Result<()> {
    let dir = dir_of(pid)?;
    let fd = nix::fcntl::open(
        &dir,
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .with_context(|| format!("open cgroup {}", dir.display()))?;
    // SAFETY: open returned a new descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let progs = libcgroups::v2::devices::bpf::prog::query(fd.as_raw_fd()).map_err(|e| {
        anyhow!(
            "enforce linux.resources.devices: query the device programs of cgroup {}: {e}",
            dir.display()
        )
    })?;
    let n = progs.len();
    for p in progs {
        // query hands out a descriptor per program; they are ours to close.
        // SAFETY: each fd was just returned by bpf_prog_get_fd_by_id.
        drop(unsafe { OwnedFd::from_raw_fd(p.fd) });
    }
    if n == 0 {
        bail!(
            "enforce linux.resources.devices: no device program is attached to cgroup {}",
            dir.display()
        );
    }
    tracing::debug!("{n} device program(s) on cgroup {}", dir.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use libcontainer::oci_spec::runtime::LinuxDeviceCgroupBuilder;

    fn rule(
        allow: bool,
        typ: LinuxDeviceType,
        major: Option<i64>,
        minor: Option<i64>,
        access: &str,
    ) -> LinuxDeviceCgroup {
        let mut b = LinuxDeviceCgroupBuilder::default().allow(allow).typ(typ).access(access);
        if let Some(m) = major {
            b = b.major(m);
        }
        if let Some(m) = minor {
            b = b.minor(m);
        }
        b.build().unwrap()
    }

    #[test]
    fn deny_all_then_defaults() {
        let rules = vec![rule(false, LinuxDeviceType::A, None, None, "rwm")];
        assert!(allows(&rules, 'c', 1, 3, "rw"), "/dev/null is always allowed");
        assert!(!allows(&rules, 'c', 1, 11, "w"), "/dev/kmsg is not");
        assert!(allows(&rules, 'c', 1, 11, "m"), "mknod of any char device is");
        assert!(restricts(&rules, 'b', 8, 0));
        assert!(!restricts(&rules, 'c', 136, 4));
    }

    #[test]
    fn the_appended_defaults_win_over_a_deny() {
        let rules = vec![
            rule(true, LinuxDeviceType::A, None, None, "rwm"),
            rule(false, LinuxDeviceType::C, Some(1), Some(5), "rwm"),
            rule(false, LinuxDeviceType::C, Some(1), Some(11), "rwm"),
        ];
        assert!(allows(&rules, 'c', 1, 5, "rw"), "libcgroups and runc append /dev/zero");
        assert!(!allows(&rules, 'c', 1, 11, "r"));
        assert!(allows(&rules, 'c', 10, 229, "rw"), "allow-all stays for the rest");
        assert!(!restricts(&rules, 'c', 10, 229));
    }

    #[test]
    fn no_rules_is_deny_all_on_v2() {
        assert!(restricts(&[], 'c', 10, 232));
        assert!(!restricts(&[], 'c', 1, 9));
    }

    #[test]
    fn a_rule_needs_all_the_asked_access() {
        let rules = vec![
            rule(false, LinuxDeviceType::A, None, None, "rwm"),
            rule(true, LinuxDeviceType::C, Some(10), Some(229), "r"),
        ];
        assert!(allows(&rules, 'c', 10, 229, "r"));
        assert!(!allows(&rules, 'c', 10, 229, "rw"));
        assert!(restricts(&rules, 'c', 10, 229));
    }

    #[test]
    fn rootless_spec_refuses_a_bound_node_its_rules_deny() {
        let mut spec = Spec::default();
        let mount = libcontainer::oci_spec::runtime::MountBuilder::default()
            .destination("/host-null")
            .typ("bind")
            .source("/dev/null")
            .options(vec!["bind".to_owned()])
            .build()
            .unwrap();
        spec.set_mounts(Some(vec![mount]));
        // runc's default spec: deny all, /dev/null allowed again.
        check_rootless_spec(&spec).unwrap();
        let dev = libcontainer::oci_spec::runtime::LinuxDeviceBuilder::default()
            .path("/dev/fuse")
            .typ(LinuxDeviceType::C)
            .major(10)
            .minor(229)
            .build()
            .unwrap();
        spec.linux_mut().as_mut().unwrap().set_devices(Some(vec![dev]));
        let err = check_rootless_spec(&spec).unwrap_err().to_string();
        assert!(
            err.contains("linux.resources.devices") && err.contains("c 10:229"),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1);
    }
}
