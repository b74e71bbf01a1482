//! The agent's seccomp profile, generated here as data and checked in as
//! specs/seccomp/agent.json (OCI LinuxSeccomp, usable as is by runc and by
//! `podman --security-opt seccomp=`). The compile step puts it in
//! `linux.seccomp`; the runtime adapts it for libcontainer (guards.rs).
//!
//! Shape: default EPERM; an allow list equivalent to Docker's default profile
//! for a container without capabilities (moby profiles/seccomp/default.json),
//! minus the calls the sandbox denies (`DENIED`, each with its reason), plus
//! conditional rules for clone, unshare, clone3, personality and socket.
//! Argument comparisons follow the OCI semantics: for SCMP_CMP_MASKED_EQ,
//! `value` is the mask and `valueTwo` the datum.

pub mod socketcall;
pub mod syscalls;

use oci_spec::runtime::{
    Arch, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompArg, LinuxSeccompArgBuilder, LinuxSeccompBuilder,
    LinuxSeccompOperator, LinuxSyscall, LinuxSyscallBuilder,
};

/// The checked-in profile (specs/seccomp/agent.json), byte for byte what
/// `agent_profile_json()` generates (a unit test holds them equal).
pub const AGENT_PROFILE_JSON: &str = include_str!("../../../specs/seccomp/agent.json");

/// The name policies use for the built-in profile.
pub const AGENT_PROFILE_NAME: &str = "agent";

pub const EPERM: u32 = 1;
/// glibc falls back from clone3 to clone only on ENOSYS, and clone's flags,
/// unlike clone3's (behind a pointer), are visible to the filter.
pub const ENOSYS: u32 = 38;

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

/// AF_ALG: the kernel crypto API as sockets, a recurring source of kernel bugs
/// (CVE-2015-8970, CVE-2017-17806...); nothing an agent needs.
pub const AF_ALG: u64 = 38;
/// AF_VSOCK: talks to the hypervisor and sibling VMs, outside every network
/// namespace rule (CVE-2021-26708, CVE-2024-50264).
pub const AF_VSOCK: u64 = 40;
/// The highest address family the kernel knows (AF_MCTP, Linux 5.15+); above
/// it socket(2) would fail with EAFNOSUPPORT anyway.
pub const AF_HIGHEST: u64 = 45;

/// Docker's default allow list for a container without capabilities, limited
/// to names of the x86 ABIs, minus `DENIED`, plus newer calls of the same kind
/// (cachestat, fchmodat2, map_shadow_stack, futex_wake/wait/requeue) and the
/// x86-only arch_prctl and modify_ldt that Docker allows on these arches.
const ALLOWED: &[&str] = &[
    "_llseek",
    "_newselect",
    "accept",
    "accept4",
    "access",
    "alarm",
    "arch_prctl",
    "bind",
    "brk",
    "cachestat",
    "capget",
    "capset",
    "chdir",
    "chmod",
    "chown",
    "chown32",
    "clock_getres",
    "clock_getres_time64",
    "clock_gettime",
    "clock_gettime64",
    "clock_nanosleep",
    "clock_nanosleep_time64",
    "close",
    "close_range",
    "connect",
    "copy_file_range",
    "creat",
    "dup",
    "dup2",
    "dup3",
    "epoll_create",
    "epoll_create1",
    "epoll_ctl",
    "epoll_ctl_old",
    "epoll_pwait",
    "epoll_pwait2",
    "epoll_wait",
    "epoll_wait_old",
    "eventfd",
    "eventfd2",
    "execve",
    "execveat",
    "exit",
    "exit_group",
    "faccessat",
    "faccessat2",
    "fadvise64",
    "fadvise64_64",
    "fallocate",
    "fanotify_mark",
    "fchdir",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "fchown",
    "fchown32",
    "fchownat",
    "fcntl",
    "fcntl64",
    "fdatasync",
    "fgetxattr",
    "flistxattr",
    "flock",
    "fork",
    "fremovexattr",
    "fsetxattr",
    "fstat",
    "fstat64",
    "fstatat64",
    "fstatfs",
    "fstatfs64",
    "fsync",
    "ftruncate",
    "ftruncate64",
    "futex",
    "futex_requeue",
    "futex_time64",
    "futex_wait",
    "futex_waitv",
    "futex_wake",
    "futimesat",
    "getcpu",
    "getcwd",
    "getdents",
    "getdents64",
    "getegid",
    "getegid32",
    "geteuid",
    "geteuid32",
    "getgid",
    "getgid32",
    "getgroups",
    "getgroups32",
    "getitimer",
    "getpeername",
    "getpgid",
    "getpgrp",
    "getpid",
    "getppid",
    "getpriority",
    "getrandom",
    "getresgid",
    "getresgid32",
    "getresuid",
    "getresuid32",
    "getrlimit",
    "get_robust_list",
    "getrusage",
    "getsid",
    "getsockname",
    "getsockopt",
    "get_thread_area",
    "gettid",
    "gettimeofday",
    "getuid",
    "getuid32",
    "getxattr",
    "inotify_add_watch",
    "inotify_init",
    "inotify_init1",
    "inotify_rm_watch",
    "io_cancel",
    "io_destroy",
    "io_getevents",
    "io_pgetevents",
    "io_pgetevents_time64",
    "ioprio_get",
    "ioprio_set",
    "io_setup",
    "io_submit",
    "ipc",
    "kill",
    "landlock_add_rule",
    "landlock_create_ruleset",
    "landlock_restrict_self",
    "lchown",
    "lchown32",
    "lgetxattr",
    "link",
    "linkat",
    "listen",
    "listxattr",
    "llistxattr",
    "lremovexattr",
    "lseek",
    "lsetxattr",
    "lstat",
    "lstat64",
    "madvise",
    "map_shadow_stack",
    "membarrier",
    "memfd_create",
    "memfd_secret",
    "mincore",
    "mkdir",
    "mkdirat",
    "mknod",
    "mknodat",
    "mlock",
    "mlock2",
    "mlockall",
    "mmap",
    "mmap2",
    "modify_ldt",
    "mprotect",
    "mq_getsetattr",
    "mq_notify",
    "mq_open",
    "mq_timedreceive",
    "mq_timedreceive_time64",
    "mq_timedsend",
    "mq_timedsend_time64",
    "mq_unlink",
    "mremap",
    "msgctl",
    "msgget",
    "msgrcv",
    "msgsnd",
    "msync",
    "munlock",
    "munlockall",
    "munmap",
    "name_to_handle_at",
    "nanosleep",
    "newfstatat",
    "open",
    "openat",
    "openat2",
    "pause",
    "pidfd_open",
    "pidfd_send_signal",
    "pipe",
    "pipe2",
    "pkey_alloc",
    "pkey_free",
    "pkey_mprotect",
    "poll",
    "ppoll",
    "ppoll_time64",
    "prctl",
    "pread64",
    "preadv",
    "preadv2",
    "prlimit64",
    "process_mrelease",
    "pselect6",
    "pselect6_time64",
    "pwrite64",
    "pwritev",
    "pwritev2",
    "read",
    "readahead",
    "readlink",
    "readlinkat",
    "readv",
    "recvfrom",
    "recvmmsg",
    "recvmmsg_time64",
    "recvmsg",
    "remap_file_pages",
    "removexattr",
    "rename",
    "renameat",
    "renameat2",
    "restart_syscall",
    "rmdir",
    "rseq",
    "rt_sigaction",
    "rt_sigpending",
    "rt_sigprocmask",
    "rt_sigqueueinfo",
    "rt_sigreturn",
    "rt_sigsuspend",
    "rt_sigtimedwait",
    "rt_sigtimedwait_time64",
    "rt_tgsigqueueinfo",
    "sched_getaffinity",
    "sched_getattr",
    "sched_getparam",
    "sched_get_priority_max",
    "sched_get_priority_min",
    "sched_getscheduler",
    "sched_rr_get_interval",
    "sched_rr_get_interval_time64",
    "sched_setaffinity",
    "sched_setattr",
    "sched_setparam",
    "sched_setscheduler",
    "sched_yield",
    "seccomp",
    "select",
    "semctl",
    "semget",
    "semop",
    "semtimedop",
    "semtimedop_time64",
    "sendfile",
    "sendfile64",
    "sendmmsg",
    "sendmsg",
    "sendto",
    "setfsgid",
    "setfsgid32",
    "setfsuid",
    "setfsuid32",
    "setgid",
    "setgid32",
    "setgroups",
    "setgroups32",
    "setitimer",
    "setpgid",
    "setpriority",
    "setregid",
    "setregid32",
    "setresgid",
    "setresgid32",
    "setresuid",
    "setresuid32",
    "setreuid",
    "setreuid32",
    "setrlimit",
    "set_robust_list",
    "setsid",
    "setsockopt",
    "set_thread_area",
    "set_tid_address",
    "setuid",
    "setuid32",
    "setxattr",
    "shmat",
    "shmctl",
    "shmdt",
    "shmget",
    "shutdown",
    "sigaltstack",
    "signalfd",
    "signalfd4",
    "sigprocmask",
    "sigreturn",
    "socketpair",
    "splice",
    "stat",
    "stat64",
    "statfs",
    "statfs64",
    "statx",
    "symlink",
    "symlinkat",
    "sync",
    "sync_file_range",
    "syncfs",
    "sysinfo",
    "tee",
    "tgkill",
    "time",
    "timer_create",
    "timer_delete",
    "timer_getoverrun",
    "timer_gettime",
    "timer_gettime64",
    "timer_settime",
    "timer_settime64",
    "timerfd_create",
    "timerfd_gettime",
    "timerfd_gettime64",
    "timerfd_settime",
    "timerfd_settime64",
    "times",
    "tkill",
    "truncate",
    "truncate64",
    "ugetrlimit",
    "umask",
    "uname",
    "unlink",
    "unlinkat",
    "utime",
    "utimensat",
    "utimensat_time64",
    "utimes",
    "vfork",
    "vmsplice",
    "wait4",
    "waitid",
    "waitpid",
    "write",
    "writev",
];

/// Calls the profile denies with EPERM (by leaving them out of the allow list),
/// each with its reason. Docker's default allows the first four groups to a
/// container without capabilities; the rest it allows only with a capability
/// this sandbox never grants. specs/seccomp/README.md gives the same table.
pub const DENIED: &[(&str, &str)] = &[
    (
        "io_uring_setup",
        "io_uring runs I/O, sockets included, in kernel workers that seccomp never sees",
    ),
    (
        "io_uring_enter",
        "io_uring runs I/O, sockets included, in kernel workers that seccomp never sees",
    ),
    (
        "io_uring_register",
        "io_uring runs I/O, sockets included, in kernel workers that seccomp never sees",
    ),
    ("adjtimex", "clock setting: the clock is the host's, not namespaced"),
    (
        "clock_adjtime",
        "clock setting: the clock is the host's, not namespaced",
    ),
    (
        "clock_adjtime64",
        "clock setting: the clock is the host's, not namespaced",
    ),
    (
        "ptrace",
        "reads and writes other processes; with process_vm_* the way to a helper's memory",
    ),
    ("process_vm_readv", "reads another process's memory"),
    ("process_vm_writev", "writes another process's memory"),
    (
        "userfaultfd",
        "stalls kernel page faults at will, the usual tool for winning kernel races",
    ),
    (
        "keyctl",
        "the kernel keyring is not namespaced: keys of other users and containers",
    ),
    (
        "add_key",
        "the kernel keyring is not namespaced: keys of other users and containers",
    ),
    (
        "request_key",
        "the kernel keyring is not namespaced: keys of other users and containers",
    ),
    ("bpf", "eBPF programs and maps: large kernel attack surface"),
    (
        "perf_event_open",
        "performance counters leak kernel addresses and have a long CVE history",
    ),
    (
        "open_by_handle_at",
        "opens files by handle around the mount tree (the 'shocker' escape)",
    ),
    ("setns", "joining namespaces: never needed inside the sandbox"),
    (
        "mount",
        "the sandbox's mounts are fixed; remounting could undo read-only and masked paths",
    ),
    (
        "umount",
        "the sandbox's mounts are fixed; unmounting would reveal what they cover",
    ),
    (
        "umount2",
        "the sandbox's mounts are fixed; unmounting would reveal what they cover",
    ),
    ("pivot_root", "the sandbox's mounts are fixed"),
    ("open_tree", "new mount API: the sandbox's mounts are fixed"),
    ("open_tree_attr", "new mount API: the sandbox's mounts are fixed"),
    ("move_mount", "new mount API: the sandbox's mounts are fixed"),
    ("fsopen", "new mount API: the sandbox's mounts are fixed"),
    ("fsconfig", "new mount API: the sandbox's mounts are fixed"),
    ("fsmount", "new mount API: the sandbox's mounts are fixed"),
    ("fspick", "new mount API: the sandbox's mounts are fixed"),
    (
        "mount_setattr",
        "new mount API: could clear read-only on the sandbox's mounts",
    ),
    ("kexec_load", "replaces the running kernel"),
    ("kexec_file_load", "replaces the running kernel"),
    ("init_module", "loads kernel code"),
    ("finit_module", "loads kernel code"),
    ("delete_module", "unloads kernel code"),
    ("reboot", "reboots the host"),
    ("swapon", "host memory management"),
    ("swapoff", "host memory management"),
    ("settimeofday", "clock setting: the clock is the host's, not namespaced"),
    (
        "clock_settime",
        "clock setting: the clock is the host's, not namespaced",
    ),
    (
        "clock_settime64",
        "clock setting: the clock is the host's, not namespaced",
    ),
    ("stime", "clock setting: the clock is the host's, not namespaced"),
    ("acct", "process accounting to a host file"),
    ("lookup_dcookie", "kernel profiling interface; leaks kernel paths"),
    ("quotactl", "host disk quotas"),
    ("quotactl_fd", "host disk quotas"),
    ("nfsservctl", "removed NFS server interface"),
    ("uselib", "obsolete a.out loader with a history of kernel bugs"),
    (
        "chroot",
        "changing the root is a step of classic escapes; no agent needs it",
    ),
    ("iopl", "raw I/O port access"),
    ("ioperm", "raw I/O port access"),
    ("syslog", "the host's kernel log leaks addresses"),
    ("vhangup", "hangs up the terminal"),
    ("sethostname", "UTS settings belong to the runtime"),
    ("setdomainname", "UTS settings belong to the runtime"),
    ("fanotify_init", "whole-filesystem event monitoring"),
    ("kcmp", "compares kernel objects of other processes (an ASLR oracle)"),
    ("pidfd_getfd", "steals file descriptors from other processes"),
    ("process_madvise", "acts on another process's memory"),
    ("get_mempolicy", "NUMA placement: host resource policy"),
    ("set_mempolicy", "NUMA placement: host resource policy"),
    ("set_mempolicy_home_node", "NUMA placement: host resource policy"),
    ("mbind", "NUMA placement: host resource policy"),
    ("move_pages", "NUMA placement: host resource policy"),
    ("migrate_pages", "NUMA placement: host resource policy"),
    ("vm86", "virtual 8086 mode: obsolete, historically buggy"),
    ("vm86old", "virtual 8086 mode: obsolete, historically buggy"),
    (
        "statmount",
        "mount-tree introspection; unknown to the libseccomp 2.5 that runc and claude-shim link here",
    ),
    (
        "listmount",
        "mount-tree introspection; unknown to the libseccomp 2.5 that runc and claude-shim link here",
    ),
    ("uretprobe", "a uprobe trampoline call; no use outside traced programs"),
    ("uprobe", "a uprobe trampoline call; no use outside traced programs"),
];

/// Why each conditional rule exists, in the order `conditional_rules` emits them.
pub const CONDITIONAL: &[(&str, &str)] = &[
    ("clone", "allowed only when no CLONE_NEW* flag is set: new namespaces (a user namespace above all) reopen kernel code that otherwise needs root"),
    ("unshare", "allowed only without CLONE_NEW* flags, so unshare(CLONE_FILES) and the like still work"),
    ("clone3", "ENOSYS: its flags sit behind a pointer the filter cannot read; libc then falls back to clone"),
    ("personality", "allowed only for 0x0, 0x8, 0x20000, 0x20008 and 0xffffffff (query); ADDR_NO_RANDOMIZE and odd ABIs are refused"),
    ("socket", "allowed for every address family except AF_ALG (38) and AF_VSOCK (40)"),
    ("socketcall", "ENOSYS on every call: the i386 socket multiplexer hides socket()'s family behind a pointer, and libseccomp opens socketcall(SYS_SOCKET) unconditionally for every socket rule unless socketcall has a rule of its own"),
    ("ioctl", "allowed for every request except TIOCSTI (0x5412: typing into the terminal's input queue) and TIOCLINUX (0x541C: console selection and paste), compared on the low 32 bits the kernel reads"),
];

/// ioctl(2) requests that push input into a terminal another process reads:
/// TIOCSTI, and TIOCLINUX (whose TIOCL_PASTESEL does the same on a console).
/// The kernel refuses TIOCSTI by default since 6.2 (dev.tty.legacy_tiocsti);
/// the profile does not rely on that.
pub const IOCTL_DENIED: &[u32] = &[0x5412, 0x541C];

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

fn arg(index: usize, op: LinuxSeccompOperator, value: u64, value_two: Option<u64>) -> LinuxSeccompArg {
    let b = LinuxSeccompArgBuilder::default().index(index).op(op).value(value);
    let b = match value_two {
        Some(v) => b.value_two(v),
        None => b,
    };
    b.build()
        .expect("a seccomp argument with index, op and value is complete")
}

fn rule(names: &[&str], action: LinuxSeccompAction, errno: Option<u32>, args: Vec<LinuxSeccompArg>) -> LinuxSyscall {
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

fn allow_if(name: &str, a: LinuxSeccompArg) -> LinuxSyscall {
    rule(&[name], LinuxSeccompAction::ScmpActAllow, None, vec![a])
}

/// The rules that inspect arguments. libseccomp (and so runc and
/// libcontainer) compares each argument at most once per rule, and several
/// rules for one syscall are alternatives (OR); ranges are therefore written
/// as disjoint rules. The kernel truncates int arguments (socket's family,
/// personality) to 32 bits while the filter compares 64, so every allowed
/// range is bounded on both sides: an argument with high bits set matches none.
fn conditional_rules() -> Vec<LinuxSyscall> {
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
    rules.push(allow_if("socket", arg(0, ScmpCmpLt, AF_ALG, None)));
    for family in (AF_ALG + 1)..=AF_HIGHEST {
        if family != AF_VSOCK {
            rules.push(allow_if("socket", arg(0, ScmpCmpEq, family, None)));
        }
    }
    rules
}

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
    fn allow_list_has_no_duplicates_and_no_denied_call() {
        let mut names = ALLOWED.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALLOWED.len());
        for (n, _) in DENIED {
            assert!(!ALLOWED.contains(n), "{n} is both allowed and denied");
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
    fn tiocsti_and_tioclinux_are_refused_every_other_ioctl_allowed() {
        let ioctl = |req: u64| decide(&agent_profile(), "ioctl", [0, req, 0, 0, 0, 0]);
        for req in [0x5412u64, 0x541C] {
            assert_eq!(ioctl(req), Decision::Errno(EPERM), "{req:#x}");
            // The kernel reads the request as 32 bits: high bits change nothing.
            for high in [0x1_0000_0000u64, 0xffff_ffff_0000_0000] {
                assert_eq!(ioctl(req | high), Decision::Errno(EPERM), "{:#x}", req | high);
            }
        }
        // TCGETS, TIOCGWINSZ, TIOCSWINSZ, FIONREAD, FIOCLEX, the neighbours, and extremes.
        for req in [
            0x5401u64,
            0x5413,
            0x5414,
            0x541B,
            0x541D,
            0x5411,
            0x5451,
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
        let excluded = [0x5412u32, 0x541C];
        let cover = masked_cover(&excluded);
        let matches = |x: u64| cover.iter().filter(|(m, v)| x & m == *v).count();
        for x in (0x5400u64..0x5500).chain([0, 1, 0xffff_ffff, 0x8000_5412]) {
            let want = usize::from(!excluded.contains(&(x as u32)));
            assert_eq!(matches(x), want, "{x:#x}: exactly one rule, or none when excluded");
        }
        assert_eq!(masked_cover(&[]), [(0, 0)]);
        assert_eq!(cover.len(), 34);
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

    #[test]
    fn readme_gives_a_reason_for_every_rule() {
        let readme = include_str!("../../../specs/seccomp/README.md");
        for (n, _) in DENIED.iter().chain(CONDITIONAL) {
            assert!(
                readme.contains(&format!("`{n}`")),
                "specs/seccomp/README.md does not mention `{n}`"
            );
        }
    }
}
