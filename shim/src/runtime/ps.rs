//! `ps`: the pids of the container's processes, from its cgroup.

use anyhow::{anyhow, Result};
use libcgroups::common::CgroupManager;

use super::base::Runtime;
use super::cgroup::cgroup_manager;

impl Runtime {
    /// Pids of every process in the container's cgroup.
    pub fn pids(&self, id: &str) -> Result<Vec<i32>> {
        let c = self.load(id)?;
        let path = c
            .spec()
            .map_err(|e| anyhow!("read config of container {id}: {e}"))?
            .cgroup_path;
        let m = cgroup_manager(&path, id, c.systemd())?;
        let mut pids: Vec<i32> = m
            .get_all_pids()
            .map_err(|e| anyhow!("list processes of container {id}: {e}"))?
            .into_iter()
            .map(|p| p.as_raw())
            .collect();
        pids.sort_unstable();
        Ok(pids)
    }
}
