//! The OCI pieces every rule of the profile is built from: one argument
//! comparison, one syscall rule, and the errnos the profile answers with.
//! The tables, the argument filters, the assembly and `decide` all sit on it.

use oci_spec::runtime::{
    LinuxSeccompAction, LinuxSeccompArg, LinuxSeccompArgBuilder, LinuxSeccompOperator, LinuxSyscall,
    LinuxSyscallBuilder,
};

pub const EPERM: u32 = 1;
/// glibc falls back from clone3 to clone only on ENOSYS, and clone's flags,
/// unlike clone3's (behind a pointer), are visible to the filter.
pub const ENOSYS: u32 = 38;

pub(super) fn arg(index: usize, op: LinuxSeccompOperator, value: u64, value_two: Option<u64>) -> LinuxSeccompArg {
    let b = LinuxSeccompArgBuilder::default().index(index).op(op).value(value);
    let b = match value_two {
        Some(v) => b.value_two(v),
        None => b,
    };
    b.build()
        .expect("a seccomp argument with index, op and value is complete")
}

pub(super) fn rule(
    names: &[&str],
    action: LinuxSeccompAction,
    errno: Option<u32>,
    args: Vec<LinuxSeccompArg>,
) -> LinuxSyscall {
    let mut b = LinuxSyscallBuilder::default()
        .names(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
        .action(action);
    if let Some(e) = errno {
        b = b.errno_ret(e);
    }
    if !args.is_empty() {
        b = b.args(args);
    }
    b.build().expect("a syscall rule with names and an action is complete")
}

pub(super) fn allow_if(name: &str, a: LinuxSeccompArg) -> LinuxSyscall {
    rule(&[name], LinuxSeccompAction::ScmpActAllow, None, vec![a])
}
