//! Every probe the probe program knows, in report order, with the arguments
//! that make each call harmless, and the lookups by name and by syscall.

use super::types::{Abi, Method, SyscallProbe};

/// A pointer no process maps (below vm.mmap_min_addr): the kernel faults on
/// it with EFAULT instead of reading anything.
const BAD: u64 = 1;
/// fd -1, as the kernel reads an int argument.
const NO_FD: u64 = u32::MAX as u64;
/// Every bit of an int flags argument: always rejected with EINVAL.
const ALL_FLAGS: u64 = u32::MAX as u64;

const fn probe(name: &'static str, syscall: &'static str, nr: i64, args: [u64; 6]) -> SyscallProbe {
    SyscallProbe {
        name,
        syscall,
        nr,
        method: Method::Attributed,
        abi: Abi::X86_64,
        args,
    }
}

/// A probe through the i386 entry point; `nr` is the i386 number.
const fn i386(name: &'static str, syscall: &'static str, nr: i64, args: [u64; 6]) -> SyscallProbe {
    SyscallProbe {
        name,
        syscall,
        nr,
        method: Method::Attributed,
        abi: Abi::I386,
        args,
    }
}

const fn direct(name: &'static str, syscall: &'static str, nr: i64, args: [u64; 6]) -> SyscallProbe {
    SyscallProbe {
        name,
        syscall,
        nr,
        method: Method::Direct,
        abi: Abi::X86_64,
        args,
    }
}

const NEWNS: u64 = libc::CLONE_NEWNS as u64;
const NEWUTS: u64 = libc::CLONE_NEWUTS as u64;
const NEWIPC: u64 = libc::CLONE_NEWIPC as u64;
const NEWUSER: u64 = libc::CLONE_NEWUSER as u64;
const NEWPID: u64 = libc::CLONE_NEWPID as u64;
const NEWNET: u64 = libc::CLONE_NEWNET as u64;
const NEWCGROUP: u64 = libc::CLONE_NEWCGROUP as u64;
/// CLONE_NEWTIME: unshare(2) only (clone(2) uses this bit for the exit signal).
const NEWTIME: u64 = 0x80;
const SIGCHLD: u64 = libc::SIGCHLD as u64;
/// A flag bit the kernel does not know: a filter that compares the flags
/// for equality instead of masking them lets it through (PROBES.md 2).
const HIGH_BIT: u64 = 1 << 40;
/// personality(2): ADDR_NO_RANDOMIZE switches off ASLR for the next execve.
const ADDR_NO_RANDOMIZE: u64 = 0x0040000;
/// What glibc's pthread_create passes to clone: CLONE_VM|CLONE_FS|CLONE_FILES|
/// CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM|CLONE_SETTLS|CLONE_PARENT_SETTID|
/// CLONE_CHILD_CLEARTID (only used to evaluate a profile; the probe spawns a
/// real thread).
const GLIBC_THREAD_FLAGS: u64 = 0x003d_0f00;
/// sizeof(struct clone_args) of Linux 5.5 (CLONE_ARGS_SIZE_VER1).
const CLONE_ARGS_SIZE: u64 = 80;
/// ioctl requests that put bytes into a terminal's input queue.
const TIOCSTI: u64 = libc::TIOCSTI;
const TIOCLINUX: u64 = libc::TIOCLINUX;
/// The ioctl request that attaches a line discipline (and may load its module).
const TIOCSETD: u64 = libc::TIOCSETD;
/// modify_ldt(2)'s write function: with a byte count other than
/// sizeof(struct user_desc) the kernel answers EINVAL before reading anything.
const LDT_WRITE: u64 = 1;
/// socket(AF_NETLINK, SOCK_RAW, protocol): what `ip` opens, and what hears
/// the host's uevents.
const NETLINK_ROUTE: [u64; 6] = [libc::AF_NETLINK as u64, libc::SOCK_RAW as u64, 0, 0, 0, 0];
const NETLINK_UEVENT: [u64; 6] = [
    libc::AF_NETLINK as u64,
    libc::SOCK_RAW as u64,
    libc::NETLINK_KOBJECT_UEVENT as u64,
    0,
    0,
    0,
];
/// socketcall(2)'s call number for socket(2).
const SYS_SOCKET: u64 = 1;
/// i386 syscall numbers (arch/x86/entry/syscalls/syscall_32.tbl).
const I386_MOUNT: i64 = 21;
const I386_IOCTL: i64 = 54;
const I386_MODIFY_LDT: i64 = 123;
const I386_SOCKETCALL: i64 = 102;
const I386_CLONE: i64 = 120;
const I386_UNSHARE: i64 = 310;
const I386_SOCKET: i64 = 359;

/// Every probe the probe program knows, in report order.
pub const CATALOG: &[SyscallProbe] = &[
    // Mount API (PROBES.md 6).
    probe("mount", "mount", libc::SYS_mount, [BAD, BAD, BAD, 0, BAD, 0]),
    probe("umount2", "umount2", libc::SYS_umount2, [BAD, ALL_FLAGS, 0, 0, 0, 0]),
    probe("pivot_root", "pivot_root", libc::SYS_pivot_root, [BAD, BAD, 0, 0, 0, 0]),
    probe(
        "open_tree",
        "open_tree",
        libc::SYS_open_tree,
        [NO_FD, BAD, ALL_FLAGS, 0, 0, 0],
    ),
    probe(
        "move_mount",
        "move_mount",
        libc::SYS_move_mount,
        [NO_FD, BAD, NO_FD, BAD, ALL_FLAGS, 0],
    ),
    probe("fsopen", "fsopen", libc::SYS_fsopen, [BAD, ALL_FLAGS, 0, 0, 0, 0]),
    probe("fsconfig", "fsconfig", libc::SYS_fsconfig, [NO_FD, 0, BAD, BAD, 0, 0]),
    probe("fsmount", "fsmount", libc::SYS_fsmount, [NO_FD, ALL_FLAGS, 0, 0, 0, 0]),
    probe("fspick", "fspick", libc::SYS_fspick, [NO_FD, BAD, ALL_FLAGS, 0, 0, 0]),
    probe(
        "mount_setattr",
        "mount_setattr",
        libc::SYS_mount_setattr,
        [NO_FD, BAD, ALL_FLAGS, BAD, 0, 0],
    ),
    // Namespaces (PROBES.md 1-5).
    probe("setns", "setns", libc::SYS_setns, [NO_FD, 0, 0, 0, 0, 0]),
    probe(
        "unshare(CLONE_NEWUSER)",
        "unshare",
        libc::SYS_unshare,
        [NEWUSER, 0, 0, 0, 0, 0],
    ),
    probe(
        "unshare(CLONE_NEWUSER|1<<40)",
        "unshare",
        libc::SYS_unshare,
        [NEWUSER | HIGH_BIT, 0, 0, 0, 0, 0],
    ),
    probe(
        "unshare(CLONE_NEWNS)",
        "unshare",
        libc::SYS_unshare,
        [NEWNS, 0, 0, 0, 0, 0],
    ),
    probe(
        "unshare(CLONE_NEWPID)",
        "unshare",
        libc::SYS_unshare,
        [NEWPID, 0, 0, 0, 0, 0],
    ),
    probe(
        "unshare(CLONE_NEWNET)",
        "unshare",
        libc::SYS_unshare,
        [NEWNET, 0, 0, 0, 0, 0],
    ),
    probe(
        "unshare(CLONE_NEWUTS)",
        "unshare",
        libc::SYS_unshare,
        [NEWUTS, 0, 0, 0, 0, 0],
    ),
    probe(
        "unshare(CLONE_NEWIPC)",
        "unshare",
        libc::SYS_unshare,
        [NEWIPC, 0, 0, 0, 0, 0],
    ),
    probe(
        "unshare(CLONE_NEWCGROUP)",
        "unshare",
        libc::SYS_unshare,
        [NEWCGROUP, 0, 0, 0, 0, 0],
    ),
    probe(
        "unshare(CLONE_NEWTIME)",
        "unshare",
        libc::SYS_unshare,
        [NEWTIME, 0, 0, 0, 0, 0],
    ),
    probe(
        "clone(CLONE_NEWUSER)",
        "clone",
        libc::SYS_clone,
        [NEWUSER | SIGCHLD, 0, 0, 0, 0, 0],
    ),
    probe(
        "clone(CLONE_NEWNS)",
        "clone",
        libc::SYS_clone,
        [NEWNS | SIGCHLD, 0, 0, 0, 0, 0],
    ),
    probe(
        "clone(CLONE_NEWPID)",
        "clone",
        libc::SYS_clone,
        [NEWPID | SIGCHLD, 0, 0, 0, 0, 0],
    ),
    probe(
        "clone(CLONE_NEWNET)",
        "clone",
        libc::SYS_clone,
        [NEWNET | SIGCHLD, 0, 0, 0, 0, 0],
    ),
    probe(
        "clone(CLONE_NEWUTS)",
        "clone",
        libc::SYS_clone,
        [NEWUTS | SIGCHLD, 0, 0, 0, 0, 0],
    ),
    probe(
        "clone(CLONE_NEWIPC)",
        "clone",
        libc::SYS_clone,
        [NEWIPC | SIGCHLD, 0, 0, 0, 0, 0],
    ),
    probe(
        "clone(CLONE_NEWCGROUP)",
        "clone",
        libc::SYS_clone,
        [NEWCGROUP | SIGCHLD, 0, 0, 0, 0, 0],
    ),
    probe("clone3", "clone3", libc::SYS_clone3, [BAD, CLONE_ARGS_SIZE, 0, 0, 0, 0]),
    direct("fork", "clone", libc::SYS_clone, [SIGCHLD, 0, 0, 0, 0, 0]),
    // The filter sees a thread as glibc's clone (after clone3's ENOSYS).
    direct("thread", "clone", libc::SYS_clone, [GLIBC_THREAD_FLAGS, 0, 0, 0, 0, 0]),
    // io_uring (PROBES.md 8).
    probe(
        "io_uring_setup",
        "io_uring_setup",
        libc::SYS_io_uring_setup,
        [0, BAD, 0, 0, 0, 0],
    ),
    probe(
        "io_uring_enter",
        "io_uring_enter",
        libc::SYS_io_uring_enter,
        [NO_FD, 0, 0, 0, 0, 0],
    ),
    probe(
        "io_uring_register",
        "io_uring_register",
        libc::SYS_io_uring_register,
        [NO_FD, 0, 0, 0, 0, 0],
    ),
    // Socket families (PROBES.md 9, 22).
    probe(
        "socket(AF_VSOCK)",
        "socket",
        libc::SYS_socket,
        [libc::AF_VSOCK as u64, libc::SOCK_STREAM as u64, 0, 0, 0, 0],
    ),
    probe(
        "socket(AF_ALG)",
        "socket",
        libc::SYS_socket,
        [libc::AF_ALG as u64, libc::SOCK_SEQPACKET as u64, 0, 0, 0, 0],
    ),
    // Netlink only for route (issue 24): `ip` and glibc keep working, the
    // host's uevents and the other protocols are out of reach.
    probe(
        "socket(AF_NETLINK,NETLINK_ROUTE)",
        "socket",
        libc::SYS_socket,
        NETLINK_ROUTE,
    ),
    probe(
        "socket(AF_NETLINK,NETLINK_KOBJECT_UEVENT)",
        "socket",
        libc::SYS_socket,
        NETLINK_UEVENT,
    ),
    probe(
        "socket(AF_PACKET)",
        "socket",
        libc::SYS_socket,
        [libc::AF_PACKET as u64, libc::SOCK_RAW as u64, 0, 0, 0, 0],
    ),
    probe(
        "socket(AF_INET,SOCK_RAW)",
        "socket",
        libc::SYS_socket,
        [
            libc::AF_INET as u64,
            libc::SOCK_RAW as u64,
            libc::IPPROTO_ICMP as u64,
            0,
            0,
            0,
        ],
    ),
    direct(
        "socket(AF_UNIX)",
        "socket",
        libc::SYS_socket,
        [libc::AF_UNIX as u64, libc::SOCK_STREAM as u64, 0, 0, 0, 0],
    ),
    // Keyrings (PROBES.md 10).
    probe("keyctl", "keyctl", libc::SYS_keyctl, [i32::MAX as u64, 0, 0, 0, 0, 0]),
    probe("add_key", "add_key", libc::SYS_add_key, [BAD, BAD, BAD, 0, 0, 0]),
    probe(
        "request_key",
        "request_key",
        libc::SYS_request_key,
        [BAD, BAD, BAD, 0, 0, 0],
    ),
    // Kernel attack surface (PROBES.md 11-13).
    probe(
        "userfaultfd",
        "userfaultfd",
        libc::SYS_userfaultfd,
        [ALL_FLAGS, 0, 0, 0, 0, 0],
    ),
    probe("bpf", "bpf", libc::SYS_bpf, [i32::MAX as u64, BAD, 0, 0, 0, 0]),
    probe(
        "perf_event_open",
        "perf_event_open",
        libc::SYS_perf_event_open,
        [BAD, 0, NO_FD, NO_FD, 0, 0],
    ),
    probe(
        "open_by_handle_at",
        "open_by_handle_at",
        libc::SYS_open_by_handle_at,
        [NO_FD, BAD, 0, 0, 0, 0],
    ),
    probe(
        "name_to_handle_at",
        "name_to_handle_at",
        libc::SYS_name_to_handle_at,
        [NO_FD, BAD, BAD, BAD, 0, 0],
    ),
    // Other processes (PROBES.md 14).
    probe(
        "ptrace(PTRACE_TRACEME)",
        "ptrace",
        libc::SYS_ptrace,
        [libc::PTRACE_TRACEME as u64, 0, 0, 0, 0, 0],
    ),
    probe(
        "process_vm_readv",
        "process_vm_readv",
        libc::SYS_process_vm_readv,
        [0, BAD, 1, BAD, 1, 0],
    ),
    probe(
        "process_vm_writev",
        "process_vm_writev",
        libc::SYS_process_vm_writev,
        [0, BAD, 1, BAD, 1, 0],
    ),
    // personality (PROBES.md 15): switching ASLR off is refused, the query is not.
    probe(
        "personality(ADDR_NO_RANDOMIZE)",
        "personality",
        libc::SYS_personality,
        [ADDR_NO_RANDOMIZE, 0, 0, 0, 0, 0],
    ),
    direct(
        "personality(0xffffffff)",
        "personality",
        libc::SYS_personality,
        [0xffff_ffff, 0, 0, 0, 0, 0],
    ),
    // The machine itself (PROBES.md 26).
    probe(
        "init_module",
        "init_module",
        libc::SYS_init_module,
        [BAD, 0, BAD, 0, 0, 0],
    ),
    probe(
        "finit_module",
        "finit_module",
        libc::SYS_finit_module,
        [NO_FD, BAD, 0, 0, 0, 0],
    ),
    probe(
        "delete_module",
        "delete_module",
        libc::SYS_delete_module,
        [BAD, 0, 0, 0, 0, 0],
    ),
    probe(
        "kexec_load",
        "kexec_load",
        libc::SYS_kexec_load,
        [0, u32::MAX as u64, BAD, 0, 0, 0],
    ),
    probe(
        "kexec_file_load",
        "kexec_file_load",
        libc::SYS_kexec_file_load,
        [NO_FD, NO_FD, 0, BAD, ALL_FLAGS, 0],
    ),
    // Magic 0 is invalid: the kernel answers EINVAL (or EPERM without CAP_SYS_BOOT).
    probe("reboot", "reboot", libc::SYS_reboot, [0, 0, 0, BAD, 0, 0]),
    probe("swapon", "swapon", libc::SYS_swapon, [BAD, 0, 0, 0, 0, 0]),
    probe("swapoff", "swapoff", libc::SYS_swapoff, [BAD, 0, 0, 0, 0, 0]),
    probe(
        "clock_settime",
        "clock_settime",
        libc::SYS_clock_settime,
        [libc::CLOCK_REALTIME as u64, BAD, 0, 0, 0, 0],
    ),
    probe(
        "settimeofday",
        "settimeofday",
        libc::SYS_settimeofday,
        [BAD, BAD, 0, 0, 0, 0],
    ),
    // The mode (ADJ_SETOFFSET...) sits behind the pointer, out of a filter's
    // reach: the rule covers the whole call.
    probe("adjtimex", "adjtimex", libc::SYS_adjtimex, [BAD, 0, 0, 0, 0, 0]),
    probe(
        "clock_adjtime",
        "clock_adjtime",
        libc::SYS_clock_adjtime,
        [libc::CLOCK_REALTIME as u64, BAD, 0, 0, 0, 0],
    ),
    probe("acct", "acct", libc::SYS_acct, [BAD, 0, 0, 0, 0, 0]),
    probe("syslog", "syslog", libc::SYS_syslog, [i32::MAX as u64, 0, 0, 0, 0, 0]),
    probe("iopl", "iopl", libc::SYS_iopl, [4, 0, 0, 0, 0, 0]),
    // Custom x86 segments, the setup of kernel exploits (issue 24).
    probe(
        "modify_ldt",
        "modify_ldt",
        libc::SYS_modify_ldt,
        [LDT_WRITE, BAD, 0, 0, 0, 0],
    ),
    probe("ioperm", "ioperm", libc::SYS_ioperm, [0, u32::MAX as u64, 1, 0, 0, 0]),
    // Typing into a terminal (PROBES.md, issue 11): the request is refused
    // whatever the fd, so fd -1 shows the rule without a terminal.
    probe(
        "ioctl(TIOCSTI)",
        "ioctl",
        libc::SYS_ioctl,
        [NO_FD, TIOCSTI, BAD, 0, 0, 0],
    ),
    probe(
        "ioctl(TIOCLINUX)",
        "ioctl",
        libc::SYS_ioctl,
        [NO_FD, TIOCLINUX, BAD, 0, 0, 0],
    ),
    // Attaching a line discipline (issue 24), refused whatever the fd.
    probe(
        "ioctl(TIOCSETD)",
        "ioctl",
        libc::SYS_ioctl,
        [NO_FD, TIOCSETD, BAD, 0, 0, 0],
    ),
    // The same rules through the 32-bit entry point (issue 11), where socket
    // calls can also arrive multiplexed through socketcall, with the family
    // behind a pointer.
    i386(
        "socket(AF_VSOCK) via int 0x80",
        "socket",
        I386_SOCKET,
        [libc::AF_VSOCK as u64, libc::SOCK_STREAM as u64, 0, 0, 0, 0],
    ),
    i386(
        "socketcall(SYS_SOCKET) via int 0x80",
        "socketcall",
        I386_SOCKETCALL,
        [SYS_SOCKET, BAD, 0, 0, 0, 0],
    ),
    i386(
        "unshare(CLONE_NEWUSER) via int 0x80",
        "unshare",
        I386_UNSHARE,
        [NEWUSER, 0, 0, 0, 0, 0],
    ),
    i386(
        "clone(CLONE_NEWUSER) via int 0x80",
        "clone",
        I386_CLONE,
        [NEWUSER | SIGCHLD, 0, 0, 0, 0, 0],
    ),
    i386("mount via int 0x80", "mount", I386_MOUNT, [BAD, BAD, BAD, 0, BAD, 0]),
    i386(
        "ioctl(TIOCSTI) via int 0x80",
        "ioctl",
        I386_IOCTL,
        [NO_FD, TIOCSTI, BAD, 0, 0, 0],
    ),
    i386(
        "ioctl(TIOCSETD) via int 0x80",
        "ioctl",
        I386_IOCTL,
        [NO_FD, TIOCSETD, BAD, 0, 0, 0],
    ),
    i386(
        "modify_ldt via int 0x80",
        "modify_ldt",
        I386_MODIFY_LDT,
        [LDT_WRITE, BAD, 0, 0, 0, 0],
    ),
    i386(
        "socket(AF_NETLINK,NETLINK_KOBJECT_UEVENT) via int 0x80",
        "socket",
        I386_SOCKET,
        NETLINK_UEVENT,
    ),
];

pub fn find(name: &str) -> Option<&'static SyscallProbe> {
    CATALOG.iter().find(|p| p.name == name)
}

/// The probes that exercise the seccomp rule for `syscall`.
#[cfg(test)]
pub fn probes_for(syscall: &str) -> impl Iterator<Item = &'static SyscallProbe> + '_ {
    CATALOG.iter().filter(move |p| p.syscall == syscall)
}
