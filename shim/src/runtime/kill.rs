//! `kill`: a signal, in runc's forms, to the container's init or to every
//! process of its own.

use anyhow::{anyhow, bail, Result};
use libcontainer::container::ContainerStatus;
use nix::sys::signal::Signal as NixSignal;

use super::base::Runtime;

impl Runtime {
    /// Sends `signal` to the init (or to every process). A created container's
    /// init is still runtime code with default dispositions, and as pid 1 of its
    /// namespace it would ignore e.g. SIGTERM; runc's Go init dies of it, and so
    /// must ours, so a terminating signal becomes SIGKILL there.
    ///
    /// The state file is not touched: the status follows from the init's
    /// liveness, and libcontainer's kill rewrites state.json in place, which a
    /// concurrent `delete` (the foreground `run`) then reads half-written.
    pub fn kill(&self, id: &str, signal: &str, all: bool) -> Result<()> {
        use libcgroups::common::FreezerState;
        let sig = parse_signal(signal)?;
        let c = self.load(id)?;
        let status = c.status();
        if status == ContainerStatus::Stopped && !all {
            bail!("kill container {id}: it is not running");
        }
        let sig = if status == ContainerStatus::Created && terminates(sig) {
            NixSignal::SIGKILL as libc::c_int
        } else {
            sig
        };
        let own = self.own(id, Some(&c));
        if all {
            // Freeze a cgroup of its own first, so no process forks past the
            // signal (v1 frozen tasks take the signal when thawed).
            let freeze = own.own_cgroup.is_some() && status != ContainerStatus::Paused;
            if freeze {
                self.set_freezer(id, &c, FreezerState::Frozen);
            }
            own.signal_all(sig);
            if freeze {
                self.set_freezer(id, &c, FreezerState::Thawed);
            }
        } else if !own.signal_init(sig)? && sig == 0 {
            // Signal 0 is a liveness check (runc passes it to kill(2)): an
            // init that is gone is the answer.
            bail!("kill container {id}: it is not running");
        }
        if status == ContainerStatus::Paused && sig == NixSignal::SIGKILL as libc::c_int {
            // A frozen init cannot die; thaw it.
            self.set_freezer(id, &c, FreezerState::Thawed);
        }
        Ok(())
    }
}

/// runc's signal forms: a name with or without SIG, or a number; 0 (no
/// signal, only the check that the init is there) as runc takes it.
pub fn parse_signal(s: &str) -> Result<libc::c_int> {
    let upper = s.to_ascii_uppercase();
    let parsed = if upper == "0" {
        return Ok(0);
    } else if let Ok(n) = upper.parse::<i32>() {
        NixSignal::try_from(n).ok()
    } else {
        let name = if upper.starts_with("SIG") {
            upper
        } else {
            format!("SIG{upper}")
        };
        name.parse::<NixSignal>().ok()
    };
    parsed
        .map(|s| s as libc::c_int)
        .ok_or_else(|| anyhow!("parse signal {s:?}: it is not a signal name or number"))
}

/// Signals whose default action ends the process (0 is no signal at all).
fn terminates(sig: libc::c_int) -> bool {
    use NixSignal::*;
    sig != 0
        && ![SIGCHLD, SIGCONT, SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU, SIGURG, SIGWINCH]
            .iter()
            .any(|s| *s as libc::c_int == sig)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_parse_like_runc() {
        assert_eq!(parse_signal("KILL").unwrap(), libc::SIGKILL);
        assert_eq!(parse_signal("sigterm").unwrap(), libc::SIGTERM);
        assert_eq!(parse_signal("9").unwrap(), libc::SIGKILL);
        assert_eq!(parse_signal("SIGUSR1").unwrap(), libc::SIGUSR1);
        assert_eq!(parse_signal("0").unwrap(), 0);
        assert!(parse_signal("NOPE").is_err());
        assert!(parse_signal("99").is_err());
    }
}
