//! What of the host-run list (`host_run`) is under the working directory
//! when the sandbox starts, from the start's one search made complete
//! (`HostView::find_all`: every depth, package stores and build trees
//! included): the picture the quarantine at exit compares the same complete
//! search against, so that only what the run made is moved aside. The
//! binary makes the second search; the rule of what counts is
//! `host_run::present`, for both.

use std::path::PathBuf;

use super::Builder;
use crate::compile::output::CompileError;
use crate::host_run;
use crate::policy::values::Access;

impl Builder<'_, '_> {
    /// The host-run entries present at start; None where the run cannot make
    /// one (a read-only working directory), so there is nothing to compare.
    pub(super) fn host_run_present(&mut self) -> Result<Option<Vec<PathBuf>>, CompileError> {
        if self.ctx.policy.filesystem.workdir == Access::Ro {
            return Ok(None);
        }
        let wd = &self.ctx.inv.workdir;
        let host = self.ctx.host;
        let found = host.find_all(wd, &super::search_names).map_err(|e| {
            CompileError::Invocation(format!("look for what the host runs under {}: {e}", wd.display()))
        })?;
        let tree = host_run::Rooted { host, root: wd };
        Ok(Some(host_run::present(wd, &found, &tree)))
    }
}
