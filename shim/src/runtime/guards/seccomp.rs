//! Seccomp guards: the profile an engine or a policy wrote, adjusted so that
//! the filter libcontainer 0.7 builds from it means what the author meant and
//! cannot be sidestepped through another entry point of the same call.

use anyhow::{bail, Result};
use oci_spec::runtime::{
    LinuxSeccomp, LinuxSeccompAction, LinuxSeccompArgBuilder, LinuxSeccompOperator, LinuxSyscall, LinuxSyscallBuilder,
};

/// ENOSYS: glibc falls back from clone3 to clone only on this errno, and the
/// flags of clone (unlike clone3's, which sit behind a pointer) can be inspected.
const ENOSYS: u32 = libc::ENOSYS as u32;

/// The OCI spec (and runc) read `SCMP_CMP_MASKED_EQ` as `(arg & value) == valueTwo`;
/// libcontainer 0.7 takes `valueTwo` as the mask. Swapping the operands makes
/// libcontainer build the filter the profile's author meant.
pub fn swap_masked_eq_operands(seccomp: &mut LinuxSeccomp) {
    let Some(mut rules) = seccomp.syscalls().clone() else {
        return;
    };
    for rule in rules.iter_mut() {
        let Some(mut args) = rule.args().clone() else { continue };
        for arg in args.iter_mut() {
            if arg.op() == LinuxSeccompOperator::ScmpCmpMaskedEq {
                *arg = LinuxSeccompArgBuilder::default()
                    .index(arg.index())
                    .value(arg.value_two().unwrap_or(0))
                    .value_two(arg.value())
                    .op(arg.op())
                    .build()
                    .expect("a seccomp argument with every field set is complete");
            }
        }
        rule.set_args(Some(args));
    }
    seccomp.set_syscalls(Some(rules));
}

fn is_permissive(action: LinuxSeccompAction) -> bool {
    matches!(
        action,
        LinuxSeccompAction::ScmpActAllow | LinuxSeccompAction::ScmpActLog
    )
}

/// libcontainer skips syscall names it cannot resolve with only a warning, so a
/// typo in a deny rule silently opens that syscall. A name that only widens
/// access (an allow rule under a deny default) is safe to skip; a name in a rule
/// that restricts is refused.
pub fn check_syscall_names(seccomp: &LinuxSeccomp, warnings: &mut Vec<String>) -> Result<()> {
    let default_permissive = is_permissive(seccomp.default_action());
    for rule in seccomp.syscalls().iter().flatten() {
        let widens = is_permissive(rule.action()) && !default_permissive;
        for name in rule.names() {
            if libseccomp::ScmpSyscall::from_name(name).is_ok() {
                continue;
            }
            if widens {
                warnings.push(format!(
                    "seccomp: unknown syscall {name:?} in an allow rule stays denied"
                ));
            } else {
                bail!(
                    "resolve syscall {name:?} of a {} rule in the seccomp profile: unknown to libseccomp {}",
                    rule.action(),
                    libseccomp_version()
                );
            }
        }
    }
    Ok(())
}

pub fn libseccomp_version() -> String {
    match libseccomp::ScmpVersion::current() {
        Ok(v) => format!("{}.{}.{}", v.major, v.minor, v.micro),
        Err(_) => "(unknown version)".to_owned(),
    }
}

/// A profile that inspects clone's flags is bypassed by clone3, whose flags the
/// filter cannot read; libcontainer does not special-case it. Make clone3 return
/// ENOSYS so libc falls back to clone, unless the profile already decides clone3
/// with an errno.
pub fn deny_clone3(seccomp: &mut LinuxSeccomp) -> Option<String> {
    let clone_inspected = seccomp
        .syscalls()
        .iter()
        .flatten()
        .any(|r| r.names().iter().any(|n| n == "clone") && r.args().as_ref().is_some_and(|a| !a.is_empty()));
    let default_errno = seccomp.default_action() == LinuxSeccompAction::ScmpActErrno;
    let mut rules = seccomp.syscalls().clone().unwrap_or_default();
    let mut warning = None;
    let mut decided = false;
    for rule in rules.iter_mut() {
        if !rule.names().iter().any(|n| n == "clone3") {
            continue;
        }
        if is_permissive(rule.action()) && clone_inspected {
            // Allowing clone3 while filtering clone's flags is the bypass itself.
            let names: Vec<String> = rule.names().iter().filter(|n| *n != "clone3").cloned().collect();
            rule.set_names(names);
            warning = Some(
                "seccomp: clone3 was allowed while clone's flags are filtered; clone3 now returns ENOSYS".to_owned(),
            );
        } else {
            decided = true;
        }
    }
    rules.retain(|r| !r.names().is_empty());
    if !decided && (clone_inspected || default_errno || warning.is_some()) {
        rules.push(clone3_enosys());
    }
    seccomp.set_syscalls(Some(rules));
    warning
}

fn clone3_enosys() -> LinuxSyscall {
    LinuxSyscallBuilder::default()
        .names(vec!["clone3".to_owned()])
        .action(LinuxSeccompAction::ScmpActErrno)
        .errno_ret(ENOSYS)
        .build()
        .expect("a syscall rule with names and an action is complete")
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_spec::runtime::LinuxSeccompBuilder;

    fn clone_rule(value: u64, value_two: u64) -> LinuxSyscall {
        LinuxSyscallBuilder::default()
            .names(vec!["clone".to_owned()])
            .action(LinuxSeccompAction::ScmpActAllow)
            .args(vec![LinuxSeccompArgBuilder::default()
                .index(0usize)
                .value(value)
                .value_two(value_two)
                .op(LinuxSeccompOperator::ScmpCmpMaskedEq)
                .build()
                .unwrap()])
            .build()
            .unwrap()
    }

    fn profile(default: LinuxSeccompAction, rules: Vec<LinuxSyscall>) -> LinuxSeccomp {
        LinuxSeccompBuilder::default()
            .default_action(default)
            .syscalls(rules)
            .build()
            .unwrap()
    }

    #[test]
    fn masked_eq_operands_are_swapped_for_libcontainer() {
        let mut s = profile(LinuxSeccompAction::ScmpActErrno, vec![clone_rule(0x7E02_0000, 0)]);
        swap_masked_eq_operands(&mut s);
        let arg = s.syscalls().as_ref().unwrap()[0].args().as_ref().unwrap()[0];
        assert_eq!(arg.value(), 0);
        assert_eq!(arg.value_two(), Some(0x7E02_0000));
    }

    #[test]
    fn clone3_gets_enosys_when_clone_is_inspected() {
        let mut s = profile(LinuxSeccompAction::ScmpActAllow, vec![clone_rule(0x1000_0000, 0)]);
        assert!(deny_clone3(&mut s).is_none());
        let rules = s.syscalls().as_ref().unwrap();
        let clone3 = rules.iter().find(|r| r.names() == &["clone3".to_owned()]).unwrap();
        assert_eq!(clone3.action(), LinuxSeccompAction::ScmpActErrno);
        assert_eq!(clone3.errno_ret(), Some(38));
    }

    #[test]
    fn allowed_clone3_beside_filtered_clone_is_replaced() {
        let allow = LinuxSyscallBuilder::default()
            .names(vec!["clone3".to_owned(), "read".to_owned()])
            .action(LinuxSeccompAction::ScmpActAllow)
            .build()
            .unwrap();
        let mut s = profile(
            LinuxSeccompAction::ScmpActErrno,
            vec![clone_rule(0x7E02_0000, 0), allow],
        );
        assert!(deny_clone3(&mut s).is_some());
        let rules = s.syscalls().as_ref().unwrap();
        assert_eq!(rules[1].names(), &["read".to_owned()]);
        assert!(rules
            .iter()
            .any(|r| r.names() == &["clone3".to_owned()] && r.errno_ret() == Some(38)));
    }

    #[test]
    fn explicit_clone3_errno_is_kept() {
        let enosys = clone3_enosys();
        let mut s = profile(
            LinuxSeccompAction::ScmpActErrno,
            vec![clone_rule(0x7E02_0000, 0), enosys],
        );
        deny_clone3(&mut s);
        assert_eq!(s.syscalls().as_ref().unwrap().len(), 2);
    }

    #[test]
    fn unknown_name_in_deny_rule_is_refused() {
        let deny = LinuxSyscallBuilder::default()
            .names(vec!["unshare_typo".to_owned()])
            .action(LinuxSeccompAction::ScmpActErrno)
            .build()
            .unwrap();
        let s = profile(LinuxSeccompAction::ScmpActAllow, vec![deny]);
        let err = check_syscall_names(&s, &mut Vec::new()).unwrap_err().to_string();
        assert!(err.contains("unshare_typo"), "{err}");
    }

    #[test]
    fn unknown_name_in_allow_rule_only_warns() {
        let allow = LinuxSyscallBuilder::default()
            .names(vec!["not_a_syscall".to_owned(), "read".to_owned()])
            .action(LinuxSeccompAction::ScmpActAllow)
            .build()
            .unwrap();
        let s = profile(LinuxSeccompAction::ScmpActErrno, vec![allow]);
        let mut warnings = Vec::new();
        check_syscall_names(&s, &mut warnings).unwrap();
        assert_eq!(warnings.len(), 1);
    }
}
