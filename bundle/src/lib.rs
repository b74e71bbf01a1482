//! Policy -> OCI bundle: the policy model and its validation (`policy`), the
//! seccomp profile (`seccomp`), the compilation of a policy into an `oci_spec`
//! runtime `Spec` for one invocation (`compile`), the bundle writer
//! (`write`) and what a host tool runs code from (`host_run`: the list and
//! `host_run::classify`, which asks a tree one path at a time). This
//! crate makes no system calls; everything it must know about the machine
//! comes through `compile::HostView`, which the binary implements.
#![forbid(unsafe_code)]

pub mod annotations;
pub mod compile;
pub mod host_run;
pub mod policy;
pub mod seccomp;
pub mod write;

pub use compile::{
    attach_layer, compile, git_ssh_command, CompileError, Compiled, HostView, Invocation, Owner, PathKind, Placeholder,
    RunAs, SkeletonEntry, CONNECT_PATH, CONNECT_VERB,
};
pub use policy::{Policy, PolicyError};
pub use write::{fill_skeleton, write_bundle, WriteError, WriteOptions};
