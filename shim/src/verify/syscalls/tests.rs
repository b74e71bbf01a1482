//! Unit tests of the catalog (unique names, libseccomp's numbers, the i386
//! entry point, the rules it must cover) and of what the agent profile makes
//! of it.

use nix::errno::Errno;

use super::catalog::probes_for;
use super::*;
use crate::verify::errnos::{Errnos, SyscallExpect};

#[test]
fn names_are_unique() {
    let mut names: Vec<&str> = CATALOG.iter().map(|p| p.name).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len());
}

#[test]
fn numbers_match_libseccomp() {
    for p in CATALOG {
        let arch = match p.abi {
            Abi::X86_64 => libseccomp::ScmpArch::X8664,
            Abi::I386 => libseccomp::ScmpArch::X86,
        };
        let nr = libseccomp::ScmpSyscall::from_name_by_arch(p.syscall, arch)
            .unwrap_or_else(|e| panic!("{}: {e}", p.syscall));
        if i32::from(nr) < 0 {
            // libseccomp names i386's socket calls by a pseudo-number (it
            // also filters them as socketcall's); the direct call the
            // probe makes has the kernel's number, checked by the probe
            // reaching the kernel in the probe's unit tests.
            assert_eq!(p.abi, Abi::I386, "{}", p.name);
            continue;
        }
        assert_eq!(i32::from(nr) as i64, p.nr, "{}", p.name);
    }
}

#[test]
fn expectations_follow_the_agent_profile() {
    let exp = expectations_for(&claude_shim_bundle::seccomp::agent_profile());
    assert_eq!(
        exp.len(),
        CATALOG.len(),
        "the agent profile only allows or returns errnos"
    );
    let eperm = SyscallExpect::Blocked(Errnos::of(&[Errno::EPERM]));
    for name in [
        "mount",
        "setns",
        "unshare(CLONE_NEWUSER)",
        "unshare(CLONE_NEWUSER|1<<40)",
        "unshare(CLONE_NEWTIME)",
        "clone(CLONE_NEWUSER)",
        "io_uring_setup",
        "socket(AF_VSOCK)",
        "socket(AF_ALG)",
        "personality(ADDR_NO_RANDOMIZE)",
        "ptrace(PTRACE_TRACEME)",
        "kexec_load",
        "ioctl(TIOCSTI)",
        "ioctl(TIOCLINUX)",
        "socket(AF_VSOCK) via int 0x80",
        "unshare(CLONE_NEWUSER) via int 0x80",
        "clone(CLONE_NEWUSER) via int 0x80",
        "mount via int 0x80",
        "ioctl(TIOCSTI) via int 0x80",
        "socket(AF_NETLINK,NETLINK_KOBJECT_UEVENT)",
        "modify_ldt",
        "ioctl(TIOCSETD)",
        "socket(AF_NETLINK,NETLINK_KOBJECT_UEVENT) via int 0x80",
        "modify_ldt via int 0x80",
        "ioctl(TIOCSETD) via int 0x80",
    ] {
        assert_eq!(exp[name], eperm, "{name}");
    }
    let enosys = SyscallExpect::Blocked(Errnos::of(&[Errno::ENOSYS]));
    assert_eq!(exp["clone3"], enosys);
    assert_eq!(exp["socketcall(SYS_SOCKET) via int 0x80"], enosys);
    for name in [
        "fork",
        "thread",
        "socket(AF_UNIX)",
        "socket(AF_NETLINK,NETLINK_ROUTE)",
        "personality(0xffffffff)",
    ] {
        assert_eq!(exp[name], SyscallExpect::Allowed, "{name}");
    }
}

#[test]
fn i386_probes_fit_the_entry_point() {
    for p in CATALOG.iter().filter(|p| p.abi == Abi::I386) {
        assert_eq!(p.args[5], 0, "{}: int 0x80 probes pass five arguments", p.name);
        assert!(p.args.iter().all(|a| *a <= u64::from(u32::MAX)), "{}", p.name);
    }
}

#[test]
fn i386_probes_are_left_out_where_the_profile_has_no_i386() {
    let mut profile = claude_shim_bundle::seccomp::agent_profile();
    profile.set_architectures(Some(vec![oci_spec::runtime::Arch::ScmpArchX86_64]));
    let exp = expectations_for(&profile);
    assert!(exp.contains_key("ioctl(TIOCSTI)"));
    assert!(!exp.keys().any(|k| k.ends_with("via int 0x80")));
}

#[test]
fn clone_probes_never_share_memory() {
    // A clone that unexpectedly succeeds must behave like fork: the child
    // returns on a copy of the stack and exits.
    for p in probes_for("clone").filter(|p| p.method == Method::Attributed || p.name == "fork") {
        assert_eq!(p.args[0] & libc::CLONE_VM as u64, 0, "{}", p.name);
        assert_eq!(p.args[1], 0, "{}: no new stack", p.name);
    }
}

#[test]
fn rules_of_the_issue_are_covered() {
    for syscall in [
        "mount",
        "umount2",
        "pivot_root",
        "open_tree",
        "move_mount",
        "fsopen",
        "fsconfig",
        "fsmount",
        "fspick",
        "mount_setattr",
        "setns",
        "unshare",
        "clone",
        "clone3",
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "socket",
        "keyctl",
        "add_key",
        "request_key",
        "userfaultfd",
        "bpf",
        "perf_event_open",
        "open_by_handle_at",
        "ptrace",
        "process_vm_readv",
        "personality",
        "init_module",
        "finit_module",
        "delete_module",
        "kexec_load",
        "reboot",
        "swapon",
        "swapoff",
        "clock_settime",
        "settimeofday",
        "adjtimex",
        "acct",
        "modify_ldt",
        "ioctl",
    ] {
        assert!(probes_for(syscall).next().is_some(), "{syscall}");
    }
}
