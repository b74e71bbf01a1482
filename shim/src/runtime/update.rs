//! `update`: new resource limits applied to a live container's cgroup.

use anyhow::{anyhow, bail, Result};
use libcgroups::common::{CgroupManager, ControllerOpt};
use libcontainer::container::ContainerStatus;
use libcontainer::oci_spec::runtime::LinuxResources;

use super::base::Runtime;
use super::cgroup::cgroup_manager;
use super::cgroup_v2;
use super::kernel::is_host_root;

impl Runtime {
    pub fn update(&self, id: &str, resources: &LinuxResources) -> Result<()> {
        let c = self.load(id)?;
        if c.status() == ContainerStatus::Stopped {
            bail!("update container {id}: it is not running");
        }
        let path = c
            .spec()
            .map_err(|e| anyhow!("read config of container {id}: {e}"))?
            .cgroup_path;
        super::validate::unified_only_on_v2(Some(resources)).map_err(|e| anyhow!("update container {id}: {e}"))?;
        let m = cgroup_manager(&path, id, c.systemd())?.with_rootless(!is_host_root());
        let effective = self.effective_spec(id).ok();
        // On cgroup v2 every apply rebuilds the device program, from the
        // rules create used (runc's update keeps them too).
        let mut resources = resources.clone();
        if cgroup_v2::is_unified() {
            let created = effective
                .as_ref()
                .and_then(|s| s.linux().as_ref()?.resources().as_ref()?.devices().clone());
            if resources.devices().as_ref().is_some_and(|d| !d.is_empty()) && *resources.devices() != created {
                bail!("update container {id}: linux.resources.devices cannot change after create");
            }
            resources.set_devices(created);
        }
        // The spec's disableOOMKiller stays as create set it (runc's update keeps it too).
        let disable_oom_killer = effective
            .as_ref()
            .and_then(|s| {
                s.linux()
                    .as_ref()?
                    .resources()
                    .as_ref()?
                    .memory()
                    .as_ref()?
                    .disable_oom_killer()
            })
            .unwrap_or(false);
        let opt = ControllerOpt {
            resources: &resources,
            freezer_state: None,
            oom_score_adj: None,
            disable_oom_killer,
        };
        m.apply(&opt)
            .map_err(|e| anyhow!("update cgroup of container {id}: {e}"))
    }
}
