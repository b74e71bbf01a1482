//! Unit tests of the admin layer against a fake host: every rule tightens
//! what it should and refuses what it must, with its one-line reason.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use libcontainer::oci_spec::runtime::{
    Capability, LinuxDeviceCgroupBuilder, LinuxDeviceType, LinuxNamespaceBuilder, MountBuilder, Spec,
};

use super::host::FileKind;
use super::*;

struct FakeHost {
    /// Namespace paths that are the host's own.
    host_ns: Vec<PathBuf>,
    kinds: HashMap<PathBuf, FileKind>,
}

impl FakeHost {
    fn new() -> Self {
        let mut kinds = HashMap::new();
        kinds.insert(PathBuf::from("/run/podman/podman.sock"), FileKind::Socket);
        kinds.insert(PathBuf::from("/srv/agent.sock"), FileKind::Socket);
        kinds.insert(PathBuf::from("/dev/null"), FileKind::CharDevice(1, 3));
        kinds.insert(PathBuf::from("/dev/sda"), FileKind::BlockDevice);
        Self {
            host_ns: vec![
                PathBuf::from("/proc/1/ns/net"),
                PathBuf::from("/proc/1/ns/pid"),
                PathBuf::from("/proc/1/ns/user"),
            ],
            kinds,
        }
    }
}

impl Host for FakeHost {
    fn is_ours(&self, _ns: &str, path: &Path) -> Result<bool> {
        Ok(self.host_ns.iter().any(|p| p == path))
    }
    fn resolve(&self, path: &Path) -> Option<PathBuf> {
        Some(match path.strip_prefix("/var/run") {
            Ok(rest) => Path::new("/run").join(rest),
            Err(_) => path.to_path_buf(),
        })
    }
    fn kind(&self, path: &Path) -> Option<FileKind> {
        Some(self.kinds.get(path).copied().unwrap_or(FileKind::Dir))
    }
    fn home(&self) -> PathBuf {
        PathBuf::from("/root")
    }
    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            path.display().to_string(),
        ))
    }
}

fn admin(toml: &str) -> Policy {
    Policy::from_toml_str(toml, "/etc/claude-shim/policy.toml").unwrap()
}

const STRICT: &str = "version = 1\n";

/// runc's sample spec with podman's default capabilities.
fn engine_spec() -> Spec {
    let mut spec = Spec::default();
    let caps: Capabilities = [
        Capability::Chown,
        Capability::NetBindService,
        Capability::SysAdmin,
        Capability::Kill,
    ]
    .into_iter()
    .collect();
    let mut c = LinuxCapabilities::default();
    c.set_bounding(Some(caps.clone()));
    c.set_effective(Some(caps.clone()));
    c.set_permitted(Some(caps.clone()));
    c.set_inheritable(Some(caps.clone()));
    c.set_ambient(Some(caps));
    spec.process_mut().as_mut().unwrap().set_capabilities(Some(c));
    spec
}

fn run(spec: &mut Spec, layers: &[Policy]) -> Result<Vec<LinuxSeccomp>> {
    tighten(spec, layers, &FakeHost::new(), Path::new("/bundle"))
}

fn err(spec: &mut Spec, layers: &[Policy]) -> String {
    format!("{:#}", run(spec, layers).unwrap_err())
}

fn add_mount(spec: &mut Spec, source: &str, dest: &str) {
    let mut mounts = spec.mounts().clone().unwrap();
    mounts.push(
        MountBuilder::default()
            .source(source)
            .destination(dest)
            .typ("bind")
            .options(vec!["rbind".to_owned()])
            .build()
            .unwrap(),
    );
    spec.set_mounts(Some(mounts));
}

fn set_namespace(spec: &mut Spec, typ: LinuxNamespaceType, path: Option<&str>) {
    let linux = spec.linux_mut().as_mut().unwrap();
    let mut ns: Vec<_> = linux
        .namespaces()
        .clone()
        .unwrap()
        .into_iter()
        .filter(|n| n.typ() != typ)
        .collect();
    let mut b = LinuxNamespaceBuilder::default().typ(typ);
    if let Some(p) = path {
        b = b.path(p);
    }
    ns.push(b.build().unwrap());
    linux.set_namespaces(Some(ns));
}

fn drop_namespace(spec: &mut Spec, typ: LinuxNamespaceType) {
    let linux = spec.linux_mut().as_mut().unwrap();
    let ns: Vec<_> = linux
        .namespaces()
        .clone()
        .unwrap()
        .into_iter()
        .filter(|n| n.typ() != typ)
        .collect();
    linux.set_namespaces(Some(ns));
}

#[test]
fn capabilities_are_cut_to_the_policys_and_nnp_is_forced() {
    let mut spec = engine_spec();
    run(&mut spec, &[admin(STRICT)]).unwrap();
    let p = spec.process().as_ref().unwrap();
    let caps = p.capabilities().as_ref().unwrap();
    for set in [
        caps.bounding(),
        caps.effective(),
        caps.permitted(),
        caps.inheritable(),
        caps.ambient(),
    ] {
        assert_eq!(set.as_ref().unwrap().len(), 0, "{caps:?}");
    }
    assert_eq!(p.no_new_privileges(), Some(true));

    let mut spec = engine_spec();
    run(
        &mut spec,
        &[admin(
            "version = 1\n[identity]\ncapabilities = [\"CAP_CHOWN\", \"CAP_SYS_TIME\"]\n",
        )],
    )
    .unwrap();
    let bounding = spec
        .process()
        .as_ref()
        .unwrap()
        .capabilities()
        .as_ref()
        .unwrap()
        .bounding()
        .clone()
        .unwrap();
    assert_eq!(
        bounding,
        [Capability::Chown].into_iter().collect(),
        "intersection, never a new one"
    );
}

#[test]
fn an_annotation_profile_only_adds_restrictions() {
    let loose = admin("version = 1\n[identity]\ncapabilities = [\"CAP_CHOWN\"]\n");
    let mut spec = engine_spec();
    let mut ann = HashMap::new();
    ann.insert(PROFILE_ANNOTATION.to_owned(), "offline".to_owned());
    spec.set_annotations(Some(ann));
    let layers = vec![loose, builtin_profile("offline").unwrap()];
    run(&mut spec, &layers).unwrap();
    let bounding = spec
        .process()
        .as_ref()
        .unwrap()
        .capabilities()
        .as_ref()
        .unwrap()
        .bounding()
        .clone()
        .unwrap();
    assert!(bounding.is_empty(), "offline keeps no capability: {bounding:?}");
    let rl = spec.process().as_ref().unwrap().rlimits().clone().unwrap();
    assert!(rl
        .iter()
        .any(|r| r.typ() == libcontainer::oci_spec::runtime::PosixRlimitType::RlimitCore && r.hard() == 0));
    let e = builtin_profile("wide-open").unwrap_err().to_string();
    assert!(e.contains("names no built-in profile"), "{e}");
}

#[test]
fn host_namespaces_are_refused() {
    let mut spec = engine_spec();
    drop_namespace(&mut spec, LinuxNamespaceType::Network);
    assert_eq!(
        err(&mut spec, &[admin(STRICT)]),
        "the host's net namespace is forbidden (config.json asks for no net namespace of its own)"
    );
    let mut spec = engine_spec();
    set_namespace(&mut spec, LinuxNamespaceType::Pid, Some("/proc/1/ns/pid"));
    assert!(err(&mut spec, &[admin(STRICT)])
        .contains("the host's pid namespace is forbidden (config.json joins /proc/1/ns/pid)"));
    let mut spec = engine_spec();
    set_namespace(&mut spec, LinuxNamespaceType::User, Some("/proc/1/ns/user"));
    assert!(err(&mut spec, &[admin(STRICT)]).contains("the host's user namespace is forbidden"));
    // Another container's (a pod's pause container) ipc namespace is fine; so
    // is a network namespace that is not the runtime's own in mode none (the
    // runtime filters it to loopback), but not in a mode that needs its own.
    let mut spec = engine_spec();
    set_namespace(&mut spec, LinuxNamespaceType::Ipc, Some("/proc/77/ns/ipc"));
    run(&mut spec, &[admin(STRICT)]).unwrap();
    set_namespace(&mut spec, LinuxNamespaceType::Network, Some("/run/netns/cni-1"));
    run(&mut spec, &[admin(STRICT)]).unwrap();
    // A fresh spec: tighten wrote mode none into the one above.
    let mut spec = engine_spec();
    set_namespace(&mut spec, LinuxNamespaceType::Network, Some("/run/netns/cni-1"));
    let public = format!("{STRICT}\n[network]\nmode = \"public\"\n");
    let e = err(&mut spec, &[admin(&public)]);
    assert!(
        e.starts_with("a network namespace claude-shim did not create is forbidden: network mode \"public\""),
        "{e}"
    );
}

#[test]
fn dangerous_binds_are_refused() {
    for (source, why) in [
        ("/", "it is the host's root"),
        ("/var/run/podman/podman.sock", "it is a unix socket"),
        ("/srv/agent.sock", "it is a unix socket"),
        ("/run", "it is or holds /run/claude-shim, container runtime state"),
        (
            "/run/containerd/runc/default/other",
            "it is or holds /run/containerd/runc, container runtime state",
        ),
        ("/var/lib/containerd", "container engine state"),
        ("/var/lib", "it is or holds /var/lib/containerd, container engine state"),
        ("/run/user/1000", "it is or holds /run/user, users' runtime directories"),
        ("/proc/1/root", "a kernel filesystem of the host"),
        ("/dev/sda", "it is a device of the host"),
        ("/dev", "it is a device of the host"),
        ("/root/.ssh", "it is or holds /root/.ssh, a hidden path"),
        ("/root", "it is or holds /root/.ssh, a hidden path"),
    ] {
        let mut spec = engine_spec();
        add_mount(&mut spec, source, "/mnt");
        let e = err(&mut spec, &[admin(STRICT)]);
        assert!(
            e.starts_with(&format!("bind mount of {source} at /mnt is forbidden: ")),
            "{e}"
        );
        assert!(e.contains(why), "{source}: {e}");
    }
    // A volume, a file masked by /dev/null, and what podman and the CRI bind
    // from their own state into every container.
    let mut spec = engine_spec();
    add_mount(&mut spec, "/srv/project", "/work");
    add_mount(&mut spec, "/dev/null", "/work/.env");
    add_mount(
        &mut spec,
        "/var/lib/containers/storage/overlay-containers/c1/userdata/hosts",
        "/etc/hosts",
    );
    add_mount(
        &mut spec,
        "/run/containers/storage/overlay-containers/c1/userdata/.containerenv",
        "/run/.containerenv",
    );
    add_mount(
        &mut spec,
        "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/s1/shm",
        "/dev/shm",
    );
    add_mount(
        &mut spec,
        "/var/lib/containerd/io.containerd.grpc.v1.cri/sandboxes/s1/resolv.conf",
        "/etc/resolv.conf",
    );
    run(&mut spec, &[admin(STRICT)]).unwrap();
}

#[test]
fn added_devices_are_refused_and_device_rules_cut() {
    let mut spec = engine_spec();
    let dev = libcontainer::oci_spec::runtime::LinuxDeviceBuilder::default()
        .path("/dev/fuse")
        .typ(LinuxDeviceType::C)
        .major(10)
        .minor(229)
        .build()
        .unwrap();
    spec.linux_mut().as_mut().unwrap().set_devices(Some(vec![dev]));
    assert_eq!(
        err(&mut spec, &[admin(STRICT)]),
        "device /dev/fuse is forbidden: the admin policy allows no added devices"
    );

    let mut spec = engine_spec();
    let rule = |allow: bool, typ: Option<LinuxDeviceType>, major: Option<i64>, minor: Option<i64>| {
        let mut b = LinuxDeviceCgroupBuilder::default().allow(allow).access("rwm");
        if let Some(t) = typ {
            b = b.typ(t);
        }
        if let Some(m) = major {
            b = b.major(m);
        }
        if let Some(m) = minor {
            b = b.minor(m);
        }
        b.build().unwrap()
    };
    let mut res = spec.linux().as_ref().unwrap().resources().clone().unwrap();
    res.set_devices(Some(vec![
        rule(true, Some(LinuxDeviceType::A), None, None),
        rule(true, Some(LinuxDeviceType::C), Some(1), Some(3)),
        rule(true, Some(LinuxDeviceType::B), Some(8), Some(0)),
        rule(true, Some(LinuxDeviceType::C), Some(136), None),
    ]));
    spec.linux_mut().as_mut().unwrap().set_resources(Some(res));
    run(&mut spec, &[admin(STRICT)]).unwrap();
    let kept = spec
        .linux()
        .as_ref()
        .unwrap()
        .resources()
        .as_ref()
        .unwrap()
        .devices()
        .clone()
        .unwrap();
    assert_eq!(kept.len(), 3, "{kept:?}");
    assert!(!kept[0].allow(), "deny all first");
    assert_eq!((kept[1].major(), kept[2].major()), (Some(1), Some(136)));
}

#[test]
fn paths_limits_and_network_are_added() {
    let mut spec = engine_spec();
    let policy =
        admin("version = 1\n[resources]\npids = 100\nmemory = \"1GiB\"\ncpus = 0.5\nrlimits = { nofile = 512 }\n");
    run(&mut spec, &[policy]).unwrap();
    let linux = spec.linux().as_ref().unwrap();
    let masked = linux.masked_paths().clone().unwrap();
    for p in [
        "/proc/kcore",
        "/sys/devices/virtual/powercap",
        "/run/secrets",
        "/var/run/secrets",
    ] {
        assert!(masked.iter().any(|m| m == p), "{p} masked: {masked:?}");
    }
    assert!(linux
        .readonly_paths()
        .clone()
        .unwrap()
        .iter()
        .any(|p| p == "/proc/sysrq-trigger"));
    let r = linux.resources().as_ref().unwrap();
    assert_eq!(r.pids().as_ref().unwrap().limit(), 100);
    assert_eq!(r.memory().as_ref().unwrap().limit(), Some(1 << 30));
    assert_eq!(r.cpu().as_ref().unwrap().quota(), Some(50_000));
    let nofile = spec.process().as_ref().unwrap().rlimits().clone().unwrap();
    assert!(nofile
        .iter()
        .all(|r| r.soft() <= 512 || r.typ() != libcontainer::oci_spec::runtime::PosixRlimitType::RlimitNofile));
    let ann = spec.annotations().clone().unwrap();
    assert_eq!(ann[annotations::NETWORK], "none");

    // A lower limit of the engine's stays.
    let mut spec = engine_spec();
    let mut res = spec.linux().as_ref().unwrap().resources().clone().unwrap();
    res.set_pids(Some(LinuxPidsBuilder::default().limit(10).build().unwrap()));
    spec.linux_mut().as_mut().unwrap().set_resources(Some(res));
    run(&mut spec, &[admin("version = 1\n[resources]\npids = 100\n")]).unwrap();
    assert_eq!(
        spec.linux()
            .as_ref()
            .unwrap()
            .resources()
            .as_ref()
            .unwrap()
            .pids()
            .as_ref()
            .unwrap()
            .limit(),
        10
    );
}

#[test]
fn the_agent_profile_is_stacked_once_and_adapted() {
    let layers = vec![admin(STRICT), builtin_profile("offline").unwrap()];
    let mut spec = engine_spec();
    let stacked = run(&mut spec, &layers).unwrap();
    assert_eq!(stacked.len(), 1, "agent and offline share the agent profile");
    // swapped for libcontainer: the clone rule's mask is now in valueTwo.
    let clone = stacked[0]
        .syscalls()
        .iter()
        .flatten()
        .find(|r| r.names().iter().any(|n| n == "clone") && r.args().is_some())
        .unwrap();
    let arg = clone.args().as_ref().unwrap()[0];
    assert_eq!(arg.value(), 0);
    assert_eq!(arg.value_two(), Some(seccomp::CLONE_NEW_MASK));
}

#[test]
fn exec_gets_no_capability_the_init_lacks() {
    let mut init = engine_spec();
    run(&mut init, &[admin(STRICT)]).unwrap();
    let mut process = engine_spec().process().clone().unwrap();
    let meta = Meta {
        admin_policy: Some(PathBuf::from("/etc/claude-shim/policy.toml")),
        ..Meta::default()
    };
    tighten_exec(&meta, &init, &mut process);
    assert!(process
        .capabilities()
        .as_ref()
        .unwrap()
        .effective()
        .as_ref()
        .unwrap()
        .is_empty());
    assert_eq!(process.no_new_privileges(), Some(true));
    // Without an admin policy, exec is runc's.
    let mut process = engine_spec().process().clone().unwrap();
    tighten_exec(&Meta::default(), &init, &mut process);
    assert_eq!(
        process
            .capabilities()
            .as_ref()
            .unwrap()
            .effective()
            .as_ref()
            .unwrap()
            .len(),
        4
    );
}

#[test]
fn host_root_is_found_through_the_uid_map() {
    // The initial namespace, rootful podman/Docker.
    assert_eq!(host_root_uid("         0          0 4294967295\n", 65534), 0);
    // A rootless engine: 0 is the caller, host root is unmapped.
    assert_eq!(host_root_uid("0 1001 1\n1 100000 65536\n", 65534), 65534);
    // A namespace that maps host root elsewhere.
    assert_eq!(host_root_uid("0 1001 1\n5 0 1\n", 65534), 5);
    assert_eq!(host_root_uid("garbage\n", 65533), 65533);
}

#[test]
fn the_policy_file_must_be_roots_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, STRICT).unwrap();
    use std::os::unix::fs::PermissionsExt;
    if nix::unistd::geteuid().is_root() {
        check_trusted(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = check_trusted(&path).unwrap_err().to_string();
        assert!(e.contains("writable by group or others"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = check_trusted(&path).unwrap_err().to_string();
        assert!(e.contains("is not root's alone"), "{e}");
    } else {
        let e = check_trusted(&path).unwrap_err().to_string();
        assert!(e.contains("not root"), "{e}");
    }
}

#[test]
fn a_user_namespace_the_engine_did_not_ask_for_is_refused() {
    let mut spec = engine_spec();
    let e = err(
        &mut spec,
        &[admin("version = 1\n[identity]\nuser_namespace = \"always\"\n")],
    );
    assert!(
        e.ends_with("identity.user_namespace = \"always\" needs a user namespace, and config.json asks for none"),
        "{e}"
    );
    set_namespace(&mut spec, LinuxNamespaceType::User, None);
    run(
        &mut spec,
        &[admin("version = 1\n[identity]\nuser_namespace = \"always\"\n")],
    )
    .unwrap();
}

mod network;
