//! `pause` and `resume`: the container's cgroup frozen and thawed.

use anyhow::{anyhow, bail, Result};
use libcontainer::container::ContainerStatus;

use super::base::{libcontainer_error, status_name, Runtime};

impl Runtime {
    pub fn pause(&self, id: &str) -> Result<()> {
        let mut c = self.load(id)?;
        if c.status() != ContainerStatus::Running {
            bail!("pause container {id}: it is {}, not running", status_name(c.status()));
        }
        c.pause()
            .map_err(|e| anyhow!("pause container {id}: {}", libcontainer_error(&e)))
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
