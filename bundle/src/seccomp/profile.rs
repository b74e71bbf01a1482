//! The agent profile assembled: default EPERM on the three x86 ABIs, the
//! allow list (`allowed`), then the argument filters (`filters`); and its
//! JSON, checked in as specs/seccomp/agent.json.

use oci_spec::runtime::{Arch, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompBuilder};

use super::allowed::ALLOWED;
use super::filters::conditional_rules;
use super::rule::{rule, EPERM};

/// The checked-in profile (specs/seccomp/agent.json), byte for byte what
/// `agent_profile_json()` generates (a unit test holds them equal).
pub const AGENT_PROFILE_JSON: &str = include_str!("../../../specs/seccomp/agent.json");

/// The name policies use for the built-in profile.
pub const AGENT_PROFILE_NAME: &str = "agent";

/// The agent profile as an `oci_spec` value.
pub fn agent_profile() -> LinuxSeccomp {
    let mut syscalls = vec![rule(ALLOWED, LinuxSeccompAction::ScmpActAllow, None, vec![])];
    syscalls.extend(conditional_rules());
    LinuxSeccompBuilder::default()
        .default_action(LinuxSeccompAction::ScmpActErrno)
        .default_errno_ret(EPERM)
        .architectures(vec![Arch::ScmpArchX86_64, Arch::ScmpArchX86, Arch::ScmpArchX32])
        .syscalls(syscalls)
        .build()
        .expect("a seccomp profile with a default action is complete")
}

/// The agent profile as the JSON checked in at specs/seccomp/agent.json.
pub fn agent_profile_json() -> String {
    let mut text = serde_json::to_string_pretty(&agent_profile()).expect("a seccomp profile serializes");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seccomp::{decide, syscalls, Decision, CONDITIONAL, DENIED};

    fn call(name: &str, a0: u64) -> Decision {
        decide(&agent_profile(), name, [a0, 0, 0, 0, 0, 0])
    }

    #[test]
    fn checked_in_profile_is_the_generated_one() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../specs/seccomp/agent.json");
        let generated = agent_profile_json();
        if std::env::var_os("CLAUDE_SHIM_REGENERATE").is_some() {
            std::fs::write(path, &generated).unwrap();
            return;
        }
        assert!(
            AGENT_PROFILE_JSON == generated,
            "specs/seccomp/agent.json is stale; regenerate it with \
             `CLAUDE_SHIM_REGENERATE=1 cargo test -p claude-shim-bundle checked_in_profile`"
        );
    }

    #[test]
    fn every_number_survives_a_double() {
        // jq 1.6 and JavaScript read JSON numbers as doubles: a value above
        // 2^53 comes back rounded, and runc then rejects (or misreads) it.
        fn walk(v: &serde_json::Value) {
            match v {
                serde_json::Value::Number(n) => {
                    let x = n.as_u64().expect("the profile's numbers are unsigned");
                    assert!(x <= 1 << 53, "{x} does not survive a double");
                }
                serde_json::Value::Array(a) => a.iter().for_each(walk),
                serde_json::Value::Object(o) => o.values().for_each(walk),
                _ => {}
            }
        }
        walk(&serde_json::from_str(&agent_profile_json()).unwrap());
    }

    #[test]
    fn default_is_eperm_on_the_three_x86_abis() {
        let p = agent_profile();
        assert_eq!(p.default_action(), LinuxSeccompAction::ScmpActErrno);
        assert_eq!(p.default_errno_ret(), Some(EPERM));
        assert_eq!(
            p.architectures().as_deref(),
            Some(&[Arch::ScmpArchX86_64, Arch::ScmpArchX86, Arch::ScmpArchX32][..])
        );
    }

    #[test]
    fn every_name_is_a_known_syscall() {
        for r in agent_profile().syscalls().iter().flatten() {
            for n in r.names() {
                assert!(syscalls::is_known(n), "unknown syscall {n:?} in the profile");
            }
        }
        for (n, _) in DENIED.iter().chain(CONDITIONAL) {
            assert!(syscalls::is_known(n), "unknown syscall {n:?} in the reasons");
        }
    }

    #[test]
    fn denied_calls_get_eperm() {
        for (n, _) in DENIED {
            assert_eq!(call(n, 0), Decision::Errno(EPERM), "{n}");
        }
        for n in [
            "mount",
            "umount2",
            "pivot_root",
            "setns",
            "io_uring_setup",
            "bpf",
            "ptrace",
            "kexec_load",
        ] {
            assert_eq!(call(n, 0), Decision::Errno(EPERM), "{n}");
        }
    }

    #[test]
    fn everyday_calls_are_allowed() {
        for n in [
            "read",
            "write",
            "openat",
            "execve",
            "mmap",
            "futex",
            "wait4",
            "rt_sigreturn",
        ] {
            assert_eq!(call(n, 0), Decision::Allow, "{n}");
        }
    }
}
