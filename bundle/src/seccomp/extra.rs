//! A policy's `seccomp.allow` opt-out applied to a profile, the built-in
//! one or a custom one, at compile time.

use oci_spec::runtime::{LinuxSeccomp, LinuxSeccompAction};

use super::rule::rule;

/// Adds unconditional allow rules for `names` (a policy's `seccomp.allow`
/// opt-out), replacing every rule that named them, so "allowed" means allowed
/// (libseccomp refuses conflicting actions for one syscall).
pub fn allow_extra(profile: &mut LinuxSeccomp, names: &[String]) {
    if names.is_empty() {
        return;
    }
    let mut rules = profile.syscalls().clone().unwrap_or_default();
    for r in rules.iter_mut() {
        let kept: Vec<String> = r.names().iter().filter(|n| !names.contains(n)).cloned().collect();
        r.set_names(kept);
    }
    rules.retain(|r| !r.names().is_empty());
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    rules.push(rule(&refs, LinuxSeccompAction::ScmpActAllow, None, vec![]));
    profile.set_syscalls(Some(rules));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seccomp::{agent_profile, decide, Decision, EPERM};

    #[test]
    fn allow_extra_replaces_conditional_rules() {
        let mut p = agent_profile();
        allow_extra(&mut p, &["ptrace".to_owned(), "clone3".to_owned()]);
        assert_eq!(decide(&p, "ptrace", [0; 6]), Decision::Allow);
        assert_eq!(decide(&p, "clone3", [0; 6]), Decision::Allow);
        assert!(!p
            .syscalls()
            .iter()
            .flatten()
            .any(|r| r.names().contains(&"clone3".to_owned()) && r.action() != LinuxSeccompAction::ScmpActAllow));
        assert_eq!(decide(&p, "mount", [0; 6]), Decision::Errno(EPERM));
    }
}
