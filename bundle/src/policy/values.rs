//! The policy's value types. Each parses and checks one TOML value, so a bad
//! value fails while deserializing and its error carries the value's span,
//! which `load` turns into the field path.
//!
//! One file per policy section: filesystem paths and modes, environment
//! names, the process's identity and limits, seccomp names, network rules,
//! the model API's server tools.

mod claude;
mod environment;
mod filesystem;
mod network;
mod process;
mod seccomp;

pub use claude::ServerTool;
pub use environment::{EnvName, EnvPattern};
pub use filesystem::{
    AbsPath, Access, AfterEffects, BindPath, HomeMode, HostPath, PolicyPath, RootSource, Tmp, WorkdirPath, Workspace,
};
pub use network::{CidrRule, HostPattern, NetworkMode, Publish};
pub use process::{ByteSize, CapabilityName, RlimitName, UserNamespace};
pub use seccomp::{ProfileRef, SyscallName};
