//! The calls the profile denies, each with its reason: the table
//! specs/seccomp/README.md gives, kept out of the allow list (`allowed`).

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
        "modify_ldt",
        "custom x86 segments (16-bit code for Wine and DOS emulators): the setup of kernel exploits (CVE-2015-3290, CVE-2017-17053)",
    ),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seccomp::CONDITIONAL;

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
