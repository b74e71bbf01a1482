//! A claude-shim started inside a sandbox (the agent running
//! `claude-shim sandbox` or `claude-shim claude`) cannot make a container:
//! no capability, no writable cgroup, no new user namespace (the seccomp
//! profile refuses one). Left to fail on its own it said `failed to detect
//! cgroup setup`; the verbs that create containers check first, from the
//! process's running state (nothing a sandbox could plant or unset, as an
//! environment variable or a marker file could be): every claude-shim
//! sandbox runs its processes with a seccomp filter, no_new_privs and no
//! effective capability, which no host shell that can run containers has.

use anyhow::{bail, Result};

use crate::verify::plan::StatusField;
use crate::verify::probe::status::ProcStatus;

/// The `Seccomp`, `NoNewPrivs` and `CapEff` fields of a `/proc/PID/status`
/// say the process is confined as in a sandbox.
pub fn confined(status: &str) -> bool {
    let s = ProcStatus::parse(status);
    s.get(StatusField::Seccomp) == Some(2)
        && s.get(StatusField::NoNewPrivs) == Some(1)
        && s.get(StatusField::CapEff) == Some(0)
}

/// Refuses to go on in a confined process, naming why.
pub fn refuse() -> Result<()> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if confined(&status) {
        bail!(
            "run a sandbox: claude-shim cannot run inside a claude-shim sandbox (nested sandbox: this process has a seccomp filter, no_new_privs and no capabilities); run it on the host"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_three_make_a_sandbox() {
        let inside = "Name:\tbash\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\n";
        assert!(confined(inside));
        assert!(!confined(&inside.replace("NoNewPrivs:\t1", "NoNewPrivs:\t0")));
        assert!(!confined(&inside.replace("Seccomp:\t2", "Seccomp:\t0")));
        assert!(!confined(&inside.replace("0000000000000000", "000001ffffffffff")));
        assert!(!confined(""));
    }
}
