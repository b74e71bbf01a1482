//! The syscall probes: one harmless call per seccomp rule of the agent
//! profile (and per argument the rule inspects). The host names them in
//! `Expectations::syscalls`; the probe runs them inside the sandbox.
//!
//! Arguments are chosen the way bubblewrap's seccomp tests choose them: bad
//! pointers, fd -1, invalid flags, so that a call the filter lets through fails
//! in the kernel (EFAULT, EBADF, EINVAL) before doing anything. Which layer
//! refused is not read from the errno alone, since the kernel's own
//! capability checks also say EPERM: see `probe::seccomp` for how the probe
//! tells the filter's answer from the kernel's.

mod catalog;
mod expectations;
#[cfg(test)]
mod tests;
mod types;

pub use catalog::{find, CATALOG};
pub use expectations::expectations_for;
pub use types::{Abi, Method, Ret, SyscallProbe};
