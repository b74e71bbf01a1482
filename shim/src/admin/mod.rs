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
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use claude_shim_bundle::annotations;
use claude_shim_bundle::policy::values::{ProfileRef, UserNamespace};
use claude_shim_bundle::{seccomp, Policy};
use libcontainer::oci_spec::runtime::{
    Capabilities, LinuxCapabilities, LinuxCpuBuilder, LinuxNamespaceType, LinuxPidsBuilder, LinuxResourcesBuilder,
    LinuxSeccomp, PosixRlimitBuilder, Process, Spec,
};

use crate::runtime::guards;
use crate::state::Meta;
use annotation::{annotation, builtin_profile, PROFILE_ANNOTATION};
use host::{Host, RealHost};
use network::resolve_network;
use refuse::{check_mounts, check_namespaces, tighten_devices};

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

/// The uid the host's root has as seen from this process's user namespace:
/// the one `uid_map` maps to host uid 0, else (host root unmapped, as under
/// a rootless engine: podman, rootlesskit) the overflow uid every unmapped
/// owner shows as. Unmapped owners are not the caller, who cannot write as
/// them; so where host root is unmapped the policy is trusted as the host's
/// when the chain is the overflow uid's (a rootless user could run any
/// runtime of their own anyway: there, the policy guards against mistakes,
/// not against the caller).
fn host_root_uid(uid_map: &str, overflow: u32) -> u32 {
    for line in uid_map.lines() {
        let f: Vec<u64> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
        if let [inside, outside, count] = f[..] {
            if outside == 0 && count > 0 {
                return inside as u32;
            }
        }
    }
    overflow
}

/// `host_root_uid` for this process.
fn host_root() -> u32 {
    let map = fs::read_to_string("/proc/self/uid_map").unwrap_or_else(|_| "0 0 4294967295".to_owned());
    let overflow = fs::read_to_string("/proc/sys/kernel/overflowuid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(65534);
    host_root_uid(&map, overflow)
}

/// The file and every directory above it must be the host root's and
/// writable by no one else (a sticky directory such as /tmp excepted, where
/// others cannot replace root's entries): otherwise whoever can write there
/// sets the policy.
fn check_trusted(path: &Path) -> Result<()> {
    let real = fs::canonicalize(path).context("resolve the path")?;
    let meta = fs::metadata(&real).context("stat the file")?;
    if !meta.is_file() {
        bail!("it is not a regular file");
    }
    let root = host_root();
    if meta.uid() != root {
        if root == 0 {
            bail!("it is owned by uid {}, not root", meta.uid());
        }
        bail!(
            "it is owned by uid {}, not the host's root (uid {root} in this user namespace)",
            meta.uid()
        );
    }
    if meta.mode() & 0o022 != 0 {
        bail!("it is writable by group or others (mode {:o})", meta.mode() & 0o7777);
    }
    for dir in real.ancestors().skip(1) {
        let m = fs::metadata(dir).with_context(|| format!("stat {}", dir.display()))?;
        let sticky = m.mode() & 0o1000 != 0;
        if m.uid() != root || (m.mode() & 0o022 != 0 && !sticky) {
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
         writable, readonly and protected paths, home, unix_sockets and its environment shape only bundles it compiles)",
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

mod annotation;
mod host;
mod network;
mod refuse;

#[cfg(test)]
mod tests;
