//! The working directory of one sandbox run, behind one interface (the
//! pipeline is `sandbox::run`): `live` lets the sandbox write the project
//! itself, guarded by read-only placeholders and the quarantine at exit;
//! `review` gives it an overlay whose upper layer keeps every write for
//! `claude-shim changes` and `apply`.
//! A workspace is opened before the policy is compiled (compiling decides
//! what exists), `prepare`d once the spec is compiled, `settle`d once the
//! sandbox is gone, and `release`d last.

pub mod live;
pub mod review;

use anyhow::Result;
use claude_shim_bundle::Compiled;

/// One run's working directory.
pub trait Workspace {
    /// After compiling, before the bundle is written: what the spec needs
    /// and what must exist on the host for it.
    fn prepare(&mut self, compiled: &mut Compiled) -> Result<()>;
    /// After the sandbox is gone (`ran`: it was created; otherwise the start
    /// failed): what the run left, reported on stderr. Err when the run must
    /// fail for it (the live mode: something the host would run is left in
    /// place); the rest of the way out happens first.
    fn settle(&mut self, ran: bool) -> Result<()>;
    /// Last, also after a failed start: the hold on the working directory
    /// given up.
    fn release(self: Box<Self>);
}
