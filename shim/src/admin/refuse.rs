//! What the admin policy refuses outright, whatever the other layers say: the
//! host's namespaces, binds that would hand the container the host, and
//! added devices (device cgroup rules are cut down to the defaults).

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use claude_shim_bundle::policy::values::NetworkMode;
use claude_shim_bundle::Policy;
use libcontainer::oci_spec::runtime::{
    LinuxDeviceCgroup, LinuxDeviceCgroupBuilder, LinuxDeviceType, LinuxNamespaceType, Spec,
};

use super::host::{FileKind, Host};

/// Where container engines keep their sockets and state. A bind of one of
/// them, or of a directory holding one (`/run`, `/var/lib`), hands the
/// container its engine's API and every other container's data. Binds of
/// files below them stay allowed: that is where engines keep a container's
/// own hosts, resolv.conf and shm (sockets there are refused as sockets).
const ENGINE_PATHS: &[&str] = &[
    "/run/containerd",
    "/var/lib/containerd",
    "/run/podman",
    "/run/containers",
    "/var/lib/containers",
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/var/lib/docker",
    "/run/crio",
    "/run/k3s",
];

/// Where no part may be bound: runtimes' container state (claude-shim's own,
/// and the runc v2 shim's root, where containerd runs claude-shim), which a
/// container could rewrite, and users' runtime directories (agent, D-Bus and
/// rootless engine sockets).
const PRIVATE: &[(&str, &str)] = &[
    ("/run/claude-shim", "container runtime state"),
    ("/run/containerd/runc", "container runtime state"),
    ("/run/runc", "container runtime state"),
    ("/run/user", "users' runtime directories"),
];

/// The devices every container gets (OCI runtime-spec, "Default Devices").
const DEFAULT_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/console",
    "/dev/ptmx",
];

/// Device cgroup rules kept: the default devices and the pty slaves (major 136).
const DEFAULT_DEVICE_NUMBERS: &[(i64, Option<i64>)] = &[
    (1, Some(3)),
    (1, Some(5)),
    (1, Some(7)),
    (1, Some(8)),
    (1, Some(9)),
    (5, Some(0)),
    (5, Some(1)),
    (5, Some(2)),
    (136, None),
];

fn ns_name(typ: LinuxNamespaceType) -> &'static str {
    match typ {
        LinuxNamespaceType::Mount => "mnt",
        LinuxNamespaceType::Cgroup => "cgroup",
        LinuxNamespaceType::Uts => "uts",
        LinuxNamespaceType::Ipc => "ipc",
        LinuxNamespaceType::User => "user",
        LinuxNamespaceType::Pid => "pid",
        LinuxNamespaceType::Network => "net",
        LinuxNamespaceType::Time => "time",
    }
}

/// The host's namespaces are refused: without an entry the container shares
/// the runtime's (user excepted: a rootful container normally runs in the
/// host's user namespace), and a path may name the runtime's own. Other paths
/// are another container's (a Kubernetes pod's pause container, a CNI
/// namespace). A network namespace joined that way holds interfaces someone
/// else wired (a pod's eth0), so only network mode "none" can hold there: the
/// runtime then confines it to loopback with a filter (network::attach).
/// allowlist and public mode need a namespace claude-shim creates.
pub(super) fn check_namespaces(spec: &Spec, host: &dyn Host, mode: NetworkMode) -> Result<()> {
    let namespaces = spec
        .linux()
        .as_ref()
        .and_then(|l| l.namespaces().clone())
        .unwrap_or_default();
    let must_have = [
        LinuxNamespaceType::Network,
        LinuxNamespaceType::Pid,
        LinuxNamespaceType::Ipc,
        LinuxNamespaceType::Uts,
        LinuxNamespaceType::Mount,
    ];
    for typ in must_have {
        if !namespaces.iter().any(|n| n.typ() == typ) {
            bail!(
                "the host's {} namespace is forbidden (config.json asks for no {} namespace of its own)",
                ns_name(typ),
                ns_name(typ)
            );
        }
    }
    for n in &namespaces {
        let Some(path) = n.path() else { continue };
        let name = ns_name(n.typ());
        if host.is_ours(name, path)? {
            bail!(
                "the host's {name} namespace is forbidden (config.json joins {})",
                path.display()
            );
        }
        if n.typ() == LinuxNamespaceType::Network && mode != NetworkMode::None {
            bail!(
                "a network namespace claude-shim did not create is forbidden: network mode {:?} applies only to its own (config.json joins {})",
                mode.as_str(),
                path.display()
            );
        }
    }
    Ok(())
}

fn is_bind(m: &libcontainer::oci_spec::runtime::Mount) -> bool {
    m.typ().as_deref() == Some("bind") || m.options().iter().flatten().any(|o| o == "bind" || o == "rbind")
}

/// Bind mounts of what would hand the container the host: its root, kernel
/// filesystems, devices, sockets, engine state and the policy's hidden paths,
/// or a directory holding one of them.
pub(super) fn check_mounts(spec: &Spec, layers: &[Policy], host: &dyn Host, bundle: &Path) -> Result<()> {
    let home = host.home();
    let mut hidden: Vec<PathBuf> = Vec::new();
    for p in layers {
        for h in p.filesystem.hidden_paths() {
            let h = h.expand(&home);
            hidden.push(host.resolve(&h).unwrap_or(h));
        }
    }
    let resolved = |list: &[&str]| -> Vec<PathBuf> {
        list.iter()
            .map(|p| host.resolve(Path::new(p)).unwrap_or_else(|| PathBuf::from(p)))
            .collect()
    };
    let engine = resolved(ENGINE_PATHS);
    let private: Vec<(PathBuf, &str)> = PRIVATE
        .iter()
        .map(|(p, what)| (host.resolve(Path::new(p)).unwrap_or_else(|| PathBuf::from(p)), *what))
        .collect();
    for m in spec.mounts().iter().flatten().filter(|m| is_bind(m)) {
        let Some(source) = m.source() else { continue };
        let source = if source.is_absolute() {
            source.clone()
        } else {
            bundle.join(source)
        };
        // A missing source fails the mount itself; nothing to judge here.
        let Some(real) = host.resolve(&source) else { continue };
        let refuse = |why: String| -> Result<()> {
            bail!(
                "bind mount of {} at {} is forbidden: {why}",
                source.display(),
                m.destination().display()
            )
        };
        if real == Path::new("/") {
            refuse("it is the host's root".into())?;
        }
        if real.starts_with("/proc") || real.starts_with("/sys") {
            refuse("it is a kernel filesystem of the host".into())?;
        }
        let kind = host.kind(&real);
        if real.starts_with("/dev") {
            let harmless = matches!(kind, Some(FileKind::CharDevice(1, 3 | 5 | 7 | 8 | 9)));
            if !harmless {
                refuse("it is a device of the host".into())?;
            }
        }
        match kind {
            Some(FileKind::Socket) => refuse("it is a unix socket".into())?,
            Some(FileKind::BlockDevice | FileKind::CharDevice(..)) if !real.starts_with("/dev") => {
                refuse("it is a device".into())?
            }
            _ => {}
        }
        if let Some((p, what)) = private
            .iter()
            .find(|(p, _)| p.starts_with(&real) || real.starts_with(p))
        {
            refuse(format!("it is or holds {}, {what}", p.display()))?;
        }
        if let Some(e) = engine.iter().find(|e| e.starts_with(&real)) {
            refuse(format!("it is or holds {}, container engine state", e.display()))?;
        }
        if let Some(h) = hidden.iter().find(|h| h.starts_with(&real) || real.starts_with(h)) {
            refuse(format!("it is or holds {}, a hidden path", h.display()))?;
        }
    }
    Ok(())
}

/// Added devices are refused; device cgroup rules are cut down to the
/// default devices, after a leading "deny all".
pub(super) fn tighten_devices(spec: &mut Spec) -> Result<()> {
    let Some(linux) = spec.linux_mut() else {
        return Ok(());
    };
    for d in linux.devices().iter().flatten() {
        if !DEFAULT_DEVICES.iter().any(|p| d.path() == Path::new(p)) {
            bail!(
                "device {} is forbidden: the admin policy allows no added devices",
                d.path().display()
            );
        }
    }
    let Some(resources) = linux.resources_mut() else {
        return Ok(());
    };
    let rules = resources.devices().clone().unwrap_or_default();
    let deny_all = LinuxDeviceCgroupBuilder::default()
        .allow(false)
        .access("rwm")
        .build()
        .expect("a device rule with allow and access is complete");
    let mut kept: Vec<LinuxDeviceCgroup> = vec![deny_all];
    for r in rules {
        let default_device = r.typ() == Some(LinuxDeviceType::C)
            && DEFAULT_DEVICE_NUMBERS
                .iter()
                .any(|(maj, min)| r.major() == Some(*maj) && (min.is_none() || r.minor() == *min));
        if !r.allow() || default_device {
            kept.push(r);
        } else {
            tracing::debug!("admin policy: dropped the device rule {r}");
        }
    }
    resources.set_devices(Some(kept));
    Ok(())
}
