//! The admin policy: a root-owned policy file (default
//! /etc/claude-shim/policy.toml, the schema of specs/policies/README.md) that
//! `create` applies to every container, whatever config.json the engine wrote,
//! after the guards and before libcontainer sees the spec. It only tightens:
//! capabilities are intersected with the policy's (none by default),
//! no_new_privileges is forced, the policy's seccomp profile is stacked on
//! the engine's (the kernel answers each call with the stricter of the two),
//! masked and read-only paths are added, limits are lowered, and the network
//! mode is set (run.claude-shim.network, which shim/src/network applies). What
//! it cannot tighten it refuses: the host's namespaces, binds of the host's
//! root, kernel filesystems, devices, sockets, engine state or hidden paths,
//! added devices, and annotations that ask for more than the policy allows.
//! Without the file, claude-shim is a plain OCI runtime (and says so with
//! --debug). docs/admin-policy.md documents the rules and their errors.

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use claude_shim_bundle::annotations;
use claude_shim_bundle::policy::values::{CidrRule, HostPattern, NetworkMode, ProfileRef, UserNamespace};
use claude_shim_bundle::{seccomp, Policy};
use libcontainer::oci_spec::runtime::{
    Capabilities, LinuxCapabilities, LinuxCpuBuilder, LinuxDeviceCgroup, LinuxDeviceCgroupBuilder, LinuxDeviceType,
    LinuxNamespaceType, LinuxPidsBuilder, LinuxResourcesBuilder, LinuxSeccomp, PosixRlimitBuilder, Process, Spec,
};

use crate::runtime::guards;
use crate::state::Meta;

/// The admin policy's path, fixed at build time (CLAUDE_SHIM_ADMIN_POLICY_PATH
/// in cargo's environment), /etc/claude-shim/policy.toml by default.
pub const DEFAULT_PATH: &str = match option_env!("CLAUDE_SHIM_ADMIN_POLICY_PATH") {
    Some(p) => p,
    None => "/etc/claude-shim/policy.toml",
};

/// Another path for the admin policy, honoured only when claude-shim runs as
/// root (who may edit the default file anyway); an unprivileged caller cannot
/// choose it. Engines pass it through (containerd's environment, podman's
/// conmon_env_vars).
pub const PATH_ENV: &str = "CLAUDE_SHIM_ADMIN_POLICY";

/// An annotation that stacks a built-in policy on the admin policy: it can
/// only add restrictions.
pub const PROFILE_ANNOTATION: &str = "run.claude-shim.profile";

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

/// The loaded admin policy.
pub struct Admin {
    pub path: PathBuf,
    pub policy: Policy,
}

/// Finds, checks and parses the admin policy; None when there is none.
pub fn load() -> Result<Option<Admin>> {
    let path = match std::env::var_os(PATH_ENV).filter(|p| !p.is_empty()) {
        Some(p) if nix::unistd::geteuid().is_root() => PathBuf::from(p),
        Some(_) => {
            tracing::debug!("ignoring {PATH_ENV}: only root may choose the admin policy");
            PathBuf::from(DEFAULT_PATH)
        }
        None => PathBuf::from(DEFAULT_PATH),
    };
    match fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && path == Path::new(DEFAULT_PATH) => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("read admin policy {}", path.display())),
        Ok(_) => {}
    }
    check_trusted(&path).with_context(|| format!("use admin policy {}", path.display()))?;
    let text = crate::bounded::read_to_string(&path, crate::bounded::POLICY_LIMIT)
        .with_context(|| format!("read admin policy {}", path.display()))?;
    let policy = Policy::from_toml_str(&text, &path.display().to_string())?;
    Ok(Some(Admin { path, policy }))
}

/// The file and every directory above it must be root's and writable by no
/// one else (a sticky directory such as /tmp excepted, where others cannot
/// replace root's entries): otherwise whoever can write there sets the policy.
fn check_trusted(path: &Path) -> Result<()> {
    let real = fs::canonicalize(path).context("resolve the path")?;
    let meta = fs::metadata(&real).context("stat the file")?;
    if !meta.is_file() {
        bail!("it is not a regular file");
    }
    if meta.uid() != 0 {
        bail!("it is owned by uid {}, not root", meta.uid());
    }
    if meta.mode() & 0o022 != 0 {
        bail!("it is writable by group or others (mode {:o})", meta.mode() & 0o7777);
    }
    for dir in real.ancestors().skip(1) {
        let m = fs::metadata(dir).with_context(|| format!("stat {}", dir.display()))?;
        let sticky = m.mode() & 0o1000 != 0;
        if m.uid() != 0 || (m.mode() & 0o022 != 0 && !sticky) {
            bail!(
                "its directory {} is not root's alone (uid {}, mode {:o})",
                dir.display(),
                m.uid(),
                m.mode() & 0o7777
            );
        }
    }
    Ok(())
}

/// The hook `create` runs on every spec (runtime::Adapt).
pub fn apply(spec: &mut Spec, meta: &mut Meta) -> Result<()> {
    let Some(admin) = load()? else {
        tracing::debug!("no admin policy at {DEFAULT_PATH}: running as a plain OCI runtime");
        return Ok(());
    };
    apply_policy(admin, spec, meta)
}

/// `apply` with a loaded admin policy (the config.json fuzz calls it directly).
pub fn apply_policy(admin: Admin, spec: &mut Spec, meta: &mut Meta) -> Result<()> {
    let context = || format!("apply admin policy {}", admin.path.display());
    let mut layers = vec![admin.policy.clone()];
    if let Some(name) = annotation(spec, PROFILE_ANNOTATION) {
        layers.push(builtin_profile(&name).with_context(context)?);
    }
    let stacked = tighten(spec, &layers, &RealHost, &meta.bundle).with_context(context)?;
    tracing::debug!(
        "admin policy {} applied ({} layer(s), {} stacked seccomp filter(s); its filesystem root, workdir, \
         writable, readonly and protected paths and its environment shape only bundles it compiles)",
        admin.path.display(),
        layers.len(),
        stacked.len()
    );
    meta.admin_policy = Some(admin.path);
    meta.stacked_seccomp = stacked;
    Ok(())
}

/// Holds a process started by `exec` to what the admin policy left the
/// container: no capability its init lacks, no_new_privileges when the init
/// has it. (The stacked filters are loaded by the executor.)
pub fn tighten_exec(meta: &Meta, init: &Spec, process: &mut Process) {
    if meta.admin_policy.is_none() {
        return;
    }
    let init_process = init.process().as_ref();
    let allowed: Capabilities = init_process
        .and_then(|p| p.capabilities().as_ref())
        .and_then(|c| c.bounding().clone())
        .unwrap_or_default();
    intersect_capabilities(process, &allowed);
    if init_process.and_then(|p| p.no_new_privileges()) == Some(true) {
        process.set_no_new_privileges(Some(true));
    }
}

fn annotation(spec: &Spec, key: &str) -> Option<String> {
    spec.annotations().as_ref().and_then(|a| a.get(key)).cloned()
}

fn builtin_profile(name: &str) -> Result<Policy> {
    match name {
        "agent" => Ok(Policy::embedded_default()),
        "offline" => Ok(Policy::embedded_offline()),
        other => bail!("annotation {PROFILE_ANNOTATION}={other:?} names no built-in profile (agent, offline)"),
    }
}

/// What `tighten` needs to know about the machine.
pub trait Host {
    /// Whether the namespace file `path` is this process's own namespace of
    /// kind `ns` (`net`, `pid`...), i.e. the host's.
    fn is_ours(&self, ns: &str, path: &Path) -> Result<bool>;
    /// `path` with every symlink resolved; None when it does not exist.
    fn resolve(&self, path: &Path) -> Option<PathBuf>;
    /// What `path` is (symlinks followed).
    fn kind(&self, path: &Path) -> Option<FileKind>;
    /// The home directory of the user claude-shim runs as (what `~` means).
    fn home(&self) -> PathBuf;
    /// A policy's own seccomp profile file.
    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>>;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Dir,
    File,
    Socket,
    /// A character device: major, minor.
    CharDevice(u64, u64),
    BlockDevice,
    Other,
}

struct RealHost;

impl Host for RealHost {
    fn is_ours(&self, ns: &str, path: &Path) -> Result<bool> {
        let theirs = fs::metadata(path).with_context(|| format!("stat namespace {}", path.display()))?;
        let ours = fs::metadata(format!("/proc/self/ns/{ns}")).with_context(|| format!("stat /proc/self/ns/{ns}"))?;
        Ok(theirs.dev() == ours.dev() && theirs.ino() == ours.ino())
    }

    fn resolve(&self, path: &Path) -> Option<PathBuf> {
        fs::canonicalize(path).ok()
    }

    fn kind(&self, path: &Path) -> Option<FileKind> {
        let m = fs::metadata(path).ok()?;
        let t = m.file_type();
        Some(if t.is_dir() {
            FileKind::Dir
        } else if t.is_file() {
            FileKind::File
        } else if t.is_socket() {
            FileKind::Socket
        } else if t.is_char_device() {
            FileKind::CharDevice(nix::sys::stat::major(m.rdev()), nix::sys::stat::minor(m.rdev()))
        } else if t.is_block_device() {
            FileKind::BlockDevice
        } else {
            FileKind::Other
        })
    }

    fn home(&self) -> PathBuf {
        nix::unistd::User::from_uid(nix::unistd::geteuid())
            .ok()
            .flatten()
            .map(|u| u.dir)
            .unwrap_or_else(|| PathBuf::from("/root"))
    }

    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        crate::bounded::read(path, crate::bounded::PROFILE_LIMIT)
    }
}

/// Tightens `spec` by every policy of `layers` (the admin policy, then a
/// profile an annotation selected), or refuses it. Returns the seccomp
/// profiles to stack on the spec's own, adapted for libcontainer.
pub fn tighten(spec: &mut Spec, layers: &[Policy], host: &dyn Host, bundle: &Path) -> Result<Vec<LinuxSeccomp>> {
    // The spec's author decides the user namespace and its id maps; a layer
    // that demands one the spec lacks cannot add it, so nothing runs rather
    // than something less isolated than asked.
    let has_userns = spec
        .linux()
        .as_ref()
        .and_then(|l| l.namespaces().as_ref())
        .is_some_and(|ns| ns.iter().any(|n| n.typ() == LinuxNamespaceType::User));
    if let Some(p) = layers
        .iter()
        .find(|p| p.identity.user_namespace == UserNamespace::Always && !has_userns)
    {
        bail!(
            "policy {}: identity.user_namespace = \"always\" needs a user namespace, and config.json asks for none",
            p.origin
        );
    }
    let network = resolve_network(spec, layers)?;
    check_namespaces(spec, host, network)?;
    check_mounts(spec, layers, host, bundle)?;
    tighten_devices(spec)?;
    tighten_process(spec, layers);
    add_paths(spec, layers);
    tighten_resources(spec, layers);
    check_best_effort(spec, layers)?;
    stacked_profiles(layers, host)
}

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
fn check_namespaces(spec: &Spec, host: &dyn Host, mode: NetworkMode) -> Result<()> {
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
fn check_mounts(spec: &Spec, layers: &[Policy], host: &dyn Host, bundle: &Path) -> Result<()> {
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
fn tighten_devices(spec: &mut Spec) -> Result<()> {
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

/// The capabilities every layer allows (none unless a layer lists some).
fn allowed_capabilities(layers: &[Policy]) -> Capabilities {
    let mut allowed: Option<Capabilities> = None;
    for p in layers {
        let caps: Capabilities = p.identity.capabilities.iter().map(|c| c.0).collect();
        allowed = Some(match allowed {
            None => caps,
            Some(a) => a.intersection(&caps).copied().collect(),
        });
    }
    allowed.unwrap_or_default()
}

fn intersect_capabilities(process: &mut Process, allowed: &Capabilities) {
    let Some(caps) = process.capabilities().clone() else {
        return;
    };
    let cut = |set: &Option<Capabilities>| -> Option<Capabilities> {
        set.as_ref().map(|s| s.intersection(allowed).copied().collect())
    };
    let mut out = LinuxCapabilities::default();
    out.set_bounding(cut(caps.bounding()));
    out.set_effective(cut(caps.effective()));
    out.set_inheritable(cut(caps.inheritable()));
    out.set_permitted(cut(caps.permitted()));
    out.set_ambient(cut(caps.ambient()));
    process.set_capabilities(Some(out));
}

/// Capabilities, no_new_privileges and rlimits.
fn tighten_process(spec: &mut Spec, layers: &[Policy]) {
    let allowed = allowed_capabilities(layers);
    let Some(process) = spec.process_mut() else { return };
    intersect_capabilities(process, &allowed);
    if layers.iter().any(|p| p.identity.no_new_privileges) {
        process.set_no_new_privileges(Some(true));
    }
    let mut rlimits = process.rlimits().clone().unwrap_or_default();
    for p in layers {
        for (name, limit) in &p.resources.rlimits {
            let typ = name.oci();
            let limit = limit.0;
            match rlimits.iter_mut().find(|r| r.typ() == typ) {
                Some(r) => {
                    *r = PosixRlimitBuilder::default()
                        .typ(typ)
                        .soft(r.soft().min(limit))
                        .hard(r.hard().min(limit))
                        .build()
                        .expect("an rlimit with type and limits is complete");
                }
                None => rlimits.push(
                    PosixRlimitBuilder::default()
                        .typ(typ)
                        .soft(limit)
                        .hard(limit)
                        .build()
                        .expect("an rlimit with type and limits is complete"),
                ),
            }
        }
    }
    if !rlimits.is_empty() {
        process.set_rlimits(Some(rlimits));
    }
}

/// The kernel paths every sandbox masks or keeps read-only, and the layers'
/// masked paths (engine-injected secrets under /run/secrets among them).
fn add_paths(spec: &mut Spec, layers: &[Policy]) {
    let Some(linux) = spec.linux_mut() else { return };
    let mut masked = linux.masked_paths().clone().unwrap_or_default();
    let extra = claude_shim_bundle::compile::MASKED_PATHS
        .iter()
        .map(|s| s.to_string())
        .chain(
            layers
                .iter()
                .flat_map(|p| p.filesystem.masked_paths())
                .map(|p| p.display().to_string()),
        );
    for p in extra {
        if !masked.contains(&p) {
            masked.push(p);
        }
    }
    linux.set_masked_paths(Some(masked));
    let mut readonly = linux.readonly_paths().clone().unwrap_or_default();
    for p in claude_shim_bundle::compile::READONLY_PATHS {
        if !readonly.iter().any(|r| r == p) {
            readonly.push(p.to_string());
        }
    }
    linux.set_readonly_paths(Some(readonly));
}

/// Memory, pids and CPU: the lowest of the spec's and every layer's.
fn tighten_resources(spec: &mut Spec, layers: &[Policy]) {
    let Some(linux) = spec.linux_mut() else { return };
    let mut resources = linux
        .resources()
        .clone()
        .unwrap_or_else(|| LinuxResourcesBuilder::default().build().expect("empty resources"));
    for p in layers {
        let r = &p.resources;
        if let Some(pids) = r.pids {
            let current = resources.pids().as_ref().map(|x| x.limit()).filter(|l| *l > 0);
            let limit = current.map_or(pids.0 as i64, |c| c.min(pids.0 as i64));
            resources.set_pids(Some(LinuxPidsBuilder::default().limit(limit).build().expect("pids")));
        }
        if let Some(mem) = r.memory {
            let mut memory = (*resources.memory()).unwrap_or_default();
            let current = memory.limit().filter(|l| *l > 0);
            let limit = current.map_or(mem.0 as i64, |c| c.min(mem.0 as i64));
            memory.set_limit(Some(limit));
            resources.set_memory(Some(memory));
        }
        if let Some(cpus) = r.cpus {
            let period = claude_shim_bundle::compile::CPU_PERIOD;
            let quota = (cpus.0 * period as f64).round() as i64;
            let mut cpu = resources
                .cpu()
                .clone()
                .unwrap_or_else(|| LinuxCpuBuilder::default().build().expect("cpu"));
            let looser = match (cpu.quota(), cpu.period()) {
                (Some(q), Some(p)) if q > 0 && p > 0 => (q as f64 / p as f64) > cpus.0,
                _ => true,
            };
            if looser {
                cpu.set_quota(Some(quota));
                cpu.set_period(Some(period));
            }
            resources.set_cpu(Some(cpu));
        }
    }
    linux.set_resources(Some(resources));
}

fn check_best_effort(spec: &Spec, layers: &[Policy]) -> Result<()> {
    let asked = annotation(spec, annotations::BEST_EFFORT_RESOURCES).is_some_and(|v| v == "true");
    if asked && !layers.iter().all(|p| p.resources.best_effort) {
        bail!(
            "annotation {}=\"true\" is refused: the admin policy applies every resource limit or none",
            annotations::BEST_EFFORT_RESOURCES
        );
    }
    Ok(())
}

/// The network lists of one mode, as `run.claude-shim.network.policy` holds them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct NetLists {
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    allow_cidrs: Vec<String>,
}

/// none > allowlist > public.
fn strictness(m: NetworkMode) -> u8 {
    match m {
        NetworkMode::None => 2,
        NetworkMode::Allowlist => 1,
        NetworkMode::Public => 0,
    }
}

fn parse_mode(s: &str) -> Option<NetworkMode> {
    match s {
        "none" => Some(NetworkMode::None),
        "allowlist" => Some(NetworkMode::Allowlist),
        "public" => Some(NetworkMode::Public),
        _ => None,
    }
}

/// Whether host pattern `outer` admits everything `inner` does: the same
/// pattern, or a `*.domain` over it, on any port or the same one.
fn covers(outer: &str, inner: &str) -> bool {
    let split = |p: &str| match p.rsplit_once(':') {
        Some((h, port)) => (h.to_owned(), Some(port.to_owned())),
        None => (p.to_owned(), None),
    };
    let ((oh, op), (ih, ip)) = (split(outer), split(inner));
    if op.is_some() && op != ip {
        return false;
    }
    if oh == ih {
        return true;
    }
    match oh.strip_prefix("*.") {
        Some(domain) => {
            let name = ih.strip_prefix("*.").unwrap_or(&ih);
            name.ends_with(&format!(".{domain}"))
        }
        None => false,
    }
}

/// Narrows the current mode and lists by a request (a layer's or the
/// engine's annotations), refusing one that asks for more.
fn narrow(
    cur: (NetworkMode, NetLists),
    mode: NetworkMode,
    lists: Option<NetLists>,
    who: &str,
) -> Result<(NetworkMode, NetLists)> {
    let (cur_mode, cur_lists) = cur;
    if strictness(mode) < strictness(cur_mode) {
        bail!(
            "{who} asks for network mode {:?}, more than the admin policy's {:?}",
            mode.as_str(),
            cur_mode.as_str()
        );
    }
    Ok(match mode {
        NetworkMode::None => (NetworkMode::None, NetLists::default()),
        NetworkMode::Allowlist => {
            let asked = lists.unwrap_or_else(|| {
                if cur_mode == NetworkMode::Allowlist {
                    cur_lists.clone()
                } else {
                    NetLists::default()
                }
            });
            if cur_mode == NetworkMode::Allowlist {
                if let Some(h) = asked
                    .allow
                    .iter()
                    .find(|h| !cur_lists.allow.iter().any(|a| covers(a, h)))
                {
                    bail!("{who} allows host {h:?}, which the admin policy does not");
                }
            }
            let mut deny = cur_lists.deny.clone();
            for d in asked.deny {
                if !deny.contains(&d) {
                    deny.push(d);
                }
            }
            (
                NetworkMode::Allowlist,
                NetLists {
                    allow: asked.allow,
                    deny,
                    allow_cidrs: Vec::new(),
                },
            )
        }
        NetworkMode::Public => {
            let asked = lists
                .map(|l| l.allow_cidrs)
                .unwrap_or_else(|| cur_lists.allow_cidrs.clone());
            if let Some(c) = asked.iter().find(|c| !cur_lists.allow_cidrs.contains(c)) {
                bail!("{who} opens {c}, which the admin policy does not");
            }
            (
                NetworkMode::Public,
                NetLists {
                    allow_cidrs: asked,
                    ..NetLists::default()
                },
            )
        }
    })
}

fn lists_of(p: &Policy) -> NetLists {
    NetLists {
        allow: p.network.allow.iter().map(|h| h.0.clone()).collect(),
        deny: p.network.deny.iter().map(|h| h.0.clone()).collect(),
        allow_cidrs: p.network.allow_cidrs.iter().map(|c| c.0.clone()).collect(),
    }
}

/// The network mode and lists: the admin policy's, narrowed by the other
/// layers and by the engine's annotations; written back as annotations for
/// the network helper.
fn resolve_network(spec: &mut Spec, layers: &[Policy]) -> Result<NetworkMode> {
    let Some((first, rest)) = layers.split_first() else {
        bail!("no admin policy to apply");
    };
    let mut cur = (first.network.mode, lists_of(first));
    for p in rest {
        cur = narrow(
            cur,
            p.network.mode,
            Some(lists_of(p)),
            &format!("profile {:?}", p.name()),
        )?;
    }
    let asked_mode = annotation(spec, annotations::NETWORK);
    let asked_lists = annotation(spec, annotations::NETWORK_POLICY);
    if asked_mode.is_some() || asked_lists.is_some() {
        let mode = match &asked_mode {
            Some(m) => parse_mode(m).ok_or_else(|| {
                anyhow!(
                    "annotation {}={m:?} is not none, allowlist or public",
                    annotations::NETWORK
                )
            })?,
            None => cur.0,
        };
        let lists = match &asked_lists {
            Some(json) => {
                let l: NetLists = serde_json::from_str(json)
                    .map_err(|e| anyhow!("annotation {} is not valid: {e}", annotations::NETWORK_POLICY))?;
                for h in l.allow.iter().chain(&l.deny) {
                    HostPattern::try_from(h.clone())
                        .map_err(|e| anyhow!("annotation {}: {e}", annotations::NETWORK_POLICY))?;
                }
                for c in &l.allow_cidrs {
                    CidrRule::try_from(c.clone())
                        .map_err(|e| anyhow!("annotation {}: {e}", annotations::NETWORK_POLICY))?;
                }
                Some(l)
            }
            None => None,
        };
        let who = match &asked_mode {
            Some(m) => format!("annotation {}={m:?}", annotations::NETWORK),
            None => format!("annotation {}", annotations::NETWORK_POLICY),
        };
        cur = narrow(cur, mode, lists, &who)?;
    }
    let mut ann = spec.annotations().clone().unwrap_or_default();
    ann.insert(annotations::NETWORK.to_owned(), cur.0.as_str().to_owned());
    ann.insert(
        annotations::NETWORK_POLICY.to_owned(),
        serde_json::to_string(&cur.1).expect("strings serialize"),
    );
    spec.set_annotations(Some(ann));
    Ok(cur.0)
}

/// Each layer's seccomp profile (with its `seccomp.allow` additions), once
/// each, adapted for libcontainer by the same guards as an engine's.
fn stacked_profiles(layers: &[Policy], host: &dyn Host) -> Result<Vec<LinuxSeccomp>> {
    let mut out: Vec<LinuxSeccomp> = Vec::new();
    let mut seen = HashSet::new();
    for p in layers {
        let mut profile = match &p.seccomp.profile {
            ProfileRef::Agent => seccomp::agent_profile(),
            ProfileRef::File(path) => {
                let raw = host
                    .read(path)
                    .with_context(|| format!("read seccomp profile {}", path.display()))?;
                serde_json::from_slice(&raw).map_err(|e| anyhow!("parse seccomp profile {}: {e}", path.display()))?
            }
        };
        let extra: Vec<String> = p.seccomp.allow.iter().map(|s| s.0.clone()).collect();
        seccomp::allow_extra(&mut profile, &extra);
        let key = serde_json::to_string(&profile).expect("a seccomp profile serializes");
        if !seen.insert(key) {
            continue;
        }
        let mut warnings = Vec::new();
        guards::check_syscall_names(&profile, &mut warnings)?;
        guards::swap_masked_eq_operands(&mut profile);
        warnings.extend(guards::deny_clone3(&mut profile));
        for w in warnings {
            tracing::warn!("admin policy: {w}");
        }
        out.push(profile);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
