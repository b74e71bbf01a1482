//! What the probe must see under the agent profile: the syscall table's
//! verdicts and the host's namespaces to differ from. The bottom of the suite.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;

use claude_shim_e2e::*;
use serde_json::{json, Value};

/// Probes the agent profile must refuse with EPERM (specs/seccomp/README.md,
/// "Denied calls"), named as in verify's catalog.
const DENIED: &[&str] = &[
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
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "keyctl",
    "add_key",
    "request_key",
    "userfaultfd",
    "bpf",
    "perf_event_open",
    "open_by_handle_at",
    "ptrace(PTRACE_TRACEME)",
    "process_vm_readv",
    "process_vm_writev",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "clock_settime",
    "settimeofday",
    "adjtimex",
    "clock_adjtime",
    "acct",
    "syslog",
    "iopl",
    "ioperm",
    "modify_ldt",
];

/// The sandbox's seccomp profile, as the bundle crate generates it.
pub(crate) fn agent_profile() -> Value {
    let path = workspace().join("specs/seccomp/agent.json");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// What the sandbox must show for each probe of the syscall table.
pub(crate) fn syscall_expectations() -> BTreeMap<String, Value> {
    let blocked = json!({"blocked": ["EPERM"]});
    let mut m = BTreeMap::new();
    for name in DENIED {
        m.insert((*name).to_owned(), blocked.clone());
    }
    for flag in ["NEWUSER", "NEWNS", "NEWPID", "NEWNET", "NEWUTS", "NEWIPC", "NEWCGROUP"] {
        m.insert(format!("unshare(CLONE_{flag})"), blocked.clone());
        m.insert(format!("clone(CLONE_{flag})"), blocked.clone());
    }
    m.insert("unshare(CLONE_NEWTIME)".into(), blocked.clone());
    m.insert("unshare(CLONE_NEWUSER|1<<40)".into(), blocked.clone());
    m.insert("clone3".into(), json!({"blocked": ["ENOSYS"]}));
    m.insert("socket(AF_VSOCK)".into(), blocked.clone());
    m.insert("socket(AF_ALG)".into(), blocked.clone());
    // Netlink only for route; no line discipline attached (issue 24).
    m.insert("socket(AF_NETLINK,NETLINK_KOBJECT_UEVENT)".into(), blocked.clone());
    m.insert("ioctl(TIOCSETD)".into(), blocked.clone());
    m.insert("personality(ADDR_NO_RANDOMIZE)".into(), blocked);
    for allowed in [
        "fork",
        "thread",
        "socket(AF_UNIX)",
        "socket(AF_NETLINK,NETLINK_ROUTE)",
        "personality(0xffffffff)",
    ] {
        m.insert(allowed.into(), json!("allowed"));
    }
    // Raw sockets get through the filter and meet the kernel's CAP_NET_RAW
    // check (PROBES.md 22): refused either way.
    for raw in ["socket(AF_PACKET)", "socket(AF_INET,SOCK_RAW)"] {
        m.insert(raw.into(), json!({"refused": ["EPERM"]}));
    }
    m
}

pub(crate) fn ns_inode(kind: &str) -> u64 {
    fs::metadata(format!("/proc/self/ns/{kind}")).unwrap().ino()
}
