//! The benchmark run: detect the runtimes (`detect`), prepare the bundle, the
//! source tree and the throughput peer, have each selected metric group plan
//! its cases (one per metric x runtime x variant; each group's plan sits in
//! its own file, over `plan`), run the warm-up rounds and then the measured
//! rounds with every case once per round in a new shuffled order (so drift
//! hits all alike), and hand the samples to `report`. Cases that cannot run
//! are planned too, with their reason, so that every runtime appears in every
//! table.

use std::cell::Cell;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::json;

use crate::bundle;
use crate::case::{err_text, Ctx, State};
use crate::claude;
use crate::detect::detect;
use crate::machine;
use crate::metrics::{group_of, metric_defs};
use crate::net::{free_port, Peer};
use crate::plan::Planner;
use crate::proc::{Hooks, Runner, Scratch, Watchdog};
use crate::report;
use crate::results::{self, Results, Row, RowStatus};
use crate::runtimes;
use crate::settings::Settings;
use crate::start20::AT_ONCE;
use crate::stats;
use crate::targets;
use crate::workloads::{self, Size};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Fisher-Yates with xorshift64*: a new order each round, reproducible from the seed.
fn shuffle(v: &mut [usize], state: &mut u64) {
    for i in (1..v.len()).rev() {
        *state ^= *state >> 12;
        *state ^= *state << 25;
        *state ^= *state >> 27;
        let r = state.wrapping_mul(0x2545_f491_4f6c_dd1d);
        v.swap(i, (r % (i as u64 + 1)) as usize);
    }
}

fn absolute(p: &Path) -> Result<PathBuf> {
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    Ok(std::env::current_dir().context("read the working directory")?.join(p))
}

pub fn run(s: Settings) -> Result<i32> {
    if !nix::unistd::geteuid().is_root() {
        bail!("run the benchmark: it needs root (containers, namespaces, pasta); hack/bench runs it as root");
    }
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        let action = nix::sys::signal::SigAction::new(
            nix::sys::signal::SigHandler::Handler(on_signal),
            nix::sys::signal::SaFlags::empty(),
            nix::sys::signal::SigSet::empty(),
        );
        let _ = nix::sys::signal::sigaction(nix::sys::signal::SIGINT, &action);
        let _ = nix::sys::signal::sigaction(nix::sys::signal::SIGTERM, &action);
    }
    let started = chrono::Utc::now();
    let t_start = Instant::now();
    let mut machine = machine::collect();
    let work = absolute(&s.work)?;
    let results_root = absolute(&s.results)?;
    let size: Size = if s.quick { workloads::QUICK } else { workloads::FULL };
    let bytes: u64 = if s.quick { 16 << 20 } else { 256 << 20 };
    let budget_ms: u64 = if s.quick { 20 } else { 200 };

    eprintln!("claude-shim-bench: preparing {}", work.display());
    fs::create_dir_all(&work).with_context(|| format!("create {}", work.display()))?;
    for d in ["bundles", "netns", "state"] {
        let p = work.join(d);
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).with_context(|| format!("create {}", p.display()))?;
    }
    let bin_dir = work.join("bin");
    fs::create_dir_all(&bin_dir)?;
    let bench_bin = bin_dir.join("claude-shim-bench");
    let me = std::env::current_exe().context("find the bench binary")?;
    let tmp_bin = bin_dir.join(".claude-shim-bench.tmp");
    fs::copy(&me, &tmp_bin).with_context(|| format!("copy {} to {}", me.display(), tmp_bin.display()))?;
    fs::rename(&tmp_bin, &bench_bin)?;
    let tree = workloads::prepare(&work.join("tree"), &size).context("prepare the source tree")?;
    let big_tree = if s.metrics.as_ref().is_none_or(|g| g.iter().any(|g| g == "cold_start")) {
        let files = if s.quick { 15_000 } else { 150_000 };
        workloads::big_tree(&work.join("big-tree"), files).map_err(|e| err_text(&e))
    } else {
        Err("cold_start not selected".into())
    };
    let layout = bundle::prepare_rootfs(&work.join("rootfs"), &tree, &bin_dir)?;

    let runner = Runner {
        dog: Watchdog::start(),
        scratch: Scratch::new(&work.join("scratch"))?,
    };
    let (rts, tools, support) = detect(&s, &runner, &work, &layout);
    let home = std::env::var_os("HOME").map_or(PathBuf::from("/root"), PathBuf::from);
    let bwrap_flags = runtimes::bwrap_flags(&tree, &home);
    let metrics = metric_defs(&s, bytes);
    let wants = |g: &str| metrics.iter().any(|m| group_of(m.id) == g);

    let peer = if wants("throughput") {
        Peer::create().map_err(|e| err_text(&e))
    } else {
        Err("throughput not selected".into())
    };
    let peer_port = 5201;
    let mut peer_sink = None;
    let mut host_sink = None;
    if wants("throughput") {
        if let Ok(p) = &peer {
            let mut c = Command::new(&bench_bin);
            c.args(["__probe", "sink", "--listen", &format!("{}:{peer_port}", p.peer_ip)]);
            peer_sink = Some(runner.spawn(c, &p.hooks(), Duration::from_secs(24 * 3600))?);
        }
        let addr = format!("127.0.0.1:{}", free_port());
        let mut c = Command::new(&bench_bin);
        c.args(["__probe", "sink", "--listen", &addr]);
        host_sink = Some((
            runner.spawn(c, &Hooks::default(), Duration::from_secs(24 * 3600))?,
            addr,
        ));
    }

    let ctx = Ctx {
        runner,
        rts,
        timeout: s.timeout,
        bwrap_flags,
        bench_bin,
        work: work.clone(),
        tree,
        big_tree,
        pasta: runtimes::find("pasta"),
        peer,
        peer_port,
        host_sink,
        bytes,
        budget_ms,
        ids: Cell::new(0),
    };

    let mut planner = Planner {
        ctx: &ctx,
        layout: &layout,
        support: &support,
        cases: Vec::new(),
        n: 0,
    };
    if wants("cold_start") {
        planner.cold_start();
    }
    if wants("cold_start_net") {
        planner.cold_start_net();
    }
    if wants("syscall") {
        planner.syscalls();
    }
    if wants("workload") {
        planner.workloads();
    }
    if wants("throughput") {
        planner.throughput();
    }
    if wants("memory") {
        planner.memory();
    }
    if wants("start20") {
        planner.start20();
    }
    if wants("policy_compile") {
        planner.policy_compile();
    }
    if wants("claude") {
        planner.claude();
    }
    planner.srt_elsewhere(&metrics);
    let mut cases = planner.cases;

    let total = s.warmup + s.rounds;
    let mut order: Vec<usize> = (0..cases.len())
        .filter(|i| matches!(cases[*i].state, State::Ready))
        .collect();
    let mut rng = s.seed | 1;
    eprintln!(
        "claude-shim-bench: {} cases ready, {} not runnable here; {} warm-up + {} measured rounds",
        order.len(),
        cases.len() - order.len(),
        s.warmup,
        s.rounds
    );
    let mut interrupted = false;
    'rounds: for round in 0..total {
        shuffle(&mut order, &mut rng);
        let warm = round < s.warmup;
        let t = Instant::now();
        for &i in &order {
            if INTERRUPTED.load(Ordering::SeqCst) {
                interrupted = true;
                break 'rounds;
            }
            let c = &mut cases[i];
            if !matches!(c.state, State::Ready) {
                continue;
            }
            let Some(f) = c.run.as_mut() else { continue };
            let t_case = Instant::now();
            let mut r = f(&ctx);
            // The first warm-up decides whether a case runs here at all; a
            // sporadic failure (pasta's stalls) gets two more tries there.
            for _ in 0..2 {
                if round > 0 || r.is_ok() {
                    break;
                }
                r = f(&ctx);
            }
            if s.verbose || t_case.elapsed() > Duration::from_secs(10) {
                eprintln!(
                    "claude-shim-bench: {} of {} took {:.1} s",
                    c.metrics[0],
                    c.label,
                    t_case.elapsed().as_secs_f64()
                );
            }
            match r {
                Ok(sample) if !warm => {
                    for (m, v) in sample.values {
                        c.samples.entry(m).or_default().push(v);
                    }
                    if sample.note.is_some() {
                        c.note = sample.note;
                    }
                }
                Ok(_) => {}
                Err(e) if round == 0 => c.state = State::Fails(err_text(&e)),
                Err(e) => c.failures.push(err_text(&e)),
            }
        }
        eprintln!(
            "claude-shim-bench: round {}/{total}{} done in {:.1} s",
            round + 1,
            if warm { " (warm-up)" } else { "" },
            t.elapsed().as_secs_f64()
        );
    }

    let containment = s
        .metrics
        .as_ref()
        .is_none_or(|g| g.iter().any(|g| g == "containment"))
        .then(|| {
            eprintln!(
                "claude-shim-bench: containment: the {} policy's checks in every sandbox",
                crate::containment::POLICY
            );
            let (user_peers, user) = crate::containment_user::peers(&ctx, &layout);
            let user = crate::containment_user::measure(&ctx, &s.claude_shim, user_peers, user);
            crate::containment::peers(&ctx, &layout, &support)
                .and_then(|p| crate::containment::measure(&ctx, &s.claude_shim, p, user))
                .map(|raw| crate::containment_table::build(&raw))
                .map_err(|e| err_text(&e))
        });
    if let Some(r) = peer_sink {
        r.kill();
    }
    if let Some((r, _)) = ctx.host_sink {
        r.kill();
    }
    if let Ok(p) = &ctx.peer {
        p.destroy();
    }
    machine.loadavg_after = machine::loadavg();

    let mut rows = Vec::new();
    for m in &metrics {
        for c in cases.iter().filter(|c| c.metrics.contains(&m.id)) {
            let rt = &ctx.rts[c.rt];
            let samples = c.samples.get(m.id).cloned().unwrap_or_default();
            let (status, reason) = match &c.state {
                State::Ready if samples.is_empty() => (
                    RowStatus::Fails,
                    Some(
                        c.failures
                            .first()
                            .cloned()
                            .unwrap_or_else(|| "no sample was taken".into()),
                    ),
                ),
                State::Ready => (RowStatus::Ok, None),
                State::Skipped(r) => (RowStatus::Skipped, Some(r.clone())),
                State::Missing(r) => (RowStatus::Missing, Some(r.clone())),
                State::Fails(r) => (RowStatus::Fails, Some(r.clone())),
                State::NotApplicable(r) => (RowStatus::NotApplicable, Some(r.clone())),
                State::Pending(r) => (RowStatus::Pending, Some(r.clone())),
            };
            rows.push(Row {
                metric: m.id.to_owned(),
                label: c.label.clone(),
                runtime: rt.name.clone(),
                kind: rt.kind,
                variant: c.variant.clone(),
                status,
                reason,
                summary: stats::summarize(&samples),
                samples,
                failures: c.failures.clone(),
                ratio_host: None,
                ratio_runc: None,
                note: c.note.clone(),
                command: c.command.clone(),
            });
        }
    }
    report::fill_ratios(&mut rows);
    let wl: Vec<&str> = metrics
        .iter()
        .map(|m| m.id)
        .filter(|m| m.starts_with("workload_"))
        .collect();
    let sys: Vec<&str> = metrics
        .iter()
        .map(|m| m.id)
        .filter(|m| m.starts_with("syscall_"))
        .collect();
    let mut targets = targets::targets(&rows, &wl, &sys);
    targets.extend(claude::targets(&rows));

    let mut notes = Vec::new();
    if let Err(e) = &support.agent_seccomp {
        notes.push(format!("agent seccomp profile: pending: {e}"));
    }
    if let Err(e) = &support.shim_net {
        notes.push(format!("claude-shim network modes: {e}"));
    }
    let finished = chrono::Utc::now();
    let results = Results {
        schema: results::SCHEMA,
        started: started.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        finished: finished.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        duration_s: t_start.elapsed().as_secs_f64(),
        settings: json!({
            "rounds": s.rounds,
            "warmup": s.warmup,
            "quick": s.quick,
            "seed": s.seed,
            "timeout_s": s.timeout.as_secs(),
            "syscall_budget_ms": budget_ms,
            "transfer_bytes": bytes,
            "tree": size,
            "at_once": AT_ONCE,
            "runsc_platforms": s.runsc_platforms,
            "runtimes": s.runtimes,
            "metrics": s.metrics,
            "claude_shim": s.claude_shim,
            "agent_seccomp": s.agent_seccomp,
            "bwrap_flags": ctx.bwrap_flags,
            "work": work,
        }),
        machine,
        tools,
        runtimes: ctx.rts.clone(),
        metrics,
        rows,
        targets,
        interrupted,
        notes,
        containment: containment.as_ref().and_then(|c| c.as_ref().ok().cloned()),
        containment_error: containment.and_then(|c| c.err()),
    };
    let dir = results_root.join(started.format("%Y%m%dT%H%M%SZ").to_string());
    let written = report::write_all(&results, &dir)?;
    if let Some(readme) = &s.readme {
        report::update_readme(readme, &results, &dir)?;
        eprintln!("claude-shim-bench: updated {}", readme.display());
    }
    println!("{}", report::markdown(&results));
    eprintln!(
        "claude-shim-bench: wrote {} files to {} (and {})",
        written.len(),
        dir.display(),
        results_root.join("latest").display()
    );
    Ok(if interrupted { 130 } else { 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffle_is_a_permutation_and_changes_between_rounds() {
        let mut v: Vec<usize> = (0..20).collect();
        let mut st = 42;
        shuffle(&mut v, &mut st);
        let first = v.clone();
        shuffle(&mut v, &mut st);
        let mut sorted = v.clone();
        sorted.sort();
        assert_eq!(sorted, (0..20).collect::<Vec<_>>());
        assert_ne!(first, v);
    }
}
