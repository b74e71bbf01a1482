//! The `process` section: user, args, env, cwd, capabilities, rlimits,
//! no_new_privs and the OOM score.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::values::{id, number, opt, path, strings, text};

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

pub(super) fn process() -> impl Strategy<Value = Value> {
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
