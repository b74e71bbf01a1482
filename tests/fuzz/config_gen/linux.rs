//! The `linux` section: namespaces, cgroupsPath, resources, seccomp, masked
//! and read-only paths, id mappings and sysctls.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::seccomp::seccomp;
use super::values::{number, opt, path, strings, text};

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

pub(super) fn linux() -> impl Strategy<Value = Value> {
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
