//! The run's settings, as the command line gives them to `bench::run`; below
//! the modules that read them (the metrics, the detection, the run).

use std::path::PathBuf;
use std::time::Duration;

pub struct Settings {
    pub rounds: usize,
    pub warmup: usize,
    pub quick: bool,
    pub results: PathBuf,
    pub work: PathBuf,
    pub claude_shim: PathBuf,
    pub agent_seccomp: PathBuf,
    pub runtimes: Option<Vec<String>>,
    pub metrics: Option<Vec<String>>,
    pub runsc_platforms: Vec<String>,
    pub seed: u64,
    pub readme: Option<PathBuf>,
    pub timeout: Duration,
    /// Print the time each sample took.
    pub verbose: bool,
}
