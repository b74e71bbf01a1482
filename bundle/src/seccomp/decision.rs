//! What a profile does with one call, evaluated as runc builds the filter:
//! for the probe writer's expectations and for tests.

use oci_spec::runtime::{LinuxSeccomp, LinuxSeccompAction, LinuxSeccompArg, LinuxSeccompOperator};

use super::rule::EPERM;

/// What a profile does with one call, under the OCI semantics runc implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Errno(u32),
    /// Any other action (kill, trap, log, notify, trace).
    Other(LinuxSeccompAction),
}

fn arg_matches(a: &LinuxSeccompArg, args: &[u64; 6]) -> bool {
    let Some(&x) = args.get(a.index()) else { return false };
    let v = a.value();
    match a.op() {
        LinuxSeccompOperator::ScmpCmpNe => x != v,
        LinuxSeccompOperator::ScmpCmpLt => x < v,
        LinuxSeccompOperator::ScmpCmpLe => x <= v,
        LinuxSeccompOperator::ScmpCmpEq => x == v,
        LinuxSeccompOperator::ScmpCmpGe => x >= v,
        LinuxSeccompOperator::ScmpCmpGt => x > v,
        LinuxSeccompOperator::ScmpCmpMaskedEq => x & v == a.value_two().unwrap_or(0),
    }
}

fn to_decision(action: LinuxSeccompAction, errno: Option<u32>, default_errno: Option<u32>) -> Decision {
    match action {
        LinuxSeccompAction::ScmpActAllow => Decision::Allow,
        LinuxSeccompAction::ScmpActErrno => Decision::Errno(errno.or(default_errno).unwrap_or(EPERM)),
        other => Decision::Other(other),
    }
}

/// Evaluates `syscall(args)` against `profile` the way runc builds the
/// filter: a rule applies when all its argument comparisons hold; the first
/// rule that applies decides (this profile's rules for one syscall never
/// disagree); otherwise the default action. For the probe writer's
/// expectations and for tests; the kernel filter is what counts.
pub fn decide(profile: &LinuxSeccomp, syscall: &str, args: [u64; 6]) -> Decision {
    for r in profile.syscalls().iter().flatten() {
        if !r.names().iter().any(|n| n == syscall) {
            continue;
        }
        let applies = r.args().iter().flatten().all(|a| arg_matches(a, &args));
        if applies {
            return to_decision(r.action(), r.errno_ret(), profile.default_errno_ret());
        }
    }
    to_decision(profile.default_action(), None, profile.default_errno_ret())
}
