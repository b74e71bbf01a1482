use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;

use pathrs::flags::OpenFlags;
use pathrs::procfs::{ProcfsBase, ProcfsHandle};
use procfs::ProcError;
use procfs::process::MountInfo;

use super::ControllerType;
use super::controller_type::CONTROLLERS;

#[derive(thiserror::Error, Debug)]
pub enum V1MountPointError {
    #[error("io error: {0}")]
    Io(#[from] std::io::Error),
    #[error("failed to get mountinfo: {0}")]
    MountInfo(ProcError),
    #[error("could not find mountpoint for {subsystem}")]
    NotFound { subsystem: ControllerType },
    #[error(transparent)]
    Pathrs(#[from] pathrs::error::Error),
}

/// List all cgroup v1 subsystem mount points on the system. This can include unsupported
/// subsystems, comounted controllers and named hierarchies.
pub fn list_subsystem_mount_points() -> Result<Vec<PathBuf>, V1MountPointError> {
    Ok(list_mount_points()?.0)
}

/// claude-shim: the cgroup v1 mount points and, on a hybrid host, the first
/// cgroup2 mount (`/sys/fs/cgroup/unified`), from one read of mountinfo.
pub fn list_mount_points() -> Result<(Vec<PathBuf>, Option<PathBuf>), V1MountPointError> {
    let reader = BufReader::new(ProcfsHandle::new()?.open(
        ProcfsBase::ProcSelf,
        "mountinfo",
        OpenFlags::O_RDONLY | OpenFlags::O_CLOEXEC,
    )?);

    reader
        .lines()
        .map(|lr| {
            lr.map_err(V1MountPointError::Io)
                .and_then(|line| MountInfo::from_line(&line).map_err(V1MountPointError::MountInfo))
        })
        .try_fold((Vec::new(), None), |(mut mount_points, mut unified), r| {
            r.map(|m| {
                if m.fs_type == "cgroup" {
                    mount_points.push(m.mount_point);
                } else if m.fs_type == "cgroup2" && unified.is_none() {
                    unified = Some(m.mount_point);
                }
                (mount_points, unified)
            })
        })
}

/// List the mount points of all currently supported cgroup subsystems.
pub fn list_supported_mount_points() -> Result<HashMap<ControllerType, PathBuf>, V1MountPointError>
{
    let mut mount_paths = HashMap::with_capacity(CONTROLLERS.len());
    // claude-shim: mountinfo read once for all the controllers.
    let mount_points = list_subsystem_mount_points()?;

    for controller in CONTROLLERS {
        if let Ok(mount_point) = mount_point_among(controller, &mount_points) {
            mount_paths.insert(controller.to_owned(), mount_point);
        }
    }

    Ok(mount_paths)
}

pub fn get_subsystem_mount_point(subsystem: &ControllerType) -> Result<PathBuf, V1MountPointError> {
    mount_point_among(subsystem, &list_subsystem_mount_points()?)
}

/// claude-shim: the mount point of `subsystem` among cgroup v1 mount points
/// read once (`list_subsystem_mount_points`), so that a caller asking for
/// every controller reads mountinfo once rather than once per controller.
pub fn mount_point_among(
    subsystem: &ControllerType,
    mount_points: &[PathBuf],
) -> Result<PathBuf, V1MountPointError> {
    let subsystem_name = subsystem.to_string();
    mount_points
        .iter()
        .find(|m| {
            // Some systems mount net_prio and net_cls in the same directory
            // other systems mount them in their own directories. This
            // should handle both cases.
            match subsystem_name.as_str() {
                "net_cls" => ["net_cls,net_prio", "net_prio,net_cls", "net_cls"]
                    .iter()
                    .any(|s| m.ends_with(s)),
                "net_prio" => ["net_cls,net_prio", "net_prio,net_cls", "net_prio"]
                    .iter()
                    .any(|s| m.ends_with(s)),
                "cpu" => ["cpu,cpuacct", "cpu"].iter().any(|s| m.ends_with(s)),
                "cpuacct" => ["cpu,cpuacct", "cpuacct"].iter().any(|s| m.ends_with(s)),
                _ => m.ends_with(&subsystem_name),
            }
        })
        .cloned()
        .ok_or(V1MountPointError::NotFound {
            subsystem: *subsystem,
        })
}
