//! `gc`: collect what killed runtimes left under the state root (stranded
//! containers with their processes, cgroups, mounts and state; sandbox
//! bundles; placeholders no sandbox holds). Live containers, containers handed
//! over to an engine and the shared caches are never touched (runtime/gc.rs,
//! sandbox/gc.rs). `sandbox` runs the same pass on its way out.

use anyhow::{bail, Result};

use crate::runtime::gc::Collected;
use crate::runtime::Runtime;

/// One pass over the root: containers first (their processes hold the rest).
pub fn collect(rt: &Runtime) -> Collected {
    let mut out = rt.collect_stranded();
    out.merge(crate::sandbox::gc::collect(&rt.root.join(".claude-shim")));
    out
}

pub fn gc(rt: &Runtime) -> Result<i32> {
    let out = collect(rt);
    for r in &out.removed {
        println!("removed {r}");
    }
    match out.failed.as_slice() {
        [] => Ok(0),
        [one] => bail!("collect what killed runtimes left: {one}"),
        [first, rest @ ..] => bail!("collect what killed runtimes left: {first} (and {} more)", rest.len()),
    }
}
