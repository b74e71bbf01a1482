//! claude-shim: the -ENOSYS stub runc prepends to every seccomp program
//! (runc's libcontainer/seccomp/patchbpf). A syscall numbered above the
//! highest one the profile names for its architecture is newer than the
//! profile: it returns ENOSYS, so that libc falls back to an older call (as
//! with clone3 or openat2), instead of the profile's default errno (EPERM),
//! which programs take as a refusal. Syscalls the profile knows keep its
//! answer. No stub when the default action allows, or is already ENOSYS.

use libseccomp::{ScmpArch, ScmpSyscall};
use oci_spec::runtime::{LinuxSeccomp, LinuxSeccompAction};

use super::translate_arch;

const AUDIT_ARCH_I386: u32 = 0x4000_0003;
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
const AUDIT_ARCH_ARM: u32 = 0x4000_0028;
const AUDIT_ARCH_AARCH64: u32 = 0xc000_00b7;
const AUDIT_ARCH_PPC64LE: u32 = 0xc000_0015;
const AUDIT_ARCH_RISCV64: u32 = 0xc000_00f3;
const AUDIT_ARCH_S390X: u32 = 0x8000_0016;
/// x32 syscalls are x86_64's with this bit set (__X32_SYSCALL_BIT).
const X32_BIT: u32 = 1 << 30;

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JMP_JA: u16 = 0x05;
const BPF_JMP_JEQ_K: u16 = 0x15;
const BPF_JMP_JGT_K: u16 = 0x25;
const BPF_JMP_JSET_K: u16 = 0x45;
const BPF_RET_K: u16 = 0x06;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
/// offsetof(struct seccomp_data, nr) and (…, arch).
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;

/// The highest syscall number the profile names, per AUDIT_ARCH, split for
/// x86_64 into its 64-bit and x32 ABIs (runc's findLastSyscalls).
#[derive(Debug, Default, PartialEq)]
struct Last {
    arch: u32,
    /// For x86_64: the 64-bit ABI's; elsewhere the arch's.
    main: Option<u32>,
    /// For x86_64: the x32 ABI's (numbers with X32_BIT).
    x32: Option<u32>,
}

fn audit_arch(arch: ScmpArch) -> Option<u32> {
    Some(match arch {
        ScmpArch::X86 => AUDIT_ARCH_I386,
        ScmpArch::X8664 | ScmpArch::X32 => AUDIT_ARCH_X86_64,
        ScmpArch::Arm => AUDIT_ARCH_ARM,
        ScmpArch::Aarch64 => AUDIT_ARCH_AARCH64,
        ScmpArch::Ppc64Le => AUDIT_ARCH_PPC64LE,
        ScmpArch::Riscv64 => AUDIT_ARCH_RISCV64,
        ScmpArch::S390X => AUDIT_ARCH_S390X,
        // Other architectures get no stub: their calls keep the default action.
        _ => return None,
    })
}

fn last_syscalls(seccomp: &LinuxSeccomp) -> Vec<Last> {
    let mut out: Vec<Last> = Vec::new();
    for &arch in seccomp.architectures().iter().flatten() {
        let mut arch = translate_arch(arch);
        if arch == ScmpArch::Native {
            arch = ScmpArch::native();
        }
        let Some(audit) = audit_arch(arch) else {
            continue;
        };
        // Negative numbers are libseccomp's pseudo-syscalls (not on this arch).
        let largest = seccomp
            .syscalls()
            .iter()
            .flatten()
            .flat_map(|rule| rule.names())
            .filter_map(|name| ScmpSyscall::from_name_by_arch(name, arch).ok())
            .map(ScmpSyscall::as_raw_syscall)
            .filter(|&nr| nr > 0)
            .max();
        let Some(largest) = largest else {
            continue;
        };
        let entry = match out.iter_mut().position(|l| l.arch == audit) {
            Some(i) => &mut out[i],
            None => {
                out.push(Last {
                    arch: audit,
                    ..Last::default()
                });
                out.last_mut().expect("just pushed")
            }
        };
        if arch == ScmpArch::X32 {
            entry.x32 = Some(largest as u32);
        } else {
            entry.main = Some(largest as u32);
        }
    }
    out
}

/// An instruction whose jump targets are labels, resolved by `assemble`.
#[derive(Clone, Copy)]
enum Insn {
    Load(u32),
    /// Jump if A == K / A > K / A & K, to the first label if true, else the second.
    Jeq(u32, Label, Label),
    Jgt(u32, Label, Label),
    Jset(u32, Label, Label),
    Ja(Label),
    Ret(u32),
    Mark(Label),
}

#[derive(Clone, Copy, PartialEq)]
enum Label {
    Enosys,
    /// The profile's own program, right after the stub.
    Filter,
    Section(usize),
    /// x86_64's 64-bit ABI check, and its x32 one.
    Main(usize),
    X32(usize),
    Native(usize),
}

fn assemble(code: &[Insn]) -> Option<Vec<libc::sock_filter>> {
    // Where each label lands, counted in emitted instructions.
    let mut at = Vec::new();
    let mut n = 0usize;
    for insn in code {
        match insn {
            Insn::Mark(l) => at.push((*l, n)),
            _ => n += 1,
        }
    }
    let end = n;
    let find = |l: Label| {
        if l == Label::Filter {
            Some(end)
        } else {
            at.iter().find(|(k, _)| *k == l).map(|(_, i)| *i)
        }
    };
    let mut out = Vec::with_capacity(n);
    for insn in code {
        let here = out.len();
        // Jumps count from the instruction after this one and go forward only.
        let off = |l: Label| find(l).and_then(|t| t.checked_sub(here + 1));
        let cond = |code: u16, k: u32, t: Label, f: Label| {
            Some(libc::sock_filter {
                code,
                jt: u8::try_from(off(t)?).ok()?,
                jf: u8::try_from(off(f)?).ok()?,
                k,
            })
        };
        let insn = match *insn {
            Insn::Mark(_) => continue,
            Insn::Load(k) => libc::sock_filter {
                code: BPF_LD_W_ABS,
                jt: 0,
                jf: 0,
                k,
            },
            Insn::Jeq(k, t, f) => cond(BPF_JMP_JEQ_K, k, t, f)?,
            Insn::Jgt(k, t, f) => cond(BPF_JMP_JGT_K, k, t, f)?,
            Insn::Jset(k, t, f) => cond(BPF_JMP_JSET_K, k, t, f)?,
            Insn::Ja(t) => libc::sock_filter {
                code: BPF_JMP_JA,
                jt: 0,
                jf: 0,
                k: u32::try_from(off(t)?).ok()?,
            },
            Insn::Ret(k) => libc::sock_filter {
                code: BPF_RET_K,
                jt: 0,
                jf: 0,
                k,
            },
        };
        out.push(insn);
    }
    Some(out)
}

/// The stub's instructions for `seccomp`, to run ahead of its program; empty
/// when the profile needs none.
pub(super) fn stub(seccomp: &LinuxSeccomp) -> Vec<libc::sock_filter> {
    let allows = matches!(
        seccomp.default_action(),
        LinuxSeccompAction::ScmpActAllow
            | LinuxSeccompAction::ScmpActLog
            | LinuxSeccompAction::ScmpActTrace
    );
    if allows || seccomp.default_errno_ret() == Some(libc::ENOSYS as u32) {
        return Vec::new();
    }
    let last = last_syscalls(seccomp);
    if last.is_empty() {
        return Vec::new();
    }
    let mut code = vec![Insn::Load(OFF_ARCH)];
    for (i, l) in last.iter().enumerate() {
        let next = if i + 1 < last.len() {
            Label::Native(i + 1)
        } else {
            Label::Filter
        };
        code.push(Insn::Mark(Label::Native(i)));
        code.push(Insn::Jeq(l.arch, Label::Section(i), next));
    }
    for (i, l) in last.iter().enumerate() {
        code.push(Insn::Mark(Label::Section(i)));
        code.push(Insn::Load(OFF_NR));
        if l.arch == AUDIT_ARCH_X86_64 {
            // x32 calls carry X32_BIT; each ABI has its own highest number,
            // and an ABI the profile does not list keeps the default action.
            let main = if l.main.is_some() {
                Label::Main(i)
            } else {
                Label::Filter
            };
            let x32 = if l.x32.is_some() {
                Label::X32(i)
            } else {
                Label::Filter
            };
            code.push(Insn::Jset(X32_BIT, x32, main));
            if let Some(max) = l.main {
                code.push(Insn::Mark(Label::Main(i)));
                code.push(Insn::Jgt(max, Label::Enosys, Label::Filter));
            }
            if let Some(max) = l.x32 {
                code.push(Insn::Mark(Label::X32(i)));
                code.push(Insn::Jgt(max, Label::Enosys, Label::Filter));
            }
        } else if let Some(max) = l.main {
            code.push(Insn::Jgt(max, Label::Enosys, Label::Filter));
        } else {
            code.push(Insn::Ja(Label::Filter));
        }
    }
    code.push(Insn::Mark(Label::Enosys));
    code.push(Insn::Ret(SECCOMP_RET_ERRNO | libc::ENOSYS as u32));
    // A stub too long for BPF's 8-bit jumps (never with the few ABIs there
    // are) is left out rather than loaded wrong.
    assemble(&code).unwrap_or_default()
}

/// The stub as bytes, in `seccomp_export_bpf`'s layout (native-endian records).
pub(super) fn stub_bytes(seccomp: &LinuxSeccomp) -> Vec<u8> {
    let mut out = Vec::new();
    for f in stub(seccomp) {
        out.extend_from_slice(&f.code.to_ne_bytes());
        out.push(f.jt);
        out.push(f.jf);
        out.extend_from_slice(&f.k.to_ne_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use oci_spec::runtime::{Arch, LinuxSeccompBuilder, LinuxSyscallBuilder};

    use super::*;

    fn profile(default: LinuxSeccompAction, archs: Vec<Arch>, names: &[&str]) -> LinuxSeccomp {
        LinuxSeccompBuilder::default()
            .default_action(default)
            .architectures(archs)
            .syscalls(vec![
                LinuxSyscallBuilder::default()
                    .names(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                    .action(LinuxSeccompAction::ScmpActAllow)
                    .build()
                    .unwrap(),
            ])
            .build()
            .unwrap()
    }

    /// Runs the stub as the kernel would for one call; None = fell through
    /// to the profile's program.
    fn run(stub: &[libc::sock_filter], arch: u32, nr: u32) -> Option<u32> {
        let mut pc = 0usize;
        let mut a = 0u32;
        loop {
            if pc == stub.len() {
                return None;
            }
            let f = stub[pc];
            pc += 1;
            match f.code {
                BPF_LD_W_ABS => a = if f.k == OFF_ARCH { arch } else { nr },
                BPF_JMP_JA => pc += f.k as usize,
                BPF_RET_K => return Some(f.k),
                c => {
                    let hit = match c {
                        BPF_JMP_JEQ_K => a == f.k,
                        BPF_JMP_JGT_K => a > f.k,
                        BPF_JMP_JSET_K => a & f.k != 0,
                        _ => panic!("unexpected opcode {c:#x}"),
                    };
                    pc += if hit { f.jt } else { f.jf } as usize;
                }
            }
        }
    }

    const ENOSYS: Option<u32> = Some(SECCOMP_RET_ERRNO | libc::ENOSYS as u32);

    #[test]
    fn newer_than_the_profile_is_enosys_per_abi() {
        // write: 1 on x86_64, 4 on i386, 0x40000001 on x32; read: 0, 3, 0x40000000.
        let p = profile(
            LinuxSeccompAction::ScmpActErrno,
            vec![Arch::ScmpArchX86_64, Arch::ScmpArchX86, Arch::ScmpArchX32],
            &["read", "write"],
        );
        let s = stub(&p);
        assert_eq!(run(&s, AUDIT_ARCH_X86_64, 1), None);
        assert_eq!(run(&s, AUDIT_ARCH_X86_64, 2), ENOSYS);
        assert_eq!(run(&s, AUDIT_ARCH_X86_64, 1000), ENOSYS);
        assert_eq!(run(&s, AUDIT_ARCH_X86_64, X32_BIT | 1), None);
        assert_eq!(run(&s, AUDIT_ARCH_X86_64, X32_BIT | 2), ENOSYS);
        assert_eq!(run(&s, AUDIT_ARCH_I386, 4), None);
        assert_eq!(run(&s, AUDIT_ARCH_I386, 5), ENOSYS);
        // An arch the profile does not list keeps the program's answer.
        assert_eq!(run(&s, AUDIT_ARCH_AARCH64, 1000), None);
    }

    #[test]
    fn an_abi_not_listed_keeps_the_default() {
        let p = profile(
            LinuxSeccompAction::ScmpActErrno,
            vec![Arch::ScmpArchX86_64],
            &["read", "write"],
        );
        let s = stub(&p);
        assert_eq!(run(&s, AUDIT_ARCH_X86_64, 1000), ENOSYS);
        assert_eq!(run(&s, AUDIT_ARCH_X86_64, X32_BIT | 1000), None);
    }

    #[test]
    fn no_stub_when_the_default_allows_or_is_enosys() {
        let allow = profile(
            LinuxSeccompAction::ScmpActAllow,
            vec![Arch::ScmpArchX86_64],
            &["read"],
        );
        assert!(stub(&allow).is_empty());
        let mut enosys = profile(
            LinuxSeccompAction::ScmpActErrno,
            vec![Arch::ScmpArchX86_64],
            &["read"],
        );
        enosys.set_default_errno_ret(Some(libc::ENOSYS as u32));
        assert!(stub(&enosys).is_empty());
        let none = profile(LinuxSeccompAction::ScmpActErrno, vec![], &["read"]);
        assert!(stub(&none).is_empty());
    }
}
