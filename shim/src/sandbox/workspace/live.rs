//! The live workspace: the sandbox writes the project itself. Missing
//! protected paths stand in as empty read-only placeholders, shared with
//! every sandbox on the directory (`lease`), and what the run left that the
//! host would run is moved aside at exit (`quarantine`).

use std::path::{Path, PathBuf};

use anyhow::Result;
use claude_shim_bundle::policy::values::AfterEffects;
use claude_shim_bundle::{Compiled, Invocation, Policy};

use super::Workspace;
use crate::sandbox::host::StdHost;
use crate::sandbox::lease::Lease;
use crate::sandbox::quarantine::Watch;

pub struct Live {
    lease: Lease,
    watch: Option<Watch>,
    workdir: PathBuf,
    after_effects: AfterEffects,
    id: String,
    /// The runtime's state directory, where the `.env` search keeps its index.
    ours: PathBuf,
}

impl Live {
    /// Takes the directory's lease: before compiling, so that another
    /// sandbox on it does not remove a placeholder this one is about to mount.
    pub fn open(policy: &Policy, inv: &Invocation, ours: &Path, id: &str) -> Result<Live> {
        Ok(Live {
            lease: {
                let mut l = Lease::acquire(ours, &inv.workdir)?;
                l.register(id)?;
                l
            },
            watch: None,
            workdir: inv.workdir.clone(),
            after_effects: policy.filesystem.after_effects,
            id: id.to_owned(),
            ours: ours.to_path_buf(),
        })
    }
}

impl Workspace for Live {
    fn prepare(&mut self, compiled: &mut Compiled) -> Result<()> {
        self.watch = Watch::start(&self.workdir, compiled, self.after_effects, &self.id)?;
        self.lease.create(&compiled.placeholders)?;
        self.lease.share()
    }

    /// What the run left that the host would run, before the placeholders
    /// go: they are told apart by the lease's record. Err when some of it
    /// is still where the host would run it, or was not searched.
    fn settle(&mut self, _ran: bool) -> Result<()> {
        let Some(w) = self.watch.take() else {
            return Ok(());
        };
        let host = StdHost::new(Some(self.ours.clone()));
        // Under the directory's lock from here to `release`: no run starts
        // (and finds what is about to move) meanwhile.
        let others = self.lease.leave().unwrap_or_else(|e| {
            // Without the record, what is new is moved as if this run had
            // been alone: a neighbour may lose an entry, the host runs none.
            tracing::warn!("{e:#}");
            crate::sandbox::lease::Neighbours::alone()
        });
        let out = w.finish(&host, &self.lease.placeholders(), &others);
        out.print();
        if let Err(e) = self.lease.defer(&out.deferred) {
            anyhow::bail!(
                "record what appeared in {} for the last sandbox to leave it: {e:#}",
                out.workdir.display()
            );
        }
        crate::timing::mark("after-effects looked for");
        if !out.closed() {
            anyhow::bail!(
                "clear {} of what the run left that the host would run: what is named above is still there or was not searched",
                out.workdir.display()
            );
        }
        Ok(())
    }

    fn release(self: Box<Self>) {
        self.lease.release();
        crate::timing::mark("placeholders released");
    }
}
