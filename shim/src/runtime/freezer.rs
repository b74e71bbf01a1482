//! The freezer as the kernel holds it (issue 25), not as state.json says: a
//! cgroup that is frozen before the init joins it stops the init for good, so
//! `create` refuses it (runc: "container's cgroup unexpectedly frozen"); and a
//! container whose cgroup is frozen is paused, whatever its state file says,
//! as runc reads it, so `state`, `resume`, `kill` and `delete --force` see a
//! container that a failed or interrupted `pause` (or anyone) froze.
//!
//! cgroup v1: `freezer.state` (THAWED, FREEZING, FROZEN; a child of a frozen
//! cgroup reads FROZEN). cgroup v2: `cgroup.freeze` is what was asked,
//! `frozen` in `cgroup.events` what holds, inherited from ancestors too.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use libcontainer::container::{Container, ContainerStatus};

use super::cgroup_v2;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Freezer {
    Thawed,
    /// Asked to freeze, not every process stopped yet.
    Freezing,
    Frozen,
}

/// The freezer of one cgroup directory (v1 freezer hierarchy or v2), or
/// None where it has none (another v1 hierarchy, or gone).
pub fn of_dir(dir: &Path) -> Option<Freezer> {
    if let Ok(s) = fs::read_to_string(dir.join("freezer.state")) {
        return Some(parse_v1(&s));
    }
    let events = fs::read_to_string(dir.join("cgroup.events")).ok()?;
    let asked = fs::read_to_string(dir.join("cgroup.freeze")).unwrap_or_default();
    Some(parse_v2(&asked, &events))
}

fn parse_v1(state: &str) -> Freezer {
    match state.trim() {
        "FROZEN" => Freezer::Frozen,
        "FREEZING" => Freezer::Freezing,
        _ => Freezer::Thawed,
    }
}

fn parse_v2(asked: &str, events: &str) -> Freezer {
    if events.lines().any(|l| l.trim() == "frozen 1") {
        Freezer::Frozen
    } else if asked.trim() == "1" {
        Freezer::Freezing
    } else {
        Freezer::Thawed
    }
}

/// Refuses cgroup directories that are frozen or freezing (themselves or by
/// an ancestor): a process that joins one stops before it runs a line.
pub fn check_not_frozen(dirs: &[PathBuf], raw: &Path) -> Result<()> {
    for dir in dirs {
        if let Some(state @ (Freezer::Frozen | Freezer::Freezing)) = of_dir(dir) {
            bail!(
                "use cgroupsPath {:?}: container's cgroup unexpectedly frozen: {} is {} (it or a parent cgroup), and the container's init would stop as it joins; thaw it first",
                raw.display().to_string(),
                dir.display(),
                if state == Freezer::Frozen { "frozen" } else { "freezing" }
            );
        }
    }
    Ok(())
}

/// The freezer of the cgroup `pid` is in, as the freezer hierarchy (v1) or
/// the unified one (v2) places it.
pub fn of_process(pid: i32) -> Option<Freezer> {
    let dir = if cgroup_v2::is_unified() {
        let rel = cgroup_v2::cgroup_of(pid).ok()?;
        Path::new(libcgroups::common::DEFAULT_CGROUP_ROOT).join(rel.strip_prefix("/").unwrap_or(&rel))
    } else {
        let cgroups = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
        let rel = cgroups.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers.split(',').any(|c| c == "freezer").then_some(path)
        })?;
        let mount = libcgroups::v1::util::get_subsystem_mount_point(&libcgroups::v1::ControllerType::Freezer).ok()?;
        mount.join(rel.trim_start_matches('/'))
    };
    of_dir(&dir)
}

/// A live container's status as runc reports it: paused while its cgroup
/// is frozen, running when it is not, whatever state.json last recorded.
pub fn settle_status(c: &mut Container) {
    if !matches!(c.status(), ContainerStatus::Running | ContainerStatus::Paused) {
        return;
    }
    let Some(pid) = c.pid() else { return };
    let status = match of_process(pid.as_raw()) {
        Some(Freezer::Frozen) => ContainerStatus::Paused,
        Some(Freezer::Thawed) => ContainerStatus::Running,
        // Half-way (a `kill --all` freezes for a moment), or unreadable.
        Some(Freezer::Freezing) | None => return,
    };
    c.set_status(status);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_freezers_read_as_the_kernel_writes_them() {
        assert_eq!(parse_v1("FROZEN\n"), Freezer::Frozen);
        assert_eq!(parse_v1("FREEZING\n"), Freezer::Freezing);
        assert_eq!(parse_v1("THAWED\n"), Freezer::Thawed);
        let events = |frozen| format!("populated 1\nfrozen {frozen}\n");
        assert_eq!(parse_v2("1\n", &events(1)), Freezer::Frozen);
        // Frozen by an ancestor: asked nothing itself.
        assert_eq!(parse_v2("0\n", &events(1)), Freezer::Frozen);
        assert_eq!(parse_v2("1\n", &events(0)), Freezer::Freezing);
        assert_eq!(parse_v2("0\n", &events(0)), Freezer::Thawed);
    }

    #[test]
    fn a_frozen_directory_is_refused_naming_it_and_a_thawed_one_passes() {
        let t = tempfile::tempdir().unwrap();
        let (v1, v2, other) = (
            t.path().join("freezer/c"),
            t.path().join("unified/c"),
            t.path().join("pids/c"),
        );
        for d in [&v1, &v2, &other] {
            fs::create_dir_all(d).unwrap();
        }
        fs::write(v1.join("freezer.state"), "THAWED\n").unwrap();
        fs::write(v2.join("cgroup.freeze"), "0\n").unwrap();
        fs::write(v2.join("cgroup.events"), "populated 0\nfrozen 0\n").unwrap();
        let dirs = [v1.clone(), v2.clone(), other];
        check_not_frozen(&dirs, Path::new("/c")).unwrap();
        fs::write(v1.join("freezer.state"), "FROZEN\n").unwrap();
        let err = check_not_frozen(&dirs, Path::new("/c")).unwrap_err().to_string();
        assert!(
            err.contains(&v1.display().to_string()) && err.contains("is frozen"),
            "{err}"
        );
        fs::write(v1.join("freezer.state"), "THAWED\n").unwrap();
        fs::write(v2.join("cgroup.freeze"), "1\n").unwrap();
        let err = check_not_frozen(&dirs, Path::new("/c")).unwrap_err().to_string();
        assert!(
            err.contains(&v2.display().to_string()) && err.contains("freezing"),
            "{err}"
        );
    }
}
