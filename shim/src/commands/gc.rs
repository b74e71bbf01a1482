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

/// Review runs are the user's to apply or discard, never collected: said.
fn kept_review_runs() {
    let Ok(runs) = crate::sandbox::review::store::list() else {
        return;
    };
    let runs: Vec<_> = runs.into_iter().flatten().collect();
    if let Some(oldest) = runs.iter().map(|r| r.time.as_str()).min() {
        println!(
            "kept {} review run{} (the oldest began {oldest}): not collected; claude-shim changes --list, claude-shim discard RUN",
            runs.len(),
            if runs.len() == 1 { "" } else { "s" }
        );
    }
}

pub fn gc(rt: &Runtime) -> Result<i32> {
    let out = collect(rt);
    for r in &out.removed {
        println!("removed {r}");
    }
    kept_review_runs();
    match out.failed.as_slice() {
        [] => Ok(0),
        [one] => bail!("collect what killed runtimes left: {one}"),
        [first, rest @ ..] => bail!("collect what killed runtimes left: {first} (and {} more)", rest.len()),
    }
}
