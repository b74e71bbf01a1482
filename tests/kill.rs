//! The kill suite: the runtime is SIGKILLed at random points of `create`,
//! `run` and `sandbox`, in each network mode (none, the allowlist proxy,
//! public through pasta), then the clean-up a user would do follows
//! (`delete --force` of the ids they gave; the next `sandbox`, or `gc`), and a
//! census must find nothing left: processes, cgroups, mounts, network
//! namespaces, nft tables, state, placeholders. Live containers and a live
//! sandbox sharing the state root must come through untouched.
//!
//! Everything is scratch: a state root and working directory in a temporary
//! directory, cgroups under a scratch parent (CLAUDE_SHIM_CGROUP_PARENT).
//! The kill points come from a seeded xorshift64* generator; the seed is
//! printed, and CLAUDE_SHIM_KILL_SEED replays a run. CLAUDE_SHIM_KILLS sets
//! the kills per case (default 24: 9 cases, 216 kills).

#[path = "kill/census.rs"]
mod census;
#[path = "kill/kills.rs"]
mod kills;
#[path = "kill/live.rs"]
mod live;
#[path = "kill/rng.rs"]
mod rng;
#[path = "kill/world.rs"]
mod world;

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

use claude_shim_e2e::engines::remove_cgroup_tree;
use claude_shim_e2e::*;

use crate::census::{Census, Spared, KINDS};
use crate::kills::{calibrate, kill_after};
use crate::live::{check_and_end_live, start_live};
use crate::rng::{seed, Rng};
use crate::world::{Mode, Verb, World};

/// Kills per (verb, mode) case unless CLAUDE_SHIM_KILLS says otherwise.
const KILLS_PER_CASE: usize = 24;

/// Written past the test harness's capture, so CI logs show it.
fn say(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

#[test]
fn killed_runtimes_leave_nothing_behind() {
    let seed = seed();
    let per_case: usize = std::env::var("CLAUDE_SHIM_KILLS")
        .ok()
        .map(|n| n.parse().expect("CLAUDE_SHIM_KILLS is a number"))
        .unwrap_or(KILLS_PER_CASE);
    say(&format!(
        "kill suite: seed {seed:#x} (replay with CLAUDE_SHIM_KILL_SEED={seed:#x}), {per_case} kills per case"
    ));
    let suite_started = Instant::now();
    let mut rng = Rng(seed);
    let w = World::new();
    let (live, spared) = start_live(&w);
    let mut failures: Vec<String> = Vec::new();
    let mut total_kills = 0;
    let mut totals: BTreeMap<&'static str, usize> = BTreeMap::new();

    for verb in [Verb::Create, Verb::Run, Verb::Sandbox] {
        for mode in [Mode::None, Mode::Allowlist, Mode::Public] {
            let case_started = Instant::now();
            let window = calibrate(&w, verb, mode);
            let window_us = window.as_micros() as u64;
            let (mut kills, mut attempts) = (0, 0);
            while kills < per_case && attempts < per_case * 4 {
                attempts += 1;
                let id = unique_id("kill");
                let after = Duration::from_micros(rng.below(window_us));
                let cmd = w.runtime(verb, mode, &id, &["sleep", &w.marker]);
                if kill_after(cmd, after) {
                    kills += 1;
                }
                // The user's clean-up: the ids they gave are theirs to delete.
                if verb != Verb::Sandbox {
                    let (code, err) = w.finish(&["delete", "--force", &id]);
                    if code != Some(0) {
                        failures.push(format!(
                            "{verb:?}/{}: delete --force {id} after a kill at {after:?}: {err}",
                            mode.name()
                        ));
                    }
                }
            }
            if verb == Verb::Sandbox {
                // The next sandbox collects what the killed ones left; in
                // public mode `gc` does, as a user would run it.
                let (code, err) = if mode == Mode::Public {
                    w.finish(&["gc"])
                } else {
                    w.finish(&[
                        "sandbox",
                        "--policy",
                        &w.policies[&mode],
                        "--workdir",
                        w.work.to_str().unwrap(),
                        "--",
                        "true",
                    ])
                };
                if code != Some(0) {
                    failures.push(format!("{verb:?}/{}: the clean-up run failed: {err}", mode.name()));
                }
            }
            total_kills += kills;
            let census = Census::settled(&w, &spared);
            for k in KINDS {
                *totals.entry(k).or_default() += census.found.get(k).map_or(0, Vec::len);
            }
            say(&format!(
                "kill suite: {verb:?} mode {}: {kills} kills ({attempts} tries, window {} ms) in {:.1} s; left: {}",
                mode.name(),
                window.as_millis(),
                case_started.elapsed().as_secs_f64(),
                census.counts()
            ));
            for (kind, items) in &census.found {
                for i in items {
                    failures.push(format!("{verb:?}/{}: {kind}: {i}", mode.name()));
                }
            }
            // The next case starts from nothing.
            if census.total() > 0 {
                let _ = w.finish(&["gc"]);
            }
        }
    }

    failures.extend(check_and_end_live(&w, live));
    let end = Census::settled(&w, &Spared::default());
    say(&format!(
        "kill suite: {total_kills} kills in {:.1} s, seed {seed:#x}; left over all cases: {}; after the live ones ended: {}",
        suite_started.elapsed().as_secs_f64(),
        KINDS
            .iter()
            .map(|k| format!("{k} {}", totals.get(k).copied().unwrap_or(0)))
            .collect::<Vec<_>>()
            .join(", "),
        end.counts()
    ));
    for (kind, items) in &end.found {
        for i in items {
            failures.push(format!("at the end: {kind}: {i}"));
        }
    }
    let left = remove_cgroup_tree(&w.cgroup_parent);
    failures.extend(left);
    assert!(
        total_kills >= per_case * 9 * 3 / 4,
        "only {total_kills} kills landed (seed {seed:#x})"
    );
    assert!(
        failures.is_empty(),
        "kill suite (seed {seed:#x}, replay with CLAUDE_SHIM_KILL_SEED={seed:#x}) found {} problem(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
