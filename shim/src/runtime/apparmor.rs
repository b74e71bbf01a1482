//! An AppArmor profile a spec or an exec asks for, checked before anything
//! is made: libcontainer's init only reports `io error: No such file or
//! directory` when the kernel has no AppArmor, and nothing names the profile.

use std::fs;
use std::path::Path;

use anyhow::{bail, Result};

/// The kernel's switch; absent when AppArmor is not built in.
const ENABLED: &str = "/sys/module/apparmor/parameters/enabled";
/// The loaded profiles, one `name (mode)` a line (securityfs).
const PROFILES: &str = "/sys/kernel/security/apparmor/profiles";

/// Refuses `profile` (from `field`) when AppArmor is off or the profile is
/// not loaded. "unconfined" needs nothing loaded.
pub fn check(field: &str, profile: Option<&str>) -> Result<()> {
    let Some(profile) = profile.filter(|p| !p.is_empty()) else {
        return Ok(());
    };
    let enabled = fs::read_to_string(ENABLED).is_ok_and(|s| s.trim() == "Y");
    if !enabled {
        bail!("{field} {profile:?}: AppArmor is not enabled on this machine ({ENABLED} does not say Y)");
    }
    if profile == "unconfined" {
        return Ok(());
    }
    // securityfs may not be mounted here; then the kernel's own answer stands.
    if Path::new(PROFILES).exists() {
        if let Ok(loaded) = fs::read_to_string(PROFILES) {
            if !is_loaded(&loaded, profile) {
                bail!("{field} {profile:?}: no such profile is loaded (load it with apparmor_parser)");
            }
        }
    }
    Ok(())
}

fn is_loaded(profiles: &str, name: &str) -> bool {
    profiles
        .lines()
        .any(|l| l.rsplit_once(" (").map_or(l, |(n, _)| n) == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loaded_profiles_are_found_by_their_whole_name() {
        let list = "docker-default (enforce)\n/usr/bin/man (enforce)\nlsb (complain)\n";
        assert!(is_loaded(list, "docker-default"));
        assert!(is_loaded(list, "/usr/bin/man"));
        assert!(!is_loaded(list, "docker"));
        assert!(!is_loaded(list, "missing"));
    }
}
