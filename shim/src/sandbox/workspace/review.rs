//! The review workspace (`--review`, `filesystem.workspace = "review"`):
//! the working directory is an overlay whose lower layer is the project and
//! whose upper layer is a run's directory in claude-shim's state
//! (`sandbox::review::store`), so nothing the sandbox writes reaches the
//! project, `.git` included, until `claude-shim apply`. Opened before the
//! compile (the run's directory made, its start recorded, its lock held
//! while the sandbox runs), the layer attached to the compiled overlay, and
//! at exit one line: how many changes are kept and under which name.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Result};
use claude_shim_bundle::{Compiled, Invocation};

use super::Workspace;
use crate::sandbox::review::{self, store};

pub struct Review {
    run: Option<store::Run>,
    workdir: PathBuf,
}

/// overlayfs keeps its layer's attributes in extended attributes of the
/// upper layer's filesystem: `trusted.` as root, `user.` in a user
/// namespace. Tried on the new upper directory: a filesystem without them is
/// refused here, in one line, rather than by the mount.
fn check_xattrs(run: &store::Run) -> Result<()> {
    let ns = if nix::unistd::geteuid().is_root() {
        "trusted"
    } else {
        "user"
    };
    let upper = run.dir.join(store::UPPER);
    let name = format!("{ns}.claude-shim.probe");
    let r = rustix::fs::lsetxattr(&upper, name.as_str(), b"1", rustix::fs::XattrFlags::empty())
        .and_then(|()| rustix::fs::lremovexattr(&upper, name.as_str()));
    match r {
        Ok(()) => Ok(()),
        Err(e) => bail!(
            "keep the run's writes for review: the filesystem of {} takes no {ns}.* extended attributes ({e}), which overlayfs needs for its upper layer; set XDG_STATE_HOME to a folder on ext4, xfs, btrfs or tmpfs (claude-shim doctor checks it)",
            upper.display()
        ),
    }
}

impl Review {
    pub fn open(inv: &Invocation, id: &str) -> Result<Review> {
        let state = crate::sandbox::state_path("review")?;
        if state.starts_with(&inv.workdir) {
            bail!(
                "keep the run's writes for review: claude-shim's state {} lies in the project {}, which would be its own layer; set XDG_STATE_HOME outside it",
                state.display(),
                inv.workdir.display()
            );
        }
        let project = crate::hostfs::Dir::open(&inv.workdir)?;
        let owner = crate::sandbox::run_as(inv).host_ids();
        let run = store::Run::create(id, &inv.workdir, owner, review::branch::project_head(&project))?;
        if let Err(e) = check_xattrs(&run) {
            let _ = run.remove();
            return Err(e);
        }
        Ok(Review {
            run: Some(run),
            workdir: inv.workdir.clone(),
        })
    }

    fn run(&self) -> Result<&store::Run> {
        self.run.as_ref().ok_or_else(|| anyhow!("the review run is gone"))
    }
}

impl Workspace for Review {
    fn prepare(&mut self, compiled: &mut Compiled) -> Result<()> {
        let dir = &self.run()?.dir;
        claude_shim_bundle::attach_layer(
            &mut compiled.spec,
            &self.workdir,
            &dir.join(store::UPPER),
            &dir.join(store::WORK),
        )
        .map_err(|e| anyhow!("{e}"))
    }

    /// Never an error: what the run wrote is kept whatever happens here.
    fn settle(&mut self, ran: bool) -> Result<()> {
        if self.run.is_none() {
            return Ok(());
        }
        if !ran {
            // Nothing ran on the layer: nothing to keep or to say.
            if let Some(run) = self.run.take() {
                if let Err(e) = run.remove() {
                    tracing::warn!("{e:#}");
                }
            }
            return Ok(());
        }
        let Some(run) = self.run.as_mut() else { return Ok(()) };
        if let Err(e) = run.drop_work() {
            tracing::warn!("{e:#}");
        }
        if let Err(e) = run.open_up() {
            tracing::warn!("{e:#}");
        }
        let run = &*run;
        let name = run.record.run.clone();
        let n = match review::read(run) {
            Ok(r) => r.changes.len(),
            Err(e) => {
                eprintln!(
                    "claude-shim: warning: failed to read what review run {name} changed: {e:#} (it is kept: claude-shim changes {name})"
                );
                return Ok(());
            }
        };
        if n == 0 {
            // Nothing to review: nothing kept.
            if let Some(run) = self.run.take() {
                if let Err(e) = run.remove() {
                    tracing::warn!("{e:#}");
                }
            }
            eprintln!("claude-shim: no changes to review");
            return Ok(());
        }
        eprintln!(
            "claude-shim: {n} change{} kept for review as {name} (claude-shim changes; claude-shim apply)",
            if n == 1 { "" } else { "s" }
        );
        crate::timing::mark("changes counted");
        Ok(())
    }

    /// The lock goes with the run: `apply` may take it now.
    fn release(self: Box<Self>) {}
}
