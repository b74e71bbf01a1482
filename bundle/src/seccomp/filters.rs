//! The argument filters: the conditional rules for clone, unshare, clone3,
//! personality, ioctl, socketcall and socket, with the flag masks, values,
//! families and protocols they compare. `profile` appends them after the
//! allow list.

use oci_spec::runtime::{LinuxSeccompAction, LinuxSeccompOperator, LinuxSyscall};

use super::rule::{allow_if, arg, rule, ENOSYS};

/// Every namespace flag of clone(2)/unshare(2): CLONE_NEWTIME 0x80,
/// CLONE_NEWNS 0x20000, CLONE_NEWCGROUP 0x02000000, CLONE_NEWUTS 0x04000000,
/// CLONE_NEWIPC 0x08000000, CLONE_NEWUSER 0x10000000, CLONE_NEWPID 0x20000000,
/// CLONE_NEWNET 0x40000000. Docker's mask (0x7E020000) lacks CLONE_NEWTIME,
/// which unshare(2) accepts. In clone(2) bit 0x80 belongs to the exit signal
/// byte, where no valid signal (1..=64) sets it, so the one mask serves both.
pub const CLONE_NEW_MASK: u64 =
    0x80 | 0x0002_0000 | 0x0200_0000 | 0x0400_0000 | 0x0800_0000 | 0x1000_0000 | 0x2000_0000 | 0x4000_0000;

/// personality(2) values that change nothing a sandbox cares about: PER_LINUX,
/// UNAME26, PER_LINUX32, PER_LINUX32|UNAME26, and 0xffffffff (query). Others,
/// such as ADDR_NO_RANDOMIZE (0x0040000), weaken ASLR or enable odd ABIs.
pub const PERSONALITY_ALLOWED: &[u64] = &[0x0, 0x8, 0x20000, 0x20008, 0xffff_ffff];

/// AF_NETLINK: allowed only for `NETLINK_ROUTE`. Its other protocols reach
/// kernel code no agent needs, some of it the host's: a sandbox started by
/// root has a network namespace owned by the host's user namespace, where a
/// NETLINK_KOBJECT_UEVENT socket hears the host's device events.
pub const AF_NETLINK: u64 = 16;
/// NETLINK_ROUTE: interfaces, addresses and routes, what `ip` and glibc
/// (getifaddrs, if_nameindex, getaddrinfo's AI_ADDRCONFIG) ask the kernel.
pub const NETLINK_ROUTE: u64 = 0;
/// AF_ALG: the kernel crypto API as sockets, a recurring source of kernel bugs
/// (CVE-2015-8970, CVE-2017-17806...); nothing an agent needs.
pub const AF_ALG: u64 = 38;
/// AF_VSOCK: talks to the hypervisor and sibling VMs, outside every network
/// namespace rule (CVE-2021-26708, CVE-2024-50264).
pub const AF_VSOCK: u64 = 40;
/// The highest address family the kernel knows (AF_MCTP, Linux 5.15+); above
/// it socket(2) would fail with EAFNOSUPPORT anyway.
pub const AF_HIGHEST: u64 = 45;

/// Why each conditional rule exists, in the order `conditional_rules` emits them.
pub const CONDITIONAL: &[(&str, &str)] = &[
    ("clone", "allowed only when no CLONE_NEW* flag is set: new namespaces (a user namespace above all) reopen kernel code that otherwise needs root"),
    ("unshare", "allowed only without CLONE_NEW* flags, so unshare(CLONE_FILES) and the like still work"),
    ("clone3", "ENOSYS: its flags sit behind a pointer the filter cannot read; libc then falls back to clone"),
    ("personality", "allowed only for 0x0, 0x8, 0x20000, 0x20008 and 0xffffffff (query); ADDR_NO_RANDOMIZE and odd ABIs are refused"),
    ("socket", "allowed for every address family up to AF_MCTP (45) except AF_ALG (38) and AF_VSOCK (40), and for AF_NETLINK (16) only with protocol NETLINK_ROUTE (0), compared on the low 32 bits the kernel reads: uevents, audit, sock_diag, nfnetlink, xfrm, generic netlink and the rest get EPERM"),
    ("socketcall", "ENOSYS on every call: the i386 socket multiplexer hides socket()'s family behind a pointer, and libseccomp opens socketcall(SYS_SOCKET) unconditionally for every socket rule unless socketcall has a rule of its own"),
    ("ioctl", "allowed for every request except TIOCSTI (0x5412: typing into the terminal's input queue), TIOCLINUX (0x541C: console selection and paste) and TIOCSETD (0x5423: attaching a line discipline, which the kernel may load as a module), compared on the low 32 bits the kernel reads"),
];

/// ioctl(2) requests the profile refuses. TIOCSTI and TIOCLINUX (whose
/// TIOCL_PASTESEL does the same on a console) push input into a terminal
/// another process reads; the kernel refuses TIOCSTI by default since 6.2
/// (dev.tty.legacy_tiocsti), and the profile does not rely on that. TIOCSETD
/// attaches a line discipline to the terminal (n_gsm, n_hdlc, slip, can...),
/// loading its module on demand where dev.tty.ldisc_autoload is 1: rarely
/// used kernel code with a long record of privilege escalations
/// (CVE-2017-2636 in n_hdlc, CVE-2023-6546 in n_gsm). No agent tool sets one.
pub const IOCTL_DENIED: &[u32] = &[0x5412, 0x541C, 0x5423];

/// Families socket(2) gets for any protocol: every one the kernel knows but
/// AF_NETLINK (a rule of its own) and those refused outright.
fn open_families() -> impl Iterator<Item = u64> {
    (0..=AF_HIGHEST).filter(|f| ![AF_NETLINK, AF_ALG, AF_VSOCK].contains(f))
}

/// The (mask, value) pairs of `SCMP_CMP_MASKED_EQ` rules whose union is every
/// 32-bit value except `excluded`: one rule per largest aligned block free of
/// excluded values. Masks never cover the high 32 bits, which the kernel
/// drops from an `unsigned int` argument, so no high bit opens or closes a rule.
pub fn masked_cover(excluded: &[u32]) -> Vec<(u64, u64)> {
    fn walk(prefix: u64, fixed: u32, excluded: &[u32], out: &mut Vec<(u64, u64)>) {
        let mask: u64 = if fixed == 0 {
            0
        } else {
            (0xFFFF_FFFFu64 << (32 - fixed)) & 0xFFFF_FFFF
        };
        let hits = excluded.iter().any(|&e| u64::from(e) & mask == prefix);
        if !hits {
            out.push((mask, prefix));
            return;
        }
        if fixed == 32 {
            return; // the excluded value itself
        }
        let bit = 1u64 << (31 - fixed);
        walk(prefix, fixed + 1, excluded, out);
        walk(prefix | bit, fixed + 1, excluded, out);
    }
    let mut out = Vec::new();
    walk(0, 0, excluded, &mut out);
    out
}

/// The rules that inspect arguments. libseccomp (and so runc and
/// libcontainer) compares each argument at most once per rule, and several
/// rules for one syscall are alternatives (OR); ranges are therefore written
/// as disjoint rules, and socket's netlink rule compares two arguments. The
/// kernel truncates int arguments (socket's family, personality) to 32 bits
/// while the filter compares 64, so every allowed range is bounded on both
/// sides: an argument with high bits set matches none.
pub(super) fn conditional_rules() -> Vec<LinuxSyscall> {
    use LinuxSeccompOperator::*;
    let mut rules = vec![
        allow_if("clone", arg(0, ScmpCmpMaskedEq, CLONE_NEW_MASK, Some(0))),
        allow_if("unshare", arg(0, ScmpCmpMaskedEq, CLONE_NEW_MASK, Some(0))),
        rule(&["clone3"], LinuxSeccompAction::ScmpActErrno, Some(ENOSYS), vec![]),
    ];
    for &p in PERSONALITY_ALLOWED {
        rules.push(allow_if("personality", arg(0, ScmpCmpEq, p, None)));
    }
    for (mask, value) in masked_cover(IOCTL_DENIED) {
        rules.push(allow_if("ioctl", arg(1, ScmpCmpMaskedEq, mask, Some(value))));
    }
    // An explicit rule of its own, with an errno other than the default's
    // (libcontainer and runc skip rules that repeat the default action).
    rules.push(rule(
        &["socketcall"],
        LinuxSeccompAction::ScmpActErrno,
        Some(ENOSYS),
        vec![],
    ));
    // Equality compares all 64 bits: a family with a high bit set, which the
    // kernel would read as another, matches no rule. (Masks over the high
    // bits would do it in fewer rules, but exceed 2^53, which JSON tools
    // reading numbers as doubles, jq 1.6 and JavaScript among them, round.)
    rules.push(allow_if("socket", arg(0, ScmpCmpLt, AF_NETLINK, None)));
    for family in open_families().filter(|f| *f > AF_NETLINK) {
        rules.push(allow_if("socket", arg(0, ScmpCmpEq, family, None)));
    }
    // The protocol is an int: its high 32 bits are not the kernel's.
    rules.push(rule(
        &["socket"],
        LinuxSeccompAction::ScmpActAllow,
        None,
        vec![
            arg(0, ScmpCmpEq, AF_NETLINK, None),
            arg(2, ScmpCmpMaskedEq, 0xFFFF_FFFF, Some(NETLINK_ROUTE)),
        ],
    ));
    rules
}

#[cfg(test)]
mod tests;
