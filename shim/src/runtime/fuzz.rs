//! The config.json fuzz suite (issue 11), in process: 20,000 generated
//! config.json files per run go through what `create` does before it claims
//! the id and clones (`Runtime::check_bundle`: bounded read, serde into
//! oci-spec, validate, rootfs and mount destinations, the guards, cgroupsPath
//! confinement), then the admin policy (`admin::apply_policy`, with the agent
//! policy as the admin's, or none), the network plan (`network::prepare`) and
//! the seccomp compiler. 0 panics, every error one line as the binary prints
//! it, nothing written, and no hang (a watchdog aborts on one, printing the
//! case). Cases that failed once live in tests/fuzz/regressions/config/ and are
//! replayed first. tests/fuzz_create.rs drives the real binary with the same
//! generator.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use claude_shim_bundle::Policy;
use oci_spec::runtime::Spec;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

use super::{cgroup, Runtime};
use crate::state::Meta;

#[path = "../../../tests/fuzz/config_gen.rs"]
mod config_gen;

const CASES: u32 = 20_000;
/// A case that takes longer than this is a hang.
const HANG: Duration = Duration::from_secs(20);
/// The scratch cgroup parent every cgroupsPath must stay below (never created).
const PARENT: &str = "/claude-shim-fuzz-parent";

/// A bundle with a rootfs that holds the symlinks the generator names.
struct Scratch {
    dir: tempfile::TempDir,
    bundle: PathBuf,
    runtime: Runtime,
}

impl Scratch {
    fn new() -> Self {
        let dir = tempfile::Builder::new().prefix("claude-shim-fuzz-").tempdir().unwrap();
        let bundle = dir.path().join("bundle");
        let rootfs = bundle.join("rootfs");
        for d in ["bin", "tmp", "run", "dev", "proc", "sys", "etc"] {
            fs::create_dir_all(rootfs.join(d)).unwrap();
        }
        fs::write(rootfs.join("tmp/file"), b"x").unwrap();
        for (link, target) in [
            ("proc-link", "/proc"),
            ("data", "/proc"),
            ("up", "../../.."),
            ("loop", "loop"),
            ("sys-link", "../sys"),
        ] {
            std::os::unix::fs::symlink(target, rootfs.join(link)).unwrap();
        }
        let runtime = Runtime::new(Some(&dir.path().join("state")), false).unwrap();
        Self { dir, bundle, runtime }
    }

    fn state_dir(&self) -> PathBuf {
        self.dir.path().join("net-state")
    }
}

/// What the binary prints for `e`, or what is wrong with it.
fn one_line(e: &anyhow::Error) -> Result<(), String> {
    let line = crate::error_line(e);
    if line.contains(['\n', '\r']) {
        return Err(format!("a multi-line error: {line:?}"));
    }
    if line == "failed to " || !line.starts_with("failed to ") {
        return Err(format!("an error without a cause: {line:?}"));
    }
    Ok(())
}

/// A config.json, shown as text when proptest prints a failing case.
#[derive(Clone)]
struct Case(Vec<u8>);

impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(&self.0))
    }
}

#[derive(Default)]
struct Tally {
    accepted: u64,
    refused: u64,
}

/// One config.json through create's checks; Err names the broken property.
fn check(s: &Scratch, config: &[u8], admin: bool, tally: &mut Tally) -> Result<(), String> {
    fs::write(s.bundle.join("config.json"), config).map_err(|e| format!("write the case: {e}"))?;
    let refused = |e: anyhow::Error, tally: &mut Tally| {
        tally.refused += 1;
        one_line(&e)
    };
    let checked = match s.runtime.check_bundle("fuzz", &s.bundle) {
        Ok(c) => c,
        Err(e) => return refused(e, tally),
    };
    let mut spec = checked.spec;
    let cg = spec
        .linux()
        .as_ref()
        .and_then(|l| l.cgroups_path().clone())
        .unwrap_or_default();
    if !cg.starts_with(PARENT) || cg == Path::new(PARENT) || cg != cgroup::clean(&cg) {
        return Err(format!("cgroupsPath {} got past the confinement", cg.display()));
    }
    let mut meta = Meta {
        bundle: checked.bundle,
        rootfs: checked.rootfs,
        ..Meta::default()
    };
    if admin {
        let policy = crate::admin::Admin {
            path: PathBuf::from("/fuzz/admin.toml"),
            policy: Policy::embedded_default(),
        };
        if let Err(e) = crate::admin::apply_policy(policy, &mut spec, &mut meta) {
            return refused(e, tally);
        }
    }
    if let Err(e) = crate::network::prepare(&mut spec, &s.state_dir()) {
        return refused(e, tally);
    }
    // libcontainer reads the effective spec back from the file create writes.
    let json = serde_json::to_vec(&spec).map_err(|e| format!("the effective spec does not serialize: {e}"))?;
    let back: Spec =
        serde_json::from_slice(&json).map_err(|e| format!("the effective spec does not parse back: {e}"))?;
    if back != spec {
        return Err("the effective spec changes when read back".into());
    }
    let seccomp = spec.linux().as_ref().and_then(|l| l.seccomp().clone());
    for profile in seccomp.iter().chain(&meta.stacked_seccomp) {
        // What the runtime compiles before it clones (seccomp_cache::prepare,
        // without the cache); a profile libseccomp refuses fails in the init.
        if let Err(e) = libcontainer::seccomp::export_bpf(profile) {
            one_line(&anyhow::anyhow!("compile the seccomp profile: {e}"))?;
        }
    }
    tally.accepted += 1;
    Ok(())
}

/// Aborts the test process when one case runs longer than `HANG`, printing it.
fn watchdog(started: Arc<AtomicU64>, case: Arc<Mutex<Vec<u8>>>) {
    let t0 = Instant::now();
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_secs(1));
        let at = started.load(Ordering::Relaxed);
        if at != 0 && t0.elapsed().as_millis() as u64 - at > HANG.as_millis() as u64 {
            let bytes = case.lock().map(|c| c.clone()).unwrap_or_default();
            eprintln!(
                "config fuzz: a case hangs (over {HANG:?}): {}",
                String::from_utf8_lossy(&bytes)
            );
            std::process::abort();
        }
    });
}

fn regressions() -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fuzz/regressions/config");
    let mut out: Vec<(PathBuf, Vec<u8>)> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let bytes = fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    out.sort();
    out
}

fn seed() -> u64 {
    match std::env::var("CLAUDE_SHIM_FUZZ_SEED") {
        Ok(s) => s.parse().expect("CLAUDE_SHIM_FUZZ_SEED is a number"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1),
    }
}

/// The parent every generated cgroupsPath is confined below (the variable
/// is read by `create`; no other unit test reads it).
fn set_parent() {
    // SAFETY: the value is the same for every test that sets it, and no test
    // of this binary reads another.
    unsafe { std::env::set_var(cgroup::PARENT_ENV, PARENT) };
}

fn nothing_written(s: &Scratch) {
    let state = s.dir.path().join("state");
    assert!(!state.exists(), "check_bundle wrote {}", state.display());
    assert!(
        !s.state_dir().exists(),
        "network::prepare wrote {}",
        s.state_dir().display()
    );
    for h in cgroup::hierarchies().unwrap() {
        let p = h.join(PARENT.trim_start_matches('/'));
        assert!(!p.exists(), "a cgroup was made: {}", p.display());
    }
}

#[test]
fn config_regressions_still_hold() {
    set_parent();
    let s = Scratch::new();
    let cases = regressions();
    assert!(!cases.is_empty(), "tests/fuzz/regressions/config holds the kept cases");
    for (path, bytes) in cases {
        for admin in [false, true] {
            if let Err(e) = check(&s, &bytes, admin, &mut Tally::default()) {
                panic!("{} (admin policy: {admin}): {e}", path.display());
            }
        }
    }
    nothing_written(&s);
}

#[test]
fn generated_configs_never_panic_and_fail_in_one_line() {
    set_parent();
    let seed = seed();
    eprintln!("config fuzz: {CASES} cases, seed {seed} (CLAUDE_SHIM_FUZZ_SEED={seed} replays it)");
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..].copy_from_slice(&seed.rotate_left(17).to_le_bytes());
    let config = Config {
        cases: CASES,
        failure_persistence: None,
        max_shrink_iters: 2_000,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::XorShift, &bytes));
    let s = Scratch::new();
    let started = Arc::new(AtomicU64::new(0));
    let current = Arc::new(Mutex::new(Vec::new()));
    watchdog(started.clone(), current.clone());
    let t0 = Instant::now();
    let tally = std::cell::RefCell::new(Tally::default());
    let runs = std::cell::Cell::new(0u64);
    let strategy = (config_gen::config_json(PARENT).prop_map(Case), any::<bool>());
    let result = runner.run(&strategy, |(Case(config), admin)| {
        if let Ok(mut c) = current.lock() {
            c.clone_from(&config);
        }
        started.store(t0.elapsed().as_millis().max(1) as u64, Ordering::Relaxed);
        runs.set(runs.get() + 1);
        let r = check(&s, &config, admin, &mut tally.borrow_mut());
        started.store(0, Ordering::Relaxed);
        r.map_err(TestCaseError::fail)
    });
    if let Err(e) = result {
        panic!(
            "seed {seed}: {e}\nkeep the minimal input above as tests/fuzz/regressions/config/<name>.json once fixed"
        );
    }
    let t = tally.borrow();
    eprintln!(
        "config fuzz: {} inputs in {:.1} s: {} accepted, {} refused with one line, 0 panics, 0 hangs",
        runs.get(),
        t0.elapsed().as_secs_f64(),
        t.accepted,
        t.refused
    );
    assert!(runs.get() >= CASES as u64);
    // A generator that never gets past the parser proves nothing. About 0.6%
    // of the cases (110-130 per run across seeds) reach the admin policy and
    // the seccomp compiler; the floor sits well below that spread so that
    // only a generator that stopped producing valid configs trips it.
    assert!(
        t.accepted >= CASES as u64 / 400,
        "only {} of {} accepted",
        t.accepted,
        runs.get()
    );
    nothing_written(&s);
}
