//! The argument filters as the assembled profile applies them (`decide`):
//! namespace flags, ioctl requests, personality values, socket families,
//! netlink protocols and the i386 multiplexers, high bits included.

use super::*;
use crate::seccomp::{agent_profile, decide, Decision, EPERM};

const CLONE_NEWNS: u64 = 0x0002_0000;
const CLONE_NEWCGROUP: u64 = 0x0200_0000;
const CLONE_NEWUTS: u64 = 0x0400_0000;
const CLONE_NEWIPC: u64 = 0x0800_0000;
const CLONE_NEWUSER: u64 = 0x1000_0000;
const CLONE_NEWPID: u64 = 0x2000_0000;
const CLONE_NEWNET: u64 = 0x4000_0000;
const CLONE_NEWTIME: u64 = 0x80;
const NEW_FLAGS: [u64; 8] = [
    CLONE_NEWNS,
    CLONE_NEWCGROUP,
    CLONE_NEWUTS,
    CLONE_NEWIPC,
    CLONE_NEWUSER,
    CLONE_NEWPID,
    CLONE_NEWNET,
    CLONE_NEWTIME,
];
// What glibc's fork() and pthread_create() pass to clone.
const FORK_FLAGS: u64 = 0x0120_0011; // CLONE_CHILD_SETTID|CLONE_CHILD_CLEARTID|SIGCHLD
const THREAD_FLAGS: u64 = 0x003d_0f00;

fn call(name: &str, a0: u64) -> Decision {
    decide(&agent_profile(), name, [a0, 0, 0, 0, 0, 0])
}

#[test]
fn clone_without_namespace_flags_is_allowed() {
    assert_eq!(call("clone", FORK_FLAGS), Decision::Allow);
    assert_eq!(call("clone", THREAD_FLAGS), Decision::Allow);
    // High bits the kernel ignores do not turn the rule off.
    assert_eq!(call("clone", FORK_FLAGS | 0xffff_ffff_0000_0000), Decision::Allow);
}

#[test]
fn clone_and_unshare_with_any_namespace_flag_get_eperm() {
    for flag in NEW_FLAGS {
        for extra in [0, FORK_FLAGS, 0x1_0000_0000, 0x8000_0000, 0xffff_ffff_0000_0000] {
            let flags = flag | extra;
            if flag == CLONE_NEWTIME && extra == FORK_FLAGS {
                continue; // 0x80 is in clone's exit-signal byte; see CLONE_NEW_MASK
            }
            assert_eq!(call("clone", flags), Decision::Errno(EPERM), "clone({flags:#x})");
            assert_eq!(call("unshare", flags), Decision::Errno(EPERM), "unshare({flags:#x})");
        }
    }
    assert_eq!(call("unshare", CLONE_NEWUSER | CLONE_NEWNS), Decision::Errno(EPERM));
}

#[test]
fn unshare_without_namespace_flags_is_allowed() {
    const CLONE_FILES: u64 = 0x400;
    const CLONE_FS: u64 = 0x200;
    const CLONE_SYSVSEM: u64 = 0x40000;
    assert_eq!(call("unshare", CLONE_FILES), Decision::Allow);
    assert_eq!(call("unshare", CLONE_FS | CLONE_SYSVSEM), Decision::Allow);
}

#[test]
fn clone_rules_compare_with_the_full_mask_in_oci_order() {
    let p = agent_profile();
    for name in ["clone", "unshare"] {
        let r: Vec<_> = p
            .syscalls()
            .iter()
            .flatten()
            .filter(|r| r.names() == &[name.to_owned()])
            .collect();
        assert_eq!(r.len(), 1, "{name}");
        let a = r[0].args().as_ref().unwrap();
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].op(), LinuxSeccompOperator::ScmpCmpMaskedEq);
        assert_eq!(a[0].index(), 0);
        assert_eq!(a[0].value(), 0x7E02_0080, "OCI: value is the mask");
        assert_eq!(a[0].value_two(), Some(0), "OCI: valueTwo is the datum");
    }
}

#[test]
fn tiocsti_tioclinux_and_tiocsetd_are_refused_every_other_ioctl_allowed() {
    let ioctl = |req: u64| decide(&agent_profile(), "ioctl", [0, req, 0, 0, 0, 0]);
    for req in [0x5412u64, 0x541C, 0x5423] {
        assert_eq!(ioctl(req), Decision::Errno(EPERM), "{req:#x}");
        // The kernel reads the request as 32 bits: high bits change nothing.
        for high in [0x1_0000_0000u64, 0xffff_ffff_0000_0000] {
            assert_eq!(ioctl(req | high), Decision::Errno(EPERM), "{:#x}", req | high);
        }
    }
    // TCGETS, TIOCGWINSZ, TIOCSWINSZ, FIONREAD, FIOCLEX, TIOCGETD (reading
    // the line discipline), the neighbours, and extremes.
    for req in [
        0x5401u64,
        0x5413,
        0x5414,
        0x541B,
        0x541D,
        0x5411,
        0x5451,
        0x5424,
        0x5422,
        0,
        0xffff_ffff,
        0x8004_6601,
    ] {
        assert_eq!(ioctl(req), Decision::Allow, "{req:#x}");
        assert_eq!(ioctl(req | 0x1_0000_0000), Decision::Allow, "{req:#x} with a high bit");
    }
}

#[test]
fn masked_cover_is_exact() {
    let excluded = [0x5412u32, 0x541C, 0x5423];
    let cover = masked_cover(&excluded);
    let matches = |x: u64| cover.iter().filter(|(m, v)| x & m == *v).count();
    for x in (0x5400u64..0x5500).chain([0, 1, 0xffff_ffff, 0x8000_5412]) {
        let want = usize::from(!excluded.contains(&(x as u32)));
        assert_eq!(matches(x), want, "{x:#x}: exactly one rule, or none when excluded");
    }
    assert_eq!(masked_cover(&[]), [(0, 0)]);
    assert_eq!(cover.len(), 38);
}

#[test]
fn socketcall_gets_enosys_whatever_its_call() {
    // libseccomp turns every i386 socket rule into socketcall(SYS_SOCKET)
    // without the family check; the explicit rule wins over that.
    for call in [1u64, 2, 3, 0x1_0000_0001] {
        assert_eq!(
            decide(&agent_profile(), "socketcall", [call, 1, 0, 0, 0, 0]),
            Decision::Errno(ENOSYS)
        );
    }
    let r: Vec<_> = agent_profile()
        .syscalls()
        .iter()
        .flatten()
        .filter(|r| r.names().contains(&"socketcall".to_owned()))
        .cloned()
        .collect();
    assert_eq!(r.len(), 1);
    assert!(
        r[0].args().is_none(),
        "unconditional, so it overrides the generated rule"
    );
}

#[test]
fn clone3_gets_enosys() {
    assert_eq!(call("clone3", 0), Decision::Errno(ENOSYS));
}

#[test]
fn personality_only_for_harmless_values() {
    for p in PERSONALITY_ALLOWED {
        assert_eq!(call("personality", *p), Decision::Allow, "{p:#x}");
    }
    const ADDR_NO_RANDOMIZE: u64 = 0x0040000;
    const READ_IMPLIES_EXEC: u64 = 0x0400000;
    for p in [
        ADDR_NO_RANDOMIZE,
        READ_IMPLIES_EXEC,
        0x1_0000_0000,
        0x1,
        0xffff_ffff_ffff_ffff,
    ] {
        assert_eq!(call("personality", p), Decision::Errno(EPERM), "{p:#x}");
    }
    let rules = agent_profile()
        .syscalls()
        .iter()
        .flatten()
        .filter(|r| r.names() == &["personality".to_owned()])
        .count();
    assert_eq!(rules, PERSONALITY_ALLOWED.len());
}

#[test]
fn socket_excludes_af_alg_and_af_vsock_and_nothing_else() {
    for family in 0..=AF_HIGHEST {
        let want = if family == AF_ALG || family == AF_VSOCK {
            Decision::Errno(EPERM)
        } else {
            Decision::Allow
        };
        assert_eq!(call("socket", family), want, "socket({family})");
        // The kernel reads only the low 32 bits of the family: high bits
        // must never turn a denied family into an allowed one.
        for high in [0x1_0000_0000u64, 0x8000_0000_0000_0000, 0xffff_ffff_0000_0000] {
            assert_eq!(
                call("socket", family | high),
                Decision::Errno(EPERM),
                "socket({:#x})",
                family | high
            );
        }
    }
    assert_eq!(call("socket", AF_HIGHEST + 1), Decision::Errno(EPERM));
}

fn socket(family: u64, protocol: u64) -> Decision {
    decide(&agent_profile(), "socket", [family, 3, protocol, 0, 0, 0])
}

#[test]
fn netlink_only_for_netlink_route() {
    const NETLINK_SOCK_DIAG: u64 = 4;
    const NETLINK_AUDIT: u64 = 9;
    const NETLINK_NETFILTER: u64 = 12;
    const NETLINK_KOBJECT_UEVENT: u64 = 15;
    const NETLINK_GENERIC: u64 = 16;
    assert_eq!(socket(AF_NETLINK, NETLINK_ROUTE), Decision::Allow);
    // The kernel reads the protocol as an int: 0x1_00000000 is route.
    assert_eq!(socket(AF_NETLINK, 0x1_0000_0000), Decision::Allow);
    for protocol in (1..=31).chain([
        NETLINK_SOCK_DIAG,
        NETLINK_AUDIT,
        NETLINK_NETFILTER,
        NETLINK_GENERIC,
        0xffff_ffff,
        0x8000_0000,
    ]) {
        assert_eq!(socket(AF_NETLINK, protocol), Decision::Errno(EPERM), "{protocol}");
        for high in [0x1_0000_0000u64, 0xffff_ffff_0000_0000] {
            assert_eq!(
                socket(AF_NETLINK, protocol | high),
                Decision::Errno(EPERM),
                "{:#x}",
                protocol | high
            );
        }
    }
    assert_eq!(socket(AF_NETLINK, NETLINK_KOBJECT_UEVENT), Decision::Errno(EPERM));
    // The family's high bits refuse the netlink rule too.
    assert_eq!(
        socket(AF_NETLINK | 0x1_0000_0000, NETLINK_ROUTE),
        Decision::Errno(EPERM)
    );
    // Other families keep every protocol (IPPROTO_TCP 6, IPPROTO_ICMP 1...).
    for family in [libc_af::UNIX, libc_af::INET, libc_af::INET6] {
        for protocol in [0, 1, 6, 15, 17, 0x1_0000_0000] {
            assert_eq!(socket(family, protocol), Decision::Allow, "{family}, {protocol}");
        }
    }
}

/// Address families, as <sys/socket.h> numbers them (the bundle crate does
/// not link libc).
mod libc_af {
    pub const UNIX: u64 = 1;
    pub const INET: u64 = 2;
    pub const INET6: u64 = 10;
}

#[test]
fn socket_rules_are_disjoint() {
    // decide() takes the first rule that applies; the kernel filter has no
    // order. Disjoint rules make both read the profile the same way.
    let p = agent_profile();
    let rules: Vec<_> = p
        .syscalls()
        .iter()
        .flatten()
        .filter(|r| r.names() == &["socket".to_owned()])
        .collect();
    assert_eq!(rules.len(), 29);
    for family in 0..=64u64 {
        for protocol in [0u64, 15] {
            let args = [family, 3, protocol, 0, 0, 0];
            let applying = rules
                .iter()
                .filter(|r| {
                    let one = oci_spec::runtime::LinuxSeccompBuilder::default()
                        .default_action(LinuxSeccompAction::ScmpActKill)
                        .syscalls(vec![(**r).clone()])
                        .build()
                        .unwrap();
                    decide(&one, "socket", args) == Decision::Allow
                })
                .count();
            assert!(applying <= 1, "socket({family}, {protocol}): {applying} rules apply");
        }
    }
}

#[test]
fn socket_rules_compare_each_argument_once() {
    for r in agent_profile().syscalls().iter().flatten() {
        let mut seen = std::collections::HashSet::new();
        for a in r.args().iter().flatten() {
            assert!(
                seen.insert(a.index()),
                "{:?} compares argument {} twice",
                r.names(),
                a.index()
            );
        }
    }
}
