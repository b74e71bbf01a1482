//! `linux.seccomp`: actions, syscall names (socket and socketcall among them),
//! argument rules, architectures and flags.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::values::{number, opt};

fn seccomp_action() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "SCMP_ACT_ALLOW",
        "SCMP_ACT_ERRNO",
        "SCMP_ACT_KILL",
        "SCMP_ACT_KILL_PROCESS",
        "SCMP_ACT_TRAP",
        "SCMP_ACT_TRACE",
        "SCMP_ACT_LOG",
        "SCMP_ACT_NOTIFY",
        "SCMP_ACT_NOPE",
        "",
    ])
    .prop_map(str::to_owned)
}

fn syscall_name() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "socket",
        "socketcall",
        "socketpair",
        "connect",
        "clone",
        "clone3",
        "unshare",
        "ioctl",
        "personality",
        "read",
        "write",
        "exit_group",
        "execve",
        "mount",
        "setns",
        "keyctl",
        "mountt",
        "",
        "x\u{0}",
        "SOCKET",
    ])
    .prop_map(str::to_owned)
}

pub(super) fn seccomp() -> impl Strategy<Value = Value> {
    let arg = (
        0u32..8,
        number(),
        opt(0.6, number()),
        prop::sample::select(vec![
            "SCMP_CMP_NE",
            "SCMP_CMP_LT",
            "SCMP_CMP_LE",
            "SCMP_CMP_EQ",
            "SCMP_CMP_GE",
            "SCMP_CMP_GT",
            "SCMP_CMP_MASKED_EQ",
            "SCMP_CMP_NOPE",
        ]),
    )
        .prop_map(|(index, value, value_two, op)| {
            let mut a = json!({"index": index, "value": value, "op": op});
            if let Some(v2) = value_two {
                a["valueTwo"] = v2;
            }
            a
        });
    let rule = (
        prop::collection::vec(syscall_name(), 0..4),
        seccomp_action(),
        opt(0.3, number()),
        opt(0.5, prop::collection::vec(arg, 0..3)),
    )
        .prop_map(|(names, action, errno, args)| {
            let mut r = json!({"names": names, "action": action});
            if let Some(e) = errno {
                r["errnoRet"] = e;
            }
            if let Some(a) = args {
                r["args"] = json!(a);
            }
            r
        });
    (
        seccomp_action(),
        opt(0.3, number()),
        opt(
            0.7,
            prop::collection::vec(
                prop::sample::select(vec![
                    "SCMP_ARCH_X86_64",
                    "SCMP_ARCH_X86",
                    "SCMP_ARCH_X32",
                    "SCMP_ARCH_AARCH64",
                    "SCMP_ARCH_NOPE",
                ]),
                0..4,
            ),
        ),
        opt(
            0.2,
            prop::collection::vec(
                prop::sample::select(vec![
                    "SECCOMP_FILTER_FLAG_LOG",
                    "SECCOMP_FILTER_FLAG_SPEC_ALLOW",
                    "SECCOMP_FILTER_FLAG_TSYNC",
                    "NOPE",
                ]),
                0..2,
            ),
        ),
        prop::collection::vec(rule, 0..5),
    )
        .prop_map(|(default, errno, arches, flags, rules)| {
            let mut s = json!({"defaultAction": default, "syscalls": rules});
            if let Some(e) = errno {
                s["defaultErrnoRet"] = e;
            }
            if let Some(a) = arches {
                s["architectures"] = json!(a);
            }
            if let Some(f) = flags {
                s["flags"] = json!(f);
            }
            s
        })
}
