//! `start`: the created container's init runs its program.

use anyhow::{anyhow, bail, Result};
use libcontainer::container::ContainerStatus;

use super::base::{libcontainer_error, status_name, Runtime};
use super::started;

impl Runtime {
    pub fn start(&self, id: &str) -> Result<()> {
        let mut c = self.load(id)?;
        if c.status() != ContainerStatus::Created {
            bail!("start container {id}: it is {}, not created", status_name(c.status()));
        }
        c.start()
            .map_err(|e| anyhow!("start container {id}: {}", libcontainer_error(&e)))?;
        if let Some(pid) = c.pid() {
            if !started::wait_for_exec(pid.as_raw(), std::time::Duration::from_secs(10)) {
                tracing::warn!("container {id}'s process has not started its program within 10 s");
            }
        }
        Ok(())
    }
}
