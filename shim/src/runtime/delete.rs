//! `delete`: removes a stopped (or, forced, any) container, once no create
//! holds its id; the removal itself is in leftovers.rs.

use anyhow::{bail, Context, Result};
use libcontainer::container::ContainerStatus;

use super::base::{status_name, validate_id, Runtime};

impl Runtime {
    pub fn delete(&self, id: &str, force: bool) -> Result<()> {
        validate_id(id)?;
        if force {
            // A create killed before it renamed its claim into place.
            for e in self.collect_claims_of(id).failed {
                tracing::warn!("{e}");
            }
        }
        if !self.exists(id) {
            if force {
                return Ok(());
            }
            bail!("delete container {id}: it does not exist");
        }
        // A killed create's lock is held a moment longer by the forks that
        // inherited it (the init ends when it sees its creator gone).
        let mut lock = self.try_lock(id);
        if force {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
            while lock.is_err() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(10));
                lock = self.try_lock(id);
            }
        }
        let _lock = match lock {
            Ok(l) => l,
            Err(e) if force => {
                // A create still running holds the lock; force means now.
                tracing::warn!("{e}; deleting anyway");
                None
            }
            Err(e) => return Err(e),
        };
        if self.container_dir(id).join("state.json").exists() {
            // load reads the status afresh (and retries a half-read one); an
            // unreadable state is what a killed create left.
            let status = match self.load(id) {
                Ok(c) => c.status(),
                Err(e) if force => {
                    tracing::warn!("{e:#}; removing what is left");
                    ContainerStatus::Stopped
                }
                Err(e) => return Err(e),
            };
            let deletable = matches!(status, ContainerStatus::Stopped | ContainerStatus::Created);
            if !deletable && !force {
                bail!(
                    "delete container {id}: it is {}; stop it first or use --force",
                    status_name(status)
                );
            }
        }
        self.remove_leftovers(id)
            .with_context(|| format!("delete container {id}"))
    }
}
