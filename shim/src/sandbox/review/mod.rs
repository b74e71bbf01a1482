//! Review runs (issue 34): the sandbox wrote into an overlay's upper layer
//! kept in claude-shim's state (`store`), never into the project. What the
//! run changed is read from that layer alone (`layer`, through descriptors,
//! `fds`), each change classified (`change`) and flagged where the host
//! would run it unasked (`flags`, asking `host_run::classify` of the
//! project as the host has it and as the sandbox left it, `tree`), shown as
//! a diff (`diff`), brought into the project by `apply` and the agent's
//! commits by `branch`. The layer is the sandbox's writes: untrusted input
//! everywhere here.

pub mod apply;
pub mod branch;
pub mod change;
pub mod diff;
pub mod fds;
pub mod flags;
pub mod layer;
pub mod store;
pub mod tree;

use std::os::fd::AsFd;

use anyhow::{bail, Result};
use claude_shim_bundle::host_run::{Classifier, Tree};
use claude_shim_bundle::PathKind;

use self::change::{Change, Since};
use self::layer::Upper;
use crate::hostfs::Dir;

/// A run's changes, with handles on its layer and its project.
pub struct Read {
    pub changes: Vec<Change>,
    pub upper: Dir,
    pub project: Dir,
}

/// The project of `run` as a handle, refused when another directory stands
/// at its path since the run began.
pub fn project_of(run: &store::Run) -> Result<Dir> {
    use std::os::unix::fs::MetadataExt;
    let r = &run.record;
    let project = Dir::open(&r.project)?;
    let m = std::fs::metadata(&r.project)?;
    if (m.dev(), m.ino()) != (r.dev, r.ino) {
        bail!(
            "use review run {}: {} is not the folder the run began in (it was replaced since)",
            r.run,
            r.project.display()
        );
    }
    Ok(project)
}

/// Every change of `run`, classified and flagged.
pub fn read(run: &store::Run) -> Result<Read> {
    let project = project_of(run)?;
    let upper = run.upper()?;
    let entries = layer::walk(&upper, &project, &run.record.closed)?;
    let since = Since {
        start_ns: run.record.start_ns,
        touched: &run.record.touched,
        origins: run.record.origins,
    };
    let changes = {
        let (u, h) = (upper.open_fd()?, project.open_fd()?);
        let root = run.record.project.as_path();
        let on_host = tree::Host {
            project: &project,
            root,
        };
        let left = tree::Merged {
            upper: u.as_fd(),
            host: h.as_fd(),
            root,
        };
        let (mut host_c, mut left_c) = (Classifier::new(&on_host), Classifier::new(&left));
        // The repositories on the way to a change, whose configs name hooks
        // and includes as the top one's do; as the host has them (what its
        // git reads) and as the sandbox left them.
        let folders = flags::folders_of(
            entries
                .iter()
                .map(|e| (e.rel.as_path(), matches!(e.upper, Upper::Dir { .. }))),
        );
        for f in &folders {
            let git = f.join(".git");
            if on_host.kind(&git) == Some(PathKind::Dir) {
                host_c.add_repository(&git, f);
            }
            if left.kind(&git) == Some(PathKind::Dir) {
                left_c.add_repository(&git, f);
            }
        }
        change::changes(&entries, &since, &|rel, _| flags::flag(rel, &[&host_c, &left_c]))
    };
    Ok(Read {
        changes,
        upper,
        project,
    })
}
