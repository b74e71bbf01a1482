//! `verify`: prove a sandbox from inside. The last stage of the flow (policy ->
//! bundle -> runtime -> verify): the host derives `Expectations` from the
//! policy, `prepare_spec` turns the sandbox's spec into one that runs the probe
//! (this same static binary, bind-mounted read-only at `PROBE_PATH`, verb
//! `__probe`), a runtime runs it, and `report` compares what the probe printed
//! with the plan.
//!
//! Host side: `expect`, `plan`, `report`, `HostFacts`, `prepare_spec`.
//! Inside the sandbox: `probe` (with the `syscalls` catalog).

pub mod errnos;
mod error;
pub mod expect;
pub mod from_spec;
mod host;
pub mod outcome;
pub mod plan;
pub mod probe;
pub mod report;
pub mod spec;
pub mod syscalls;

pub use expect::Expectations;
pub use host::{namespace_inode, Canary, HostFacts};
pub use spec::{prepare_spec, PROBE_VERB};
