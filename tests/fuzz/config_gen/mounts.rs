//! One entry of `mounts`: destination, type, source and options.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::values::{opt, path};

pub(super) fn mount() -> impl Strategy<Value = Value> {
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
