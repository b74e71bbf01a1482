use std::fs;
use std::path::Path;

use nix::unistd::Pid;

use crate::common::{self, CGROUP_PROCS, ControllerOpt, WrapIoResult, WrappedIoError};

pub(super) trait Controller {
    type Error: From<WrappedIoError>;
    type Resource;

    /// Adds a new task specified by its pid to the cgroup
    fn add_task(pid: Pid, cgroup_path: &Path) -> Result<(), Self::Error> {
        fs::create_dir_all(cgroup_path).wrap_create_dir(cgroup_path)?;
        join(pid, cgroup_path)?;
        Ok(())
    }

    /// Applies resource restrictions to the cgroup
    fn apply(controller_opt: &ControllerOpt, cgroup_root: &Path) -> Result<(), Self::Error>;

    /// Checks if the controller needs to handle this request
    fn needs_to_handle<'a>(controller_opt: &'a ControllerOpt) -> Option<&'a Self::Resource>;
}

/// claude-shim: moves `pid` into the cgroup at `cgroup_path`. A write to
/// cgroup.procs takes the kernel's global cgroup_threadgroup_rwsem for
/// writing, which waits for an RCU grace period (about 5 ms here, on every
/// container start). A single-threaded process that moves itself writes 0 to
/// `tasks` instead: the kernel skips that lock for the calling thread
/// (cgroup_procs_write_start), and with one thread the whole process moves.
pub(super) fn join(pid: Pid, cgroup_path: &Path) -> Result<(), WrappedIoError> {
    if pid == nix::unistd::getpid() && single_threaded() {
        common::write_cgroup_file(cgroup_path.join("tasks"), 0)
    } else {
        common::write_cgroup_file(cgroup_path.join(CGROUP_PROCS), pid)
    }
}

fn single_threaded() -> bool {
    fs::read_dir("/proc/self/task").is_ok_and(|d| d.count() == 1)
}
