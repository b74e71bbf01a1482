//! CVE-2019-5736: a container process that can reach the runtime's
//! /proc/<pid>/exe (during `exec`, or as the init before its execve) could
//! reopen it for writing and replace the runtime binary on the host. Verbs that
//! put a process into a container first re-execute claude-shim from a sealed
//! memfd copy (pentacle, as youki does), so that file is an immutable copy.
//! Verbs that only read state or send signals skip it: it costs a copy of the
//! binary and an exec.

use anyhow::{Context, Result};

/// The path of the binary on disk, kept across the re-exec for the verbs that
/// need to show the real binary to a container (the probe of `verify`).
pub const EXE_ENV: &str = "CLAUDE_SHIM_EXE";

pub fn ensure_sealed() -> Result<()> {
    if pentacle::is_sealed() {
        return Ok(());
    }
    if std::env::var_os(EXE_ENV).is_none() {
        if let Ok(exe) = std::fs::canonicalize("/proc/self/exe") {
            // SAFETY: single-threaded at this point: nothing else reads the environment.
            unsafe { std::env::set_var(EXE_ENV, exe) };
        }
    }
    pentacle::ensure_sealed().context("re-execute from a sealed copy of /proc/self/exe (CVE-2019-5736 defence)")
}

/// The binary on disk (not the memfd copy).
pub fn exe_on_disk() -> Result<std::path::PathBuf> {
    match std::env::var_os(EXE_ENV) {
        Some(p) => Ok(p.into()),
        None => std::fs::canonicalize("/proc/self/exe").context("resolve /proc/self/exe"),
    }
}
