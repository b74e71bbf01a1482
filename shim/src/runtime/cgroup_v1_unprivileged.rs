//! Resource limits for an unprivileged caller on cgroup v1. libcgroups
//! applies the devices controller whenever a container has resources, and
//! writing devices.allow needs CAP_SYS_ADMIN, so libcontainer cannot start an
//! unprivileged container with any limit. The runtime hands libcontainer the
//! spec without resources and writes the limits itself into the container's
//! cgroup (in the delegated subtree) before the process starts, reading each
//! back. A resource it does not handle is refused, never dropped.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// The v1 controllers a delegated subtree must hold (hack/delegate-cgroups).
const DELEGATED: &[&str] = &["memory", "pids", "cpu", "freezer", "devices"];

/// The first of `parent`'s directories in the mounted v1 controllers this
/// process cannot write: libcontainer, unprivileged, can only make cgroups
/// in a subtree root delegated.
pub fn not_delegated(parent: &Path) -> Option<PathBuf> {
    let rel = parent.strip_prefix("/").unwrap_or(parent);
    DELEGATED
        .iter()
        .map(|c| Path::new("/sys/fs/cgroup").join(c))
        .filter(|dir| dir.is_dir())
        .map(|dir| dir.join(rel))
        .find(|p| nix::unistd::access(p, nix::unistd::AccessFlags::W_OK).is_err())
}
use libcontainer::oci_spec::runtime::LinuxResources;

/// The cgroup files to write, in order: (controller, file, value).
pub fn plan(resources: &LinuxResources) -> Result<Vec<(&'static str, &'static str, String)>> {
    let mut out = Vec::new();
    if let Some(m) = resources.memory() {
        if let Some(limit) = m.limit() {
            out.push(("memory", "memory.limit_in_bytes", limit.to_string()));
        }
        if let Some(r) = m.reservation() {
            out.push(("memory", "memory.soft_limit_in_bytes", r.to_string()));
        }
        if m.swap().is_some() || m.kernel().is_some() || m.kernel_tcp().is_some() || m.swappiness().is_some() {
            bail!("apply memory swap/kernel/swappiness limits unprivileged on cgroup v1: not supported");
        }
    }
    if let Some(p) = resources.pids() {
        let v = if p.limit() <= 0 {
            "max".to_owned()
        } else {
            p.limit().to_string()
        };
        out.push(("pids", "pids.max", v));
    }
    if let Some(c) = resources.cpu() {
        if let Some(period) = c.period() {
            out.push(("cpu", "cpu.cfs_period_us", period.to_string()));
        }
        if let Some(quota) = c.quota() {
            out.push(("cpu", "cpu.cfs_quota_us", quota.to_string()));
        }
        if let Some(shares) = c.shares() {
            out.push(("cpu", "cpu.shares", shares.to_string()));
        }
        if let Some(cpus) = c.cpus() {
            out.push(("cpuset", "cpuset.cpus", cpus.clone()));
        }
        if let Some(mems) = c.mems() {
            out.push(("cpuset", "cpuset.mems", mems.clone()));
        }
        if c.realtime_period().is_some() || c.realtime_runtime().is_some() || c.idle().is_some() {
            bail!("apply realtime or idle cpu settings unprivileged on cgroup v1: not supported");
        }
    }
    if resources.block_io().is_some() || resources.hugepage_limits().as_ref().is_some_and(|h| !h.is_empty()) {
        bail!("apply block I/O or hugepage limits unprivileged on cgroup v1: not supported");
    }
    if resources.network().is_some() || resources.rdma().is_some() {
        bail!("apply network or rdma limits unprivileged on cgroup v1: not supported");
    }
    if resources.devices().as_ref().is_some_and(|d| !d.is_empty()) {
        bail!("apply device cgroup rules unprivileged on cgroup v1: writing devices.allow needs CAP_SYS_ADMIN");
    }
    Ok(out)
}

/// Whether the machine's cgroups are v1 (or hybrid), where this applies.
pub fn is_v1() -> bool {
    Path::new("/sys/fs/cgroup/memory").is_dir() || Path::new("/sys/fs/cgroup/pids").is_dir()
}

/// Writes the plan into the container's cgroup and reads each value back.
pub fn apply(cgroups_path: &Path, plan: &[(&'static str, &'static str, String)]) -> Result<()> {
    let rel = cgroups_path.strip_prefix("/").unwrap_or(cgroups_path);
    for (controller, file, value) in plan {
        let path: PathBuf = Path::new("/sys/fs/cgroup").join(controller).join(rel).join(file);
        fs::write(&path, value).with_context(|| format!("write {value} to {}", path.display()))?;
        let back = fs::read_to_string(&path).with_context(|| format!("read back {}", path.display()))?;
        let back = back.trim();
        let same = back == value || (value == "max" && back == "max") || numeric_close(back, value);
        if !same {
            bail!("apply {} = {value}: the cgroup reads {back}", path.display());
        }
    }
    Ok(())
}

/// Refuses an init that is not in the container's cgroup of every limited
/// controller: libcgroups leaves a rootless process where it is when it may
/// not join (vendor/README.md), and a limit written beside it holds nothing.
pub fn check_joined(pid: i32, cgroups_path: &Path, plan: &[(&'static str, &'static str, String)]) -> Result<()> {
    let path = format!("/proc/{pid}/cgroup");
    let text = fs::read_to_string(&path).with_context(|| format!("read {path}"))?;
    for (controller, _, _) in plan {
        let joined = text.lines().any(|l| {
            let mut f = l.splitn(3, ':').skip(1);
            let (names, at) = (f.next().unwrap_or(""), f.next().unwrap_or(""));
            names.split(',').any(|n| n == *controller) && Path::new(at) == cgroups_path
        });
        if !joined {
            bail!(
                "limit {controller}: the init is not in cgroup {} ({path} says otherwise)",
                cgroups_path.display()
            );
        }
    }
    Ok(())
}

/// The kernel rounds memory limits to pages.
fn numeric_close(back: &str, want: &str) -> bool {
    match (back.parse::<i64>(), want.parse::<i64>()) {
        (Ok(b), Ok(w)) => (b - w).abs() < 4096,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use libcontainer::oci_spec::runtime::{
        LinuxCpuBuilder, LinuxMemoryBuilder, LinuxPidsBuilder, LinuxResourcesBuilder,
    };

    #[test]
    fn memory_pids_cpu_become_cgroup_files() {
        let r = LinuxResourcesBuilder::default()
            .memory(LinuxMemoryBuilder::default().limit(1i64 << 30).build().unwrap())
            .pids(LinuxPidsBuilder::default().limit(100i64).build().unwrap())
            .cpu(
                LinuxCpuBuilder::default()
                    .quota(50_000i64)
                    .period(100_000u64)
                    .build()
                    .unwrap(),
            )
            .build()
            .unwrap();
        let p = plan(&r).unwrap();
        assert_eq!(
            p,
            vec![
                ("memory", "memory.limit_in_bytes", (1i64 << 30).to_string()),
                ("pids", "pids.max", "100".to_owned()),
                ("cpu", "cpu.cfs_period_us", "100000".to_owned()),
                ("cpu", "cpu.cfs_quota_us", "50000".to_owned()),
            ]
        );
    }

    #[test]
    fn unsupported_resources_are_refused() {
        let r = LinuxResourcesBuilder::default()
            .memory(LinuxMemoryBuilder::default().swap(10i64).build().unwrap())
            .build()
            .unwrap();
        assert!(plan(&r).is_err());
    }
}
