//! Start-up phase timings, for hack/bench's breakdown of `sandbox -- true`:
//! with `CLAUDE_SHIM_TIMINGS=1` each phase prints one line on stderr with the
//! wall time since the first exec of claude-shim (kept across the seal's
//! re-exec through the variable itself) and the CPU time used so far.
//! Off by default: nothing is measured or printed without the variable.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const ENV: &str = "CLAUDE_SHIM_TIMINGS";

static ON: AtomicBool = AtomicBool::new(false);
static T0_NS: AtomicU64 = AtomicU64::new(0);

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec for the kernel to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn cpu_ms(who: nix::sys::resource::UsageWho) -> f64 {
    nix::sys::resource::getrusage(who)
        .map(|u| {
            let ms = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 * 1e3 + t.tv_usec() as f64 / 1e3;
            ms(u.user_time()) + ms(u.system_time())
        })
        .unwrap_or(0.0)
}

/// Reads the variable; the first exec stamps its start time into it so the
/// re-executed process measures from the same origin. Call before any thread.
pub fn init() {
    let Some(v) = std::env::var_os(ENV) else { return };
    let t0 = match v.to_str().and_then(|s| s.strip_prefix("t0=")) {
        Some(ns) => ns.parse().unwrap_or_else(|_| monotonic_ns()),
        None if v == "0" || v.is_empty() => return,
        None => {
            let now = monotonic_ns();
            // SAFETY: called first thing in main, before any other thread exists.
            unsafe { std::env::set_var(ENV, format!("t0={now}")) };
            now
        }
    };
    T0_NS.store(t0, Ordering::Relaxed);
    ON.store(true, Ordering::Relaxed);
}

/// One phase has ended: `claude-shim: timing: <phase> <wall ms> wall <cpu ms> cpu`.
/// CPU counts this process and the children it has reaped.
pub fn mark(phase: &str) {
    if !ON.load(Ordering::Relaxed) {
        return;
    }
    use nix::sys::resource::UsageWho;
    let wall = monotonic_ns().saturating_sub(T0_NS.load(Ordering::Relaxed)) as f64 / 1e6;
    let cpu = cpu_ms(UsageWho::RUSAGE_SELF) + cpu_ms(UsageWho::RUSAGE_CHILDREN);
    // One write, so lines of the runtime and the init do not interleave.
    let line = format!(
        "claude-shim: timing: {phase} {wall:.2} ms wall {cpu:.2} ms cpu (pid {})\n",
        std::process::id()
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
}
