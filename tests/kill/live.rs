//! The live ones sharing the state root: a created container, a running one
//! and a running sandbox, started before the kills and checked after them.

use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

use claude_shim_e2e::engines::wait_until;
use claude_shim_e2e::*;
use serde_json::json;

use crate::census::Spared;
use crate::world::{tree, World};

pub(crate) struct Live {
    created: String,
    running: String,
    sandbox: Child,
    sandbox_work: PathBuf,
    sandbox_work_tree: BTreeSet<PathBuf>,
}

/// A created container, a running one and a running sandbox, in the same root.
pub(crate) fn start_live(w: &World) -> (Live, Spared) {
    let created = unique_id("kill-live-created");
    let running = unique_id("kill-live-running");
    let live_mark = format!("{}", 4_000_000 + std::process::id());
    let b = w.env.bundle("live", |v| {
        set_args(v, &["sleep", &live_mark]);
        v["annotations"] = json!({"run.claude-shim.network": "none"});
    });
    let b = b.to_str().unwrap().to_owned();
    for args in [
        vec!["create", "--bundle", &b, &created],
        vec!["run", "--detach", "--bundle", &b, &running],
    ] {
        let (code, err) = w.finish(&args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
    }
    let sandbox_work = w.env.dir.path().join("live-work");
    fs::create_dir_all(&sandbox_work).unwrap();
    let sandbox = w
        .command(&[
            "sandbox",
            "--policy",
            "agent",
            "--workdir",
            sandbox_work.to_str().unwrap(),
            "--",
            "sleep",
            &live_mark,
        ])
        .spawn()
        .unwrap();
    let prefix = format!("sandbox-{}-", sandbox.id());
    // Both live containers run the same command; the sandbox's is the third.
    wait_until(Duration::from_secs(20), "the live sandbox running", || {
        let n = processes()
            .iter()
            .filter(|p| p.cmdline.trim() == format!("sleep {live_mark}"))
            .count();
        (n >= 2).then_some(())
    });
    let sandbox_work_tree = tree(&sandbox_work);
    let mut spared = Spared {
        names: vec![created.clone(), running.clone(), prefix, live_mark],
        pids: vec![sandbox.id() as i32],
        state: BTreeSet::new(),
    };
    for e in fs::read_dir(w.env.root.join(".claude-shim")).unwrap().flatten() {
        spared.state.insert(e.file_name().to_string_lossy().into_owned());
    }
    let live = Live {
        created,
        running,
        sandbox,
        sandbox_work,
        sandbox_work_tree,
    };
    (live, spared)
}

/// The live ones came through; then they end as a user ends them.
pub(crate) fn check_and_end_live(w: &World, mut live: Live) -> Vec<String> {
    let mut problems = Vec::new();
    for (id, want) in [(&live.created, "created"), (&live.running, "running")] {
        let out = w.env.run(&["state", id]);
        let got = serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .map(|v| v["status"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_else(|_| "absent".into());
        if got != want {
            problems.push(format!("live container {id} is {got}, not {want}, after the kills"));
        }
    }
    if live.sandbox.try_wait().unwrap().is_some() {
        problems.push("the live sandbox ended during the kills".into());
    }
    if tree(&live.sandbox_work) != live.sandbox_work_tree {
        problems.push("the live sandbox's placeholders changed during the kills".into());
    }
    for id in [&live.created, &live.running] {
        let (code, err) = w.finish(&["delete", "--force", id]);
        if code != Some(0) {
            problems.push(format!("delete --force {id}: {err}"));
        }
    }
    // SIGTERM: the sandbox ends its command and cleans up after itself.
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(live.sandbox.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = live.sandbox.wait();
    let before: BTreeSet<PathBuf> = BTreeSet::new();
    if tree(&live.sandbox_work) != before {
        problems.push(format!(
            "the live sandbox left {:?} in its working directory",
            tree(&live.sandbox_work)
        ));
    }
    problems
}
