//! Where a container's cgroup goes on cgroup v2 (the unified hierarchy users'
//! machines boot with). Root puts containers under one parent; an
//! unprivileged caller uses the subtree systemd delegated to it, the cgroup
//! it runs in (`systemd-run --user --scope -p Delegate=yes`), found from
//! /proc/self/cgroup, so no root step is needed. Read by
//! runtime/check_bundle.rs at create, before libcontainer sees the spec.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use libcontainer::oci_spec::runtime::LinuxResources;

const ROOT: &str = "/sys/fs/cgroup";
/// The parent of root's containers, unless CLAUDE_SHIM_CGROUP_PARENT names another.
pub const DEFAULT_PARENT: &str = "/claude-shim";
pub const PARENT_ENV: &str = "CLAUDE_SHIM_CGROUP_PARENT";
/// The leaf an unprivileged runtime moves itself into, so that its own
/// cgroup may enable controllers for its children (cgroup v2 allows no
/// processes in a cgroup that hands controllers down).
const RUNTIME_LEAF: &str = "claude-shim-runtime";
/// What an unprivileged caller without a delegated cgroup runs.
pub const HOW_TO_DELEGATE: &str = "systemd-run --user --scope -p Delegate=yes claude-shim …";

pub fn is_unified() -> bool {
    matches!(
        libcgroups::common::get_cgroup_setup(),
        Ok(libcgroups::common::CgroupSetup::Unified)
    )
}

/// Root's parent: absolute, no `..`, relative to the hierarchy's root.
pub fn root_parent() -> Result<PathBuf> {
    parent_from(std::env::var(PARENT_ENV).ok())
}

fn parent_from(raw: Option<String>) -> Result<PathBuf> {
    let raw = raw.unwrap_or_else(|| DEFAULT_PARENT.to_owned());
    let path = PathBuf::from(&raw);
    let clean = path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, std::path::Component::RootDir | std::path::Component::Normal(_)));
    if !clean || path == Path::new("/") {
        bail!("use {PARENT_ENV}={raw:?}: it must be an absolute cgroup path below the root, without `..`");
    }
    Ok(path)
}

/// The controllers the resources need, as cgroup v2 names them.
pub fn controllers_for(resources: Option<&LinuxResources>) -> Vec<&'static str> {
    let mut out = Vec::new();
    let Some(r) = resources else { return out };
    if r.memory().is_some() {
        out.push("memory");
    }
    if r.pids().is_some() {
        out.push("pids");
    }
    if let Some(c) = r.cpu() {
        if c.shares().is_some() || c.quota().is_some() || c.period().is_some() || c.idle().is_some() {
            out.push("cpu");
        }
        if c.cpus().is_some() || c.mems().is_some() {
            out.push("cpuset");
        }
    }
    if r.block_io().is_some() {
        out.push("io");
    }
    if r.hugepage_limits().as_ref().is_some_and(|h| !h.is_empty()) {
        out.push("hugetlb");
    }
    out
}

/// The cgroup this process runs in, relative to the hierarchy's root.
pub fn own_cgroup() -> Result<PathBuf> {
    let text = fs::read_to_string("/proc/self/cgroup").context("read /proc/self/cgroup")?;
    parse_own(&text).context("read /proc/self/cgroup: it has no cgroup v2 line (0::/...)")
}

fn parse_own(text: &str) -> Option<PathBuf> {
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| PathBuf::from(p.trim()))
}

/// Why the caller's cgroup cannot hold its containers.
#[derive(Debug)]
pub struct NotDelegated(pub String);

/// The caller's delegated cgroup, ready to hold containers: owned by the
/// caller, with `needed` among its controllers and enabled for its children.
/// The runtime moves itself into a leaf of it when it is the only process
/// there; other processes there are the caller's and are left alone.
pub fn delegated(needed: &[&str]) -> Result<std::result::Result<PathBuf, NotDelegated>> {
    let mut rel = own_cgroup()?;
    if rel.file_name().is_some_and(|n| n == RUNTIME_LEAF) {
        rel.pop();
    }
    let dir = Path::new(ROOT).join(rel.strip_prefix("/").unwrap_or(&rel));
    let uid = nix::unistd::geteuid().as_raw();
    let meta = fs::metadata(&dir).with_context(|| format!("read cgroup {}", dir.display()))?;
    if meta.uid() != uid {
        return Ok(Err(NotDelegated(format!(
            "cgroup {} is owned by uid {}, not by uid {uid}",
            dir.display(),
            meta.uid()
        ))));
    }
    let read = |name: &str| -> Result<Vec<String>> {
        let p = dir.join(name);
        let t = fs::read_to_string(&p).with_context(|| format!("read {}", p.display()))?;
        Ok(t.split_whitespace().map(str::to_owned).collect())
    };
    let available = read("cgroup.controllers")?;
    if let Some(missing) = needed.iter().find(|c| !available.iter().any(|a| a == *c)) {
        return Ok(Err(NotDelegated(format!(
            "cgroup {} has no {missing} controller (it has: {})",
            dir.display(),
            available.join(" ")
        ))));
    }
    let enabled = read("cgroup.subtree_control")?;
    let to_enable: Vec<&str> = needed
        .iter()
        .copied()
        .filter(|c| !enabled.iter().any(|e| e == c))
        .collect();
    if to_enable.is_empty() {
        return Ok(Ok(rel));
    }
    let me = std::process::id();
    let others: Vec<String> = read("cgroup.procs")?
        .into_iter()
        .filter(|p| p.parse::<u32>().ok() != Some(me))
        .collect();
    if !others.is_empty() {
        return Ok(Err(NotDelegated(format!(
            "cgroup {} also holds other processes ({}), so it cannot hand controllers to containers",
            dir.display(),
            others.join(" ")
        ))));
    }
    let leaf = dir.join(RUNTIME_LEAF);
    match fs::create_dir(&leaf) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("create cgroup {}", leaf.display())),
    }
    let procs = leaf.join("cgroup.procs");
    fs::write(&procs, me.to_string()).with_context(|| format!("move claude-shim into {}", procs.display()))?;
    tracing::debug!("moved the runtime into {}", leaf.display());
    let control = dir.join("cgroup.subtree_control");
    let line = to_enable.iter().map(|c| format!("+{c}")).collect::<Vec<_>>().join(" ");
    fs::write(&control, &line).with_context(|| format!("write {line:?} to {}", control.display()))?;
    Ok(Ok(rel))
}

/// Whether this process may move into the cgroup `target` (relative): the
/// kernel asks for write access to cgroup.procs of the nearest common
/// ancestor of both (cgroup-v2.rst, "Delegation Containment"). libcgroups
/// leaves an unprivileged process that cannot move where it is, outside the
/// container's limits, without an error; this says why beforehand.
pub fn can_join(target: &Path) -> Result<std::result::Result<(), String>> {
    let own = own_cgroup()?;
    let common: PathBuf = own
        .components()
        .zip(target.components())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a)
        .collect();
    let procs = Path::new(ROOT)
        .join(common.strip_prefix("/").unwrap_or(&common))
        .join("cgroup.procs");
    if nix::unistd::access(&procs, nix::unistd::AccessFlags::W_OK).is_ok() {
        return Ok(Ok(()));
    }
    Ok(Err(format!(
        "this process's cgroup {} and the container's {} meet at {}, which uid {} may not write",
        own.display(),
        target.display(),
        procs.display(),
        nix::unistd::geteuid()
    )))
}

/// Where a process is, by the kernel: the v2 line of /proc/PID/cgroup.
pub fn cgroup_of(pid: i32) -> Result<PathBuf> {
    let path = format!("/proc/{pid}/cgroup");
    let text = fs::read_to_string(&path).with_context(|| format!("read {path}"))?;
    parse_own(&text).with_context(|| format!("read {path}: it has no cgroup v2 line"))
}

/// How many processes the OOM killer ended in a cgroup (memory.events).
pub fn oom_kills(rel: &Path) -> Option<u64> {
    let p = Path::new(ROOT)
        .join(rel.strip_prefix("/").unwrap_or(rel))
        .join("memory.events");
    let text = fs::read_to_string(p).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("oom_kill "))
        .and_then(|n| n.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use libcontainer::oci_spec::runtime::{LinuxMemoryBuilder, LinuxPidsBuilder, LinuxResourcesBuilder};

    #[test]
    fn own_cgroup_is_the_v2_line() {
        let text = "12:pids:/x\n0::/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope\n";
        assert_eq!(
            parse_own(text),
            Some(PathBuf::from(
                "/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope"
            ))
        );
        assert_eq!(parse_own("4:memory:/a\n"), None, "cgroup v1 only");
    }

    #[test]
    fn controllers_follow_the_limits() {
        let r = LinuxResourcesBuilder::default()
            .memory(LinuxMemoryBuilder::default().limit(1 << 20).build().unwrap())
            .pids(LinuxPidsBuilder::default().limit(10).build().unwrap())
            .build()
            .unwrap();
        assert_eq!(controllers_for(Some(&r)), ["memory", "pids"]);
        assert!(controllers_for(None).is_empty());
    }

    #[test]
    fn parent_must_be_clean() {
        for bad in ["relative", "/", "/a/../b"] {
            assert!(parent_from(Some(bad.to_owned())).is_err(), "{bad}");
        }
        assert_eq!(
            parent_from(Some("/ci/claude-shim".to_owned())).unwrap(),
            PathBuf::from("/ci/claude-shim")
        );
        assert_eq!(parent_from(None).unwrap(), PathBuf::from(DEFAULT_PARENT));
    }
}
