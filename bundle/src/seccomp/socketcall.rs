//! socket(2) through i386's socketcall. A process may enter the kernel
//! through `int 0x80` wherever a profile admits SCMP_ARCH_X86, and there
//! socket() can also arrive as socketcall(SYS_SOCKET, args) with the family
//! behind a pointer no filter can read; libseccomp then opens
//! socketcall(SYS_SOCKET) for every socket rule. A profile that filters
//! socket's arguments (Docker's and podman's refuse some families or
//! protocols that way) is sidestepped unless socketcall is refused too.
//!
//! libseccomp cannot take that refusal inside such a profile: it derives
//! socketcall rules from the socket rules and refuses (EEXIST) a plain
//! socketcall rule whose action differs from theirs. A second filter stacked
//! after the container's would need no_new_privs (the capabilities are gone
//! by then), which runc does not impose. So the runtime puts the refusal in
//! front of the profile's own compiled program: five BPF instructions that
//! answer i386's socketcall with ENOSYS and hand everything else to the
//! profile, loaded by the init with the profile, as the profile is.

use oci_spec::runtime::{Arch, LinuxSeccomp, LinuxSeccompAction};

use super::ENOSYS;

/// Whether a process under `profile` can enter through `int 0x80` and be
/// judged by its rules: without SCMP_ARCH_X86 an i386 call meets the
/// filter's bad-architecture action (a kill).
pub fn admits_i386(profile: &LinuxSeccomp) -> bool {
    profile
        .architectures()
        .iter()
        .flatten()
        .any(|a| *a == Arch::ScmpArchX86)
}

fn names<'a>(
    profile: &'a LinuxSeccomp,
    name: &'a str,
) -> impl Iterator<Item = &'a oci_spec::runtime::LinuxSyscall> + 'a {
    profile
        .syscalls()
        .iter()
        .flatten()
        .filter(move |r| r.names().iter().any(|n| n == name))
}

/// Whether `profile` filters socket's arguments and admits i386.
pub fn inspects_socket_on_i386(profile: &LinuxSeccomp) -> bool {
    admits_i386(profile) && names(profile, "socket").any(|r| r.args().as_ref().is_some_and(|a| !a.is_empty()))
}

/// Whether `profile` refuses every socketcall on i386 by itself (an errno
/// rule without arguments, as the agent profile has).
pub fn refuses_socketcall(profile: &LinuxSeccomp) -> bool {
    admits_i386(profile)
        && names(profile, "socketcall")
            .any(|r| r.action() == LinuxSeccompAction::ScmpActErrno && r.args().as_ref().is_none_or(|a| a.is_empty()))
}

/// Whether the runtime must put `bpf_prefix` in front of `profile`'s
/// compiled program: it filters socket's arguments, admits i386, and does
/// not refuse socketcall itself.
pub fn needs_guard(profile: &LinuxSeccomp) -> bool {
    inspects_socket_on_i386(profile) && !refuses_socketcall(profile)
}

/// seccomp_data: the syscall number at offset 0, the architecture at 4.
const NR: u32 = 0;
const ARCH: u32 = 4;
const AUDIT_ARCH_I386: u32 = 0x4000_0003;
const I386_SOCKETCALL: u32 = 102;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_RET_K: u16 = 0x06;

/// The instructions `needs_guard` profiles get in front of their program,
/// as native-endian `struct sock_filter` records (what libseccomp exports).
/// Jumps are relative, so the profile's program after them is unchanged; its
/// first instruction loads the architecture again.
pub fn bpf_prefix() -> Vec<u8> {
    // (code, jt, jf, k)
    let insns: [(u16, u8, u8, u32); 5] = [
        (BPF_LD_W_ABS, 0, 0, ARCH),
        // Not i386: skip to the profile's program (3 ahead).
        (BPF_JEQ_K, 0, 3, AUDIT_ARCH_I386),
        (BPF_LD_W_ABS, 0, 0, NR),
        (BPF_JEQ_K, 0, 1, I386_SOCKETCALL),
        (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | ENOSYS),
    ];
    let mut out = Vec::with_capacity(insns.len() * 8);
    for (code, jt, jf, k) in insns {
        out.extend_from_slice(&code.to_ne_bytes());
        out.push(jt);
        out.push(jf);
        out.extend_from_slice(&k.to_ne_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seccomp::agent_profile;

    fn podman_like(arches: Vec<Arch>) -> LinuxSeccomp {
        serde_json::from_value(serde_json::json!({
            "defaultAction": "SCMP_ACT_ERRNO",
            "architectures": arches,
            "syscalls": [
                {"names": ["read", "socketcall"], "action": "SCMP_ACT_ALLOW"},
                {"names": ["socket"], "action": "SCMP_ACT_ERRNO", "errnoRet": 22,
                 "args": [{"index": 0, "value": 16, "op": "SCMP_CMP_EQ"}, {"index": 2, "value": 9, "op": "SCMP_CMP_EQ"}]},
                {"names": ["socket"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 2, "value": 9, "op": "SCMP_CMP_NE"}]}
            ]
        }))
        .unwrap()
    }

    #[test]
    fn an_engine_profile_that_filters_socket_needs_the_guard() {
        let p = podman_like(vec![Arch::ScmpArchX86_64, Arch::ScmpArchX86, Arch::ScmpArchX32]);
        assert!(inspects_socket_on_i386(&p));
        assert!(!refuses_socketcall(&p));
        assert!(needs_guard(&p));
    }

    #[test]
    fn no_guard_where_i386_cannot_enter_or_socketcall_is_refused() {
        let native = podman_like(vec![Arch::ScmpArchX86_64]);
        assert!(!needs_guard(&native), "int 0x80 meets the bad-arch kill");
        let agent = agent_profile();
        assert!(inspects_socket_on_i386(&agent) && refuses_socketcall(&agent));
        assert!(!needs_guard(&agent));
    }

    #[test]
    fn the_prefix_is_five_records_ending_in_enosys() {
        let p = bpf_prefix();
        assert_eq!(p.len(), 40);
        assert_eq!(u32::from_ne_bytes(p[36..40].try_into().unwrap()), 0x0005_0026);
    }
}
