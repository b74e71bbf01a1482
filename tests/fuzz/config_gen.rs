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

use self::linux::linux;
use self::mounts::mount;
use self::process::process;
use self::values::{opt, path, text, wrong};

// Children by #[path], relative to this file: it is compiled from the shim
// (shim/src/runtime/fuzz.rs) through a #[path] of its own.
#[path = "config_gen/linux.rs"]
mod linux;
#[path = "config_gen/mounts.rs"]
mod mounts;
#[path = "config_gen/process.rs"]
mod process;
#[path = "config_gen/seccomp.rs"]
mod seccomp;
#[path = "config_gen/values.rs"]
mod values;

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
