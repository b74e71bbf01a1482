//! What one syscall probe is: its name, the call and its arguments, how the
//! probe makes it and through which entry point. Below the catalog and the
//! probe that runs it.

use nix::errno::Errno;

/// A raw syscall result: the return value, or the errno.
pub type Ret = Result<i64, Errno>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// A harmless call whose refusal is attributed to the filter by stacking
    /// a probe filter (`probe::seccomp`).
    Attributed,
    /// The real thing (a fork, a thread, a unix socket): it must work.
    Direct,
}

/// The entry point a probe's call takes into the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abi {
    /// The `syscall` instruction, x86-64 numbers.
    X86_64,
    /// `int 0x80` from the 64-bit probe: the i386 numbers and argument
    /// registers, judged by the filter as SCMP_ARCH_X86. Rules that inspect
    /// arguments must hold here too (issue 11); five arguments at most, and
    /// addresses below 4 GiB.
    I386,
}

#[derive(Debug, Clone, Copy)]
pub struct SyscallProbe {
    /// The probe's name in `Expectations::syscalls` and in the report.
    pub name: &'static str,
    /// The syscall as a seccomp profile names it.
    pub syscall: &'static str,
    /// Its number on x86_64.
    pub nr: i64,
    pub method: Method,
    pub abi: Abi,
    pub args: [u64; 6],
}
