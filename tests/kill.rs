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

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use claude_shim_e2e::engines::{remove_cgroup_tree, wait_until};
use claude_shim_e2e::*;
use serde_json::json;

/// Kills per (verb, mode) case unless CLAUDE_SHIM_KILLS says otherwise.
const KILLS_PER_CASE: usize = 24;

/// xorshift64* (Vigna), as bench/src/workloads.rs: reproducible from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn seed() -> u64 {
    if let Ok(s) = std::env::var("CLAUDE_SHIM_KILL_SEED") {
        let s = s.trim();
        let parsed = match s.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => s.parse(),
        };
        return parsed.expect("CLAUDE_SHIM_KILL_SEED is a number (decimal or 0x hex)");
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    (nanos ^ ((std::process::id() as u64) << 32)) | 1
}

/// Written past the test harness's capture, so CI logs show it.
fn say(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Verb {
    Create,
    Run,
    Sandbox,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Mode {
    None,
    Allowlist,
    Public,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::None => "none",
            Mode::Allowlist => "allowlist",
            Mode::Public => "public",
        }
    }
}

/// The scratch world of one suite run.
struct World {
    env: Env,
    /// The sandboxes' working directory (placeholders appear here).
    work: PathBuf,
    /// What `work` held before the suite.
    work_before: BTreeSet<PathBuf>,
    /// The cgroup parent every container goes under.
    cgroup_parent: String,
    /// In every container process's command line: `sleep 0.3<digits>`.
    marker: String,
    bundles: BTreeMap<Mode, PathBuf>,
    policies: BTreeMap<Mode, String>,
}

impl World {
    fn new() -> Self {
        let env = Env::new();
        fs::create_dir_all(&env.root).unwrap();
        let work = env.dir.path().join("work");
        fs::create_dir_all(work.join(".git")).unwrap();
        fs::write(work.join(".git/config"), "[core]\n").unwrap();
        fs::write(work.join("src.txt"), "code\n").unwrap();
        let work_before = tree(&work);
        let pid = std::process::id();
        let marker = format!("0.3{:07}", pid % 10_000_000);
        let mut w = World {
            env,
            work,
            work_before,
            cgroup_parent: format!("/claude-shim-kill-{pid}"),
            marker,
            bundles: BTreeMap::new(),
            policies: BTreeMap::new(),
        };
        let public = w.env.dir.path().join("public.toml");
        fs::write(&public, "version = 1\n[network]\nmode = \"public\"\n").unwrap();
        w.policies.insert(Mode::None, "offline".into());
        w.policies.insert(Mode::Allowlist, "agent".into());
        w.policies.insert(Mode::Public, public.to_string_lossy().into_owned());
        for mode in [Mode::None, Mode::Allowlist, Mode::Public] {
            let marker = w.marker.clone();
            let b = w.env.bundle(mode.name(), |v| {
                set_args(v, &["sleep", &marker]);
                let ns = v["linux"]["namespaces"].as_array_mut().unwrap();
                if !ns.iter().any(|n| n["type"] == "network") {
                    ns.push(json!({"type": "network"}));
                }
                v["annotations"] = json!({"run.claude-shim.network": mode.name()});
            });
            w.bundles.insert(mode, b);
        }
        w
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = self.env.command(args);
        c.env("CLAUDE_SHIM_CGROUP_PARENT", &self.cgroup_parent)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    }

    /// The runtime command of one case; `id` for create and run.
    fn runtime(&self, verb: Verb, mode: Mode, id: &str, sandbox_cmd: &[&str]) -> Command {
        let bundle = self.bundles[&mode].to_str().unwrap().to_owned();
        match verb {
            Verb::Create => self.command(&["create", "--bundle", &bundle, id]),
            Verb::Run => self.command(&["run", "--bundle", &bundle, id]),
            Verb::Sandbox => {
                let mut args = vec![
                    "sandbox",
                    "--policy",
                    &self.policies[&mode],
                    "--workdir",
                    self.work.to_str().unwrap(),
                    "--",
                ];
                args.extend_from_slice(sandbox_cmd);
                self.command(&args)
            }
        }
    }

    /// Runs to the end; the exit status and stderr (through a file: a
    /// created container keeps the runtime's stdio open).
    fn finish(&self, args: &[&str]) -> (Option<i32>, String) {
        let out = output_of(self.command(args), self.env.dir.path());
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Every path under `dir` (not following symlinks).
fn tree(dir: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
            out.insert(e.path());
        }
    }
    out
}

/// Things a census must not count: the live containers and sandbox that
/// share the root on purpose.
#[derive(Default)]
struct Spared {
    /// Container ids, and the sandbox's bundle name prefix.
    names: Vec<String>,
    pids: Vec<i32>,
    /// State entries that were there before the kills (the live sandbox's lease files).
    state: BTreeSet<String>,
}

impl Spared {
    fn covers(&self, text: &str) -> bool {
        self.names.iter().any(|n| text.contains(n.as_str()))
    }
}

/// What is left, by kind.
#[derive(Default)]
struct Census {
    found: BTreeMap<&'static str, Vec<String>>,
}

const KINDS: [&str; 7] = [
    "processes",
    "cgroups",
    "mounts",
    "netns",
    "nft tables",
    "state",
    "placeholders",
];

impl Census {
    fn add(&mut self, kind: &'static str, what: String) {
        self.found.entry(kind).or_default().push(what);
    }

    fn total(&self) -> usize {
        self.found.values().map(Vec::len).sum()
    }

    fn counts(&self) -> String {
        KINDS
            .iter()
            .map(|k| format!("{k} {}", self.found.get(k).map_or(0, Vec::len)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn take(w: &World, spared: &Spared) -> Census {
        let mut c = Census::default();
        let root = w.env.root.to_string_lossy().into_owned();
        let parent = w.cgroup_parent.clone();
        let host_net = fs::metadata("/proc/self/ns/net").map(|m| m.ino()).ok();
        let mut netns = BTreeMap::new();
        for p in processes() {
            let ours = (p.cmdline.contains(&root) || p.cmdline.contains(&w.marker) || p.cgroup.contains(&parent))
                && !p.cmdline.contains("claude_shim_e2e")
                && !p.cmdline.contains("cargo");
            if !ours || spared.pids.contains(&p.pid) || spared.covers(&p.cmdline) || spared.covers(&p.cgroup) {
                continue;
            }
            c.add("processes", format!("{}: {}", p.pid, p.describe()));
            if let Ok(m) = fs::metadata(format!("/proc/{}/ns/net", p.pid)) {
                if Some(m.ino()) != host_net {
                    netns.entry(m.ino()).or_insert(p.pid);
                }
            }
        }
        for (ino, pid) in &netns {
            c.add("netns", format!("net:[{ino}] (entered by pid {pid})"));
            let out = Command::new("nsenter")
                .arg(format!("--net=/proc/{pid}/ns/net"))
                .args(["nft", "list", "tables"])
                .output();
            if let Ok(out) = out {
                for t in String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                {
                    c.add("nft tables", format!("{t} in net:[{ino}]"));
                }
            }
        }
        // claude-shim never makes a table in the host's namespace.
        if let Ok(out) = Command::new("nft").args(["list", "tables"]).output() {
            for t in String::from_utf8_lossy(&out.stdout).lines() {
                if t.contains("claude") {
                    c.add("nft tables", format!("{t} in the host's namespace"));
                }
            }
        }
        if let Ok(hierarchies) = fs::read_dir("/sys/fs/cgroup") {
            for h in hierarchies.flatten() {
                let top = h.path().join(parent.trim_start_matches('/'));
                for d in tree(&top) {
                    let name = d.file_name().unwrap_or_default().to_string_lossy().into_owned();
                    if d.is_dir() && !spared.covers(&name) {
                        c.add("cgroups", d.display().to_string());
                    }
                }
            }
        }
        let scratch = w.env.dir.path().to_string_lossy().into_owned();
        for line in fs::read_to_string("/proc/self/mountinfo").unwrap_or_default().lines() {
            if line.contains(&scratch) {
                c.add("mounts", line.to_owned());
            }
        }
        for e in fs::read_dir(&w.env.root).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name != ".claude-shim" && !spared.covers(&name) {
                c.add("state", e.path().display().to_string());
            }
        }
        for e in fs::read_dir(w.env.root.join(".claude-shim"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = e.file_name().to_string_lossy().into_owned();
            // The shared caches stay by design.
            let cache = name.starts_with("rootfs-") || name.starts_with(".env-index-");
            if !cache && !spared.covers(&name) && !spared.state.contains(&name) {
                c.add("state", e.path().display().to_string());
            }
        }
        for p in tree(&w.work).difference(&w.work_before) {
            c.add("placeholders", p.display().to_string());
        }
        c
    }

    /// Asynchronous ends (a helper stopping after its init) settle within seconds.
    fn settled(w: &World, spared: &Spared) -> Census {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let c = Census::take(w, spared);
            if c.total() == 0 || Instant::now() > deadline {
                return c;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Starts `cmd`, SIGKILLs it `after` later; true if the kill landed (it was still running).
fn kill_after(mut cmd: Command, after: Duration) -> bool {
    let mut child: Child = cmd.spawn().unwrap();
    std::thread::sleep(after);
    if child.try_wait().unwrap().is_some() {
        return false;
    }
    let _ = child.kill();
    let status = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    status.signal() == Some(libc::SIGKILL)
}

/// How long one whole command of the case takes here, so kills fall across it.
fn calibrate(w: &World, verb: Verb, mode: Mode) -> Duration {
    let id = unique_id("kill-cal");
    let started = Instant::now();
    let (code, err) = match verb {
        Verb::Create | Verb::Run => {
            let status = w.runtime(Verb::Create, mode, &id, &[]).status().unwrap();
            (status.code(), String::new())
        }
        Verb::Sandbox => {
            let out = output_of(w.runtime(verb, mode, &id, &["sleep", &w.marker]), w.env.dir.path());
            (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
        }
    };
    let took = started.elapsed();
    assert_eq!(
        code,
        Some(0),
        "{verb:?} in mode {} fails without a kill: {err}",
        mode.name()
    );
    if verb != Verb::Sandbox {
        let (code, err) = w.finish(&["delete", "--force", &id]);
        assert_eq!(code, Some(0), "delete --force {id}: {err}");
    }
    // `run` also starts the container and waits for it.
    match verb {
        Verb::Run => took + took / 2 + Duration::from_millis(300),
        _ => took,
    }
}

struct Live {
    created: String,
    running: String,
    sandbox: Child,
    sandbox_work: PathBuf,
    sandbox_work_tree: BTreeSet<PathBuf>,
}

/// A created container, a running one and a running sandbox, in the same root.
fn start_live(w: &World) -> (Live, Spared) {
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
fn check_and_end_live(w: &World, mut live: Live) -> Vec<String> {
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
