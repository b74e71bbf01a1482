//! claude-shim-bench: runs the same bundle and workloads under claude-shim,
//! runc, crun, runsc, bwrap and the bare host, and writes the comparison
//! (table.md, results.json, one SVG per metric) into a results folder. The
//! hidden `__probe` verb is the same binary running inside each sandbox.

mod bench;
mod bundle;
mod case;
mod claude;
mod cold_start;
mod cold_start_net;
mod containment;
mod containment_table;
mod containment_types;
mod containment_user;
mod detect;
mod exec;
mod machine;
mod memory;
mod metrics;
mod net;
mod parse;
mod plan;
mod policy_compile;
mod probe;
mod proc;
mod report;
mod results;
mod runtimes;
mod seccomp;
mod settings;
mod start20;
mod stats;
mod svg;
mod syscall;
mod targets;
mod throughput;
mod workload;
mod workloads;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "claude-shim-bench",
    about = "Compare claude-shim with runc, crun, runsc (gVisor), bwrap and the bare host on this machine",
    after_help = "Metric groups: cold_start, cold_start_net, syscall, workload, throughput, memory, start20, policy_compile, claude, containment.\n\
                  Runtimes: host, bwrap, srt, codex, runc, crun, runsc, claude-shim, sandbox."
)]
struct Cli {
    /// Measured rounds (each runs every case once, in a new shuffled order)
    #[arg(long)]
    rounds: Option<usize>,
    /// Warm-up rounds, discarded (at least 1: the first decides whether a case runs here)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    warmup: u64,
    /// Small sizes and short loops (CI, development); 3 rounds unless --rounds
    #[arg(long)]
    quick: bool,
    /// Results folder: a <timestamp>/ directory per run and a `latest` link
    #[arg(long, default_value = "results")]
    results: PathBuf,
    /// Working directory: bundles, rootfs, the generated tree, state roots
    #[arg(long, default_value = "target/bench")]
    work: PathBuf,
    /// The claude-shim binary
    #[arg(
        long,
        env = "CLAUDE_SHIM",
        default_value = "target/x86_64-unknown-linux-gnu/release/claude-shim"
    )]
    claude_shim: PathBuf,
    /// claude-shim's agent seccomp profile (OCI LinuxSeccomp JSON)
    #[arg(long, default_value = "specs/seccomp/agent.json")]
    agent_seccomp: PathBuf,
    /// Only these runtimes (comma-separated); the others are listed as not selected
    #[arg(long, value_delimiter = ',')]
    runtimes: Option<Vec<String>>,
    /// Only these metric groups (comma-separated)
    #[arg(long, value_delimiter = ',')]
    metrics: Option<Vec<String>>,
    /// runsc platform to measure (repeatable; default: runsc's own default)
    #[arg(long = "runsc-platform")]
    runsc_platforms: Vec<String>,
    /// Seed of the round order (default: from the clock; recorded in the results)
    #[arg(long)]
    seed: Option<u64>,
    /// Rewrite this README's benchmark section with the run's table and plots
    #[arg(long)]
    readme: Option<PathBuf>,
    /// Deadline of one runtime invocation, in seconds
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// Print how long each sample took
    #[arg(long)]
    verbose: bool,

    #[command(subcommand)]
    command: Option<Hidden>,
}

#[derive(Subcommand, Debug)]
enum Hidden {
    /// The in-sandbox probes
    #[command(name = "__probe", hide = true)]
    Probe(probe::ProbeArgs),
}

fn check_names(what: &str, given: &Option<Vec<String>>, known: &[&str]) -> anyhow::Result<()> {
    for g in given.iter().flatten() {
        if !known.contains(&g.as_str()) {
            anyhow::bail!("use {what} {g:?}: it is not one of {}", known.join(", "));
        }
    }
    Ok(())
}

fn main() {
    let cli = Cli::parse();
    let result = match &cli.command {
        Some(Hidden::Probe(p)) => probe::run(p),
        None => (|| {
            check_names("runtime", &cli.runtimes, detect::RUNTIMES)?;
            check_names("metric group", &cli.metrics, metrics::GROUPS)?;
            let seed = cli.seed.unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            });
            bench::run(settings::Settings {
                rounds: cli.rounds.unwrap_or(if cli.quick { 3 } else { 10 }).max(1),
                warmup: cli.warmup as usize,
                quick: cli.quick,
                results: cli.results.clone(),
                work: cli.work.clone(),
                claude_shim: std::path::absolute(&cli.claude_shim).unwrap_or(cli.claude_shim.clone()),
                agent_seccomp: std::path::absolute(&cli.agent_seccomp).unwrap_or(cli.agent_seccomp.clone()),
                runtimes: cli.runtimes.clone(),
                metrics: cli.metrics.clone(),
                runsc_platforms: cli.runsc_platforms.clone(),
                seed,
                readme: cli.readme.clone(),
                timeout: Duration::from_secs(cli.timeout),
                verbose: cli.verbose,
            })
        })(),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            let mut line = format!("claude-shim-bench: failed to {e:#}");
            line.retain(|c| c != '\n');
            eprintln!("{line}");
            std::process::exit(1);
        }
    }
}
