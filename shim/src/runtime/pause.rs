//! `pause` and `resume`: the container's cgroup frozen and thawed. The
//! status a caller sees follows the freezer (runtime/freezer.rs).

use anyhow::{anyhow, bail, Result};
use libcgroups::common::{CgroupManager, FreezerState};
use libcontainer::container::ContainerStatus;

use super::base::{libcontainer_error, status_name, Runtime};
use super::cgroup::cgroup_manager;

impl Runtime {
    pub fn pause(&self, id: &str) -> Result<()> {
        let mut c = self.load(id)?;
        if c.status() != ContainerStatus::Running {
            bail!("pause container {id}: it is {}, not running", status_name(c.status()));
        }
        let Err(e) = c.pause() else { return Ok(()) };
        // libcontainer freezes first and records the status after: a state
        // root that refuses the write (read-only, full) left the container
        // frozen while its state said running (issue 25). What it froze is
        // thawed, so the container is as its state says.
        let thawed = c
            .spec()
            .map_err(|e| anyhow!("read its config: {e}"))
            .and_then(|config| cgroup_manager(&config.cgroup_path, id, c.systemd()))
            .and_then(|m| m.freeze(FreezerState::Thawed).map_err(|e| anyhow!("{e}")));
        match thawed {
            Ok(()) => bail!(
                "pause container {id}: {}; its processes were thawed and it is running",
                libcontainer_error(&e)
            ),
            Err(t) => bail!(
                "pause container {id}: {}; thawing it again failed too: {t:#}",
                libcontainer_error(&e)
            ),
        }
    }

    pub fn resume(&self, id: &str) -> Result<()> {
        let mut c = self.load(id)?;
        if c.status() != ContainerStatus::Paused {
            bail!("resume container {id}: it is {}, not paused", status_name(c.status()));
        }
        c.resume()
            .map_err(|e| anyhow!("resume container {id}: {}", libcontainer_error(&e)))
    }
}
