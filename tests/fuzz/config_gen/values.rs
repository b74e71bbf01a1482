//! The leaves of a generated config.json: paths, strings, numbers, ids and
//! values of the wrong type, with the optional and list combinators every
//! section uses. The bottom of the generator.

use proptest::prelude::*;
use serde_json::{json, Value};

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
pub(super) fn id() -> impl Strategy<Value = Value> {
    prop_oneof![6 => (0u32..70_000).prop_map(Value::from), 1 => number()]
}

pub(super) fn opt<T: std::fmt::Debug>(p: f64, s: impl Strategy<Value = T>) -> impl Strategy<Value = Option<T>> {
    prop::option::weighted(p, s)
}

pub(super) fn strings(s: impl Strategy<Value = String>, max: usize) -> impl Strategy<Value = Value> {
    prop::collection::vec(s, 0..max).prop_map(|v| json!(v))
}
