//! config.json generation for the config fuzz suites (issue 11), shared by the
//! in-process suite (shim/src/runtime/fuzz.rs, through `#[path]`) and the one
//! that drives the real binary (tests/fuzz_create.rs). A case is mostly a
//! config.json built from the OCI schema's own fields with valid, near-miss
//! and hostile values (NUL bytes, `..`, symlinks into /proc, cgroup roots,
//! duplicate namespaces, seccomp rules on socket/socketcall...), then a few
//! fields replaced by values of the wrong type; sometimes broken JSON or any
//! bytes. Everything is a proptest strategy, so a failing case shrinks.

use proptest::prelude::*;
use serde_json::{json, Map, Value};

/// Paths a bundle's config.json might name. The scratch rootfs of both
/// suites has `proc-link -> /proc`, `up -> ../../..`, `loop -> loop`,
/// `sys-link -> ../sys`, a `tmp` holding a file and an empty `run`.
pub fn path() -> impl Strategy<Value = String> {
    let long: &'static str = "/a".repeat(300).leak();
    prop_oneof![
        6 => prop::sample::select(vec![
            "/", "/tmp", "/run", "/data", "/proc", "/proc/sys", "/proc/self", "/proc/1/ns/net", "/sys",
            "/sys/fs/cgroup", "/dev", "/dev/null", "/dev/zero", "/dev/pts", "/dev/shm", "/proc-link", "/proc-link/sys",
            "/up", "/up/etc", "/loop", "/loop/x", "/sys-link", "/sys-link/kernel", "relative", "rootfs", "../rootfs",
            "./rootfs", "rootfs/..", "", ".", "..", "/..", "/../..", "//", "/a/../../b", "/a\u{0}b", "\u{0}", " ",
            "/etc/passwd", "/tmp/x", "/run/netns", "/proc/sysrq-trigger", "/proc/sys/kernel/core_pattern",
            "/\u{202e}x", "/é", "/a\nb", "/a\rb", long,
        ])
        .prop_map(str::to_owned),
        1 => any::<String>(),
    ]
}

/// Any other string value.
pub fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "", "sh", "/bin/sh", "true", "x\u{0}y", "\u{0}", "PATH=/bin", "A=", "=", "A", "A=\u{0}", "LD_PRELOAD=/x",
            "1", "-1", "yes", "none", "public", "allowlist", "agent", "offline", "nope", "true", "false", "{", "{}",
            "[]", "{\"allow\":[\"example.com\"]}", "{\"deny\":[\"10.0.0.0/8\"]}", "{\"allow\":[1]}",
            "https://api.example.com", "http://[::1", "\n", "a\r\nb", "é", "\u{feff}",
        ])
        .prop_map(str::to_owned),
        1 => any::<String>(),
    ]
}

/// Numbers at the edges of the fields' types.
pub fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => prop::sample::select(vec![
            json!(0), json!(1), json!(-1), json!(2), json!(38), json!(40), json!(0x5412), json!(4096),
            json!(65535), json!(65536), json!(1u64 << 31), json!(1u64 << 32), json!(i32::MAX), json!(i32::MIN),
            json!(i64::MAX), json!(i64::MIN), json!(u64::MAX), json!(1.5), json!(-0.0), json!(1e300),
        ]),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<u64>().prop_map(Value::from),
    ]
}

/// A value of any JSON type, for a field that expects another.
pub fn wrong() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(2, 6, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::vec((text(), inner), 0..3).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// A uid or gid: mostly valid, sometimes at the type's edges.
fn id() -> impl Strategy<Value = Value> {
    prop_oneof![6 => (0u32..70_000).prop_map(Value::from), 1 => number()]
}

fn opt<T: std::fmt::Debug>(p: f64, s: impl Strategy<Value = T>) -> impl Strategy<Value = Option<T>> {
    prop::option::weighted(p, s)
}

fn strings(s: impl Strategy<Value = String>, max: usize) -> impl Strategy<Value = Value> {
    prop::collection::vec(s, 0..max).prop_map(|v| json!(v))
}

fn capability() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "CAP_CHOWN",
        "CAP_KILL",
        "CAP_NET_BIND_SERVICE",
        "CAP_NET_ADMIN",
        "CAP_SYS_ADMIN",
        "CAP_NET_RAW",
        "CAP_SYS_PTRACE",
        "CAP_SYS_RESOURCE",
        "CAP_NOPE",
        "chown",
        "",
        "CAP_\u{0}",
    ])
    .prop_map(str::to_owned)
}

fn process() -> impl Strategy<Value = Value> {
    let caps = prop::collection::vec(
        (
            prop::sample::select(vec!["bounding", "effective", "permitted", "inheritable", "ambient"]),
            strings(capability(), 4),
        ),
        0..4,
    );
    let rlimits = prop::collection::vec(
        (
            prop::sample::select(vec![
                "RLIMIT_NOFILE",
                "RLIMIT_NPROC",
                "RLIMIT_CORE",
                "RLIMIT_NOPE",
                "nofile",
            ]),
            number(),
            number(),
        ),
        0..3,
    );
    (
        opt(0.3, any::<bool>()),
        (id(), id(), opt(0.2, prop::collection::vec(id(), 0..3))),
        prop_oneof![4 => strings(Just("sh".to_owned()), 2), 1 => strings(text(), 3)],
        strings(text(), 4),
        path(),
        opt(0.3, caps),
        opt(0.2, rlimits),
        opt(0.6, any::<bool>()),
        opt(0.2, number()),
    )
        .prop_map(
            |(terminal, (uid, gid, extra), args, env, cwd, caps, rlimits, nnp, oom)| {
                let mut p = json!({
                    "user": {"uid": uid, "gid": gid},
                    "args": args,
                    "env": env,
                    "cwd": cwd,
                });
                if let Some(extra) = extra {
                    p["user"]["additionalGids"] = json!(extra);
                }
                if let Some(t) = terminal {
                    p["terminal"] = json!(t);
                }
                if let Some(caps) = caps {
                    p["capabilities"] = Value::Object(caps.into_iter().map(|(k, v)| (k.to_owned(), v)).collect());
                }
                if let Some(rl) = rlimits {
                    p["rlimits"] = json!(rl
                        .into_iter()
                        .map(|(t, hard, soft)| json!({"type": t, "hard": hard, "soft": soft}))
                        .collect::<Vec<_>>());
                }
                if let Some(nnp) = nnp {
                    p["noNewPrivileges"] = json!(nnp);
                }
                if let Some(oom) = oom {
                    p["oomScoreAdj"] = oom;
                }
                p
            },
        )
}

fn mount() -> impl Strategy<Value = Value> {
    (
        path(),
        opt(
            0.8,
            prop::sample::select(vec![
                "bind", "tmpfs", "proc", "sysfs", "cgroup", "devpts", "mqueue", "overlay", "nope",
            ]),
        ),
        opt(0.7, path()),
        opt(
            0.7,
            prop::collection::vec(
                prop::sample::select(vec![
                    "rbind",
                    "bind",
                    "ro",
                    "rw",
                    "nosuid",
                    "nodev",
                    "noexec",
                    "tmpcopyup",
                    "mode=1777",
                    "size=1k",
                    "rprivate",
                    "shared",
                    "idmap",
                    "nope=\u{0}",
                    "",
                ]),
                0..4,
            ),
        ),
    )
        .prop_map(|(dest, typ, source, options)| {
            let mut m = json!({"destination": dest});
            if let Some(t) = typ {
                m["type"] = json!(t);
            }
            if let Some(s) = source {
                m["source"] = json!(s);
            }
            if let Some(o) = options {
                m["options"] = json!(o);
            }
            m
        })
}

fn namespace() -> impl Strategy<Value = Value> {
    (
        prop_oneof![
            8 => prop::sample::select(vec!["pid", "network", "mount", "ipc", "uts", "cgroup"]),
            1 => prop::sample::select(vec!["user", "time", "net", "nope", ""]),
        ],
        opt(
            0.15,
            prop::sample::select(vec![
                "/proc/self/ns/net",
                "/proc/1/ns/pid",
                "/proc/1/ns/user",
                "/nonexistent",
                "/dev/null",
                "relative",
                "",
            ]),
        ),
    )
        .prop_map(|(t, p)| {
            let mut n = json!({"type": t});
            if let Some(p) = p {
                n["path"] = json!(p);
            }
            n
        })
}

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

fn seccomp() -> impl Strategy<Value = Value> {
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

fn resources() -> impl Strategy<Value = Value> {
    (
        opt(0.5, number()),
        opt(0.4, number()),
        opt(0.3, (number(), number(), opt(0.5, text()))),
        opt(
            0.3,
            prop::collection::vec(
                (
                    any::<bool>(),
                    prop::sample::select(vec!["a", "c", "b", "x"]),
                    opt(0.7, number()),
                    text(),
                ),
                0..3,
            ),
        ),
    )
        .prop_map(|(memory, pids, cpu, devices)| {
            let mut r = json!({});
            if let Some(m) = memory {
                r["memory"] = json!({"limit": m});
            }
            if let Some(p) = pids {
                r["pids"] = json!({"limit": p});
            }
            if let Some((shares, quota, cpus)) = cpu {
                r["cpu"] = json!({"shares": shares, "quota": quota});
                if let Some(c) = cpus {
                    r["cpu"]["cpus"] = json!(c);
                }
            }
            if let Some(d) = devices {
                r["devices"] = json!(d
                    .into_iter()
                    .map(
                        |(allow, t, major, access)| json!({"allow": allow, "type": t, "major": major, "access": access})
                    )
                    .collect::<Vec<_>>());
            }
            r
        })
}

/// cgroupsPath values: the issue's `//` and `/../x`, relative, systemd's
/// slice:prefix:name, and paths below the suites' scratch parent
/// (`PARENT` is replaced by it).
fn cgroups_path() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "PARENT/c", "PARENT/c/../d", "PARENT", "PARENT/..", "PARENT/../escape", "//", "/", "/../relcg-escape",
            "relative/x", "system.slice:claude-shim:x", "PARENT/a\u{0}b", "PARENT/./c/", "PARENT//c",
            "PARENT/c/../../..", "",
        ])
        .prop_map(str::to_owned),
        1 => path(),
    ]
}

fn linux() -> impl Strategy<Value = Value> {
    let maps = || prop::collection::vec((number(), number(), number()), 0..2);
    (
        opt(0.9, prop::collection::vec(namespace(), 0..4)),
        opt(0.7, cgroups_path()),
        opt(0.3, resources()),
        opt(0.3, seccomp()),
        opt(0.3, strings(path(), 3)),
        opt(0.3, strings(path(), 3)),
        opt(0.15, (maps(), maps())),
        opt(0.15, prop::collection::vec((text(), text()), 0..2)),
    )
        .prop_map(|(ns, cg, res, sc, masked, ro, idmaps, sysctl)| {
            let mut l = json!({});
            if let Some(ns) = ns {
                l["namespaces"] = json!(ns);
            }
            if let Some(cg) = cg {
                l["cgroupsPath"] = json!(cg);
            }
            if let Some(r) = res {
                l["resources"] = r;
            }
            if let Some(s) = sc {
                l["seccomp"] = s;
            }
            if let Some(m) = masked {
                l["maskedPaths"] = m;
            }
            if let Some(r) = ro {
                l["readonlyPaths"] = r;
            }
            if let Some((u, g)) = idmaps {
                let m = |v: Vec<(Value, Value, Value)>| {
                    json!(v
                        .into_iter()
                        .map(|(c, h, s)| json!({"containerID": c, "hostID": h, "size": s}))
                        .collect::<Vec<_>>())
                };
                l["uidMappings"] = m(u);
                l["gidMappings"] = m(g);
            }
            if let Some(s) = sysctl {
                l["sysctl"] = Value::Object(s.into_iter().map(|(k, v)| (k, json!(v))).collect());
            }
            l
        })
}

fn annotations() -> impl Strategy<Value = Value> {
    prop::collection::vec(
        (
            prop::sample::select(vec![
                "run.claude-shim.network",
                "run.claude-shim.network.policy",
                "run.claude-shim.network.gateway",
                "run.claude-shim.profile",
                "run.claude-shim.resources.best-effort",
                "org.example",
                "",
            ]),
            text(),
        ),
        0..3,
    )
    .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), json!(v))).collect()))
}

/// A config.json built from the schema's fields.
pub fn structured() -> impl Strategy<Value = Value> {
    (
        prop_oneof![
            8 => prop::sample::select(vec!["1.0.2", "1.2.0", "1.0.0-rc1"]),
            1 => prop::sample::select(vec!["2.0.0", "", "0.1"]),
        ],
        opt(
            0.95,
            (
                prop_oneof![4 => Just("rootfs".to_owned()), 1 => path()],
                opt(0.5, any::<bool>()),
            ),
        ),
        opt(0.95, process()),
        opt(0.3, text()),
        opt(0.6, prop::collection::vec(mount(), 0..4)),
        opt(0.3, annotations()),
        opt(0.95, linux()),
    )
        .prop_map(|(version, root, process, hostname, mounts, annotations, linux)| {
            let mut c = Map::new();
            c.insert("ociVersion".into(), json!(version));
            if let Some((path, ro)) = root {
                let mut r = json!({"path": path});
                if let Some(ro) = ro {
                    r["readonly"] = json!(ro);
                }
                c.insert("root".into(), r);
            }
            if let Some(p) = process {
                c.insert("process".into(), p);
            }
            if let Some(h) = hostname {
                c.insert("hostname".into(), json!(h));
            }
            if let Some(m) = mounts {
                c.insert("mounts".into(), json!(m));
            }
            if let Some(a) = annotations {
                c.insert("annotations".into(), a);
            }
            if let Some(l) = linux {
                c.insert("linux".into(), l);
            }
            Value::Object(c)
        })
}

/// Replaces the `n`th node (in document order, wrapping) of `v` by `with`.
fn replace_nth(v: &mut Value, n: usize, with: Value) {
    fn count(v: &Value) -> usize {
        1 + match v {
            Value::Array(a) => a.iter().map(count).sum(),
            Value::Object(o) => o.values().map(count).sum(),
            _ => 0,
        }
    }
    fn walk(v: &mut Value, n: &mut usize, with: &mut Option<Value>) {
        if *n == 0 {
            if let Some(w) = with.take() {
                *v = w;
            }
            return;
        }
        *n -= 1;
        match v {
            Value::Array(a) => a.iter_mut().for_each(|x| walk(x, n, with)),
            Value::Object(o) => o.values_mut().for_each(|x| walk(x, n, with)),
            _ => {}
        }
    }
    let total = count(v);
    // Never the document itself: a whole wrong document is the raw case's job.
    let mut n = 1 + n % total.max(2).saturating_sub(1);
    walk(v, &mut n, &mut Some(with));
}

/// `PARENT` in cgroupsPath values stands for the suite's scratch cgroup parent.
pub fn with_parent(mut v: Value, parent: &str) -> Value {
    if let Some(cg) = v.pointer_mut("/linux/cgroupsPath") {
        if let Some(s) = cg.as_str() {
            *cg = json!(s.replace("PARENT", parent));
        }
    }
    v
}

/// One config.json case, as the bytes written to the bundle.
pub fn config_json(parent: &'static str) -> impl Strategy<Value = Vec<u8>> {
    let mutated = (
        structured(),
        prop_oneof![
            2 => Just(Vec::new()),
            1 => prop::collection::vec((any::<prop::sample::Index>(), wrong()), 1..3),
        ],
    )
        .prop_map(move |(v, edits)| {
            let mut v = with_parent(v, parent);
            for (at, with) in edits {
                let n = at.index(usize::MAX);
                replace_nth(&mut v, n, with);
            }
            serde_json::to_vec(&v).expect("a Value serializes")
        });
    prop_oneof![
        18 => mutated,
        // Broken JSON: a valid document cut short.
        1 => (structured(), any::<prop::sample::Index>()).prop_map(move |(v, at)| {
            let bytes = serde_json::to_vec(&with_parent(v, parent)).expect("a Value serializes");
            bytes[..at.index(bytes.len())].to_vec()
        }),
        1 => prop::collection::vec(any::<u8>(), 0..64),
    ]
}
