//! The kernel-isolation pass: namespaces (and the user namespace's id maps),
//! masked and read-only paths, the seccomp profile with the policy's extra
//! allows, and the cgroup resources. `cgroupsPath` is left to the runtime.

use oci_spec::runtime::{
    Linux, LinuxCpuBuilder, LinuxIdMappingBuilder, LinuxMemoryBuilder, LinuxNamespaceBuilder, LinuxNamespaceType,
    LinuxPidsBuilder, LinuxResources, LinuxResourcesBuilder, LinuxSeccomp,
};

use super::ctx::Ctx;
use super::input::Invocation;
use super::output::CompileError;
use crate::policy::values::{ProfileRef, UserNamespace};
use crate::policy::Policy;
use crate::seccomp;

/// The CFS period the CPU quota is expressed in (100 ms, runc's default).
pub const CPU_PERIOD: u64 = 100_000;

pub(crate) fn wants_user_namespace(policy: &Policy, inv: &Invocation) -> Result<bool, String> {
    match (policy.identity.user_namespace, inv.unprivileged) {
        (UserNamespace::Always, _) | (UserNamespace::Auto, true) => Ok(true),
        (UserNamespace::Auto, false) | (UserNamespace::Never, false) => Ok(false),
        (UserNamespace::Never, true) => Err(
            "\"never\" is refused when running unprivileged: without a user namespace nothing can be isolated".into(),
        ),
    }
}

fn namespaces(userns: bool) -> Vec<oci_spec::runtime::LinuxNamespace> {
    let mut types = vec![
        LinuxNamespaceType::Pid,
        LinuxNamespaceType::Network,
        LinuxNamespaceType::Ipc,
        LinuxNamespaceType::Uts,
        LinuxNamespaceType::Mount,
        LinuxNamespaceType::Cgroup,
    ];
    if userns {
        types.push(LinuxNamespaceType::User);
    }
    types
        .into_iter()
        .map(|t| {
            LinuxNamespaceBuilder::default()
                .typ(t)
                .build()
                .expect("a namespace with a type is complete")
        })
        .collect()
}

fn seccomp_profile(ctx: &Ctx<'_>) -> Result<LinuxSeccomp, CompileError> {
    let policy = &ctx.policy.seccomp;
    let mut profile = match &policy.profile {
        ProfileRef::Agent => seccomp::agent_profile(),
        ProfileRef::File(path) => {
            let raw = ctx
                .host
                .read(path)
                .map_err(|e| ctx.field_error("seccomp.profile", format!("read {}: {e}", path.display())))?;
            serde_json::from_slice::<LinuxSeccomp>(&raw).map_err(|e| {
                ctx.field_error(
                    "seccomp.profile",
                    format!("{} is not an OCI LinuxSeccomp JSON: {e}", path.display()),
                )
            })?
        }
    };
    let extra: Vec<String> = policy.allow.iter().map(|s| s.0.clone()).collect();
    seccomp::allow_extra(&mut profile, &extra);
    Ok(profile)
}

fn resources(ctx: &Ctx<'_>) -> Option<LinuxResources> {
    let r = &ctx.policy.resources;
    if r.memory.is_none() && r.pids.is_none() && r.cpus.is_none() {
        return None;
    }
    let mut b = LinuxResourcesBuilder::default();
    if let Some(m) = r.memory {
        b = b.memory(
            LinuxMemoryBuilder::default()
                .limit(m.0 as i64)
                .build()
                .expect("memory limits are complete"),
        );
    }
    if let Some(p) = r.pids {
        b = b.pids(
            LinuxPidsBuilder::default()
                .limit(p.0 as i64)
                .build()
                .expect("a pids limit is complete"),
        );
    }
    if let Some(c) = r.cpus {
        let quota = (c.0 * CPU_PERIOD as f64).round() as i64;
        b = b.cpu(
            LinuxCpuBuilder::default()
                .quota(quota)
                .period(CPU_PERIOD)
                .build()
                .expect("cpu limits are complete"),
        );
    }
    let mut res = b.build().expect("resources are complete");
    res.set_devices(None);
    Some(res)
}

pub(crate) fn linux(ctx: &Ctx<'_>, masked: Vec<String>, readonly: Vec<String>) -> Result<Linux, CompileError> {
    // Linux::default() is runc's sample; every field is set here.
    let mut l = Linux::default();
    l.set_namespaces(Some(namespaces(ctx.userns)));
    if ctx.userns {
        // The run's ids are root inside: libcontainer configures a new user
        // namespace as its uid 0 (setuid(0) there fails unless 0 is mapped).
        let (host_uid, host_gid) = ctx.run_as.host_ids();
        let uid = LinuxIdMappingBuilder::default()
            .container_id(0u32)
            .host_id(host_uid)
            .size(1u32)
            .build()
            .expect("an id mapping is complete");
        let gid = LinuxIdMappingBuilder::default()
            .container_id(0u32)
            .host_id(host_gid)
            .size(1u32)
            .build()
            .expect("an id mapping is complete");
        l.set_uid_mappings(Some(vec![uid]));
        l.set_gid_mappings(Some(vec![gid]));
    } else {
        l.set_uid_mappings(None);
        l.set_gid_mappings(None);
    }
    l.set_masked_paths(Some(masked));
    l.set_readonly_paths(Some(readonly));
    l.set_seccomp(Some(seccomp_profile(ctx)?));
    l.set_resources(resources(ctx));
    l.set_cgroups_path(None);
    l.set_devices(None);
    l.set_sysctl(None);
    l.set_rootfs_propagation(None);
    Ok(l)
}
