//! A case and what it samples with: the run's shared context (`Ctx`), one
//! sample of one or more metrics, a case's state and the samples it has so
//! far. Below the planner and every metric group, which build cases, and the
//! run, which samples them.

use std::cell::Cell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;

use crate::net::Peer;
use crate::proc::{Runner, Running};
use crate::runtimes::Runtime;

/// What the shared state of a run holds while cases sample.
pub struct Ctx {
    pub runner: Runner,
    pub rts: Vec<Runtime>,
    pub timeout: Duration,
    pub bwrap_flags: Vec<String>,
    pub bench_bin: PathBuf,
    pub work: PathBuf,
    pub tree: PathBuf,
    /// The 150k-file tree of the start-up row (or why there is none).
    pub big_tree: Result<PathBuf, String>,
    pub pasta: Option<PathBuf>,
    pub peer: Result<Peer, String>,
    pub peer_port: u16,
    /// A sink on the host's loopback, for the host -> container floor.
    pub host_sink: Option<(Running, String)>,
    pub bytes: u64,
    pub budget_ms: u64,
    pub(crate) ids: Cell<u64>,
}

impl Ctx {
    pub(crate) fn id(&self) -> String {
        let n = self.ids.get();
        self.ids.set(n + 1);
        format!("cbench-{}-{n}", std::process::id())
    }
}

pub struct Sample {
    pub(crate) values: Vec<(&'static str, f64)>,
    pub(crate) note: Option<String>,
}

impl Sample {
    pub(crate) fn one(metric: &'static str, v: f64) -> Self {
        Self {
            values: vec![(metric, v)],
            note: None,
        }
    }
}

pub(crate) enum State {
    Ready,
    Skipped(String),
    Missing(String),
    Fails(String),
    NotApplicable(String),
    Pending(String),
}

pub(crate) type SampleFn = Box<dyn FnMut(&Ctx) -> Result<Sample>>;

pub(crate) struct Case {
    pub(crate) label: String,
    pub(crate) rt: usize,
    pub(crate) variant: String,
    pub(crate) metrics: Vec<&'static str>,
    pub(crate) state: State,
    pub(crate) run: Option<SampleFn>,
    pub(crate) command: Option<String>,
    pub(crate) samples: HashMap<&'static str, Vec<f64>>,
    pub(crate) failures: Vec<String>,
    pub(crate) note: Option<String>,
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub(crate) fn err_text(e: &anyhow::Error) -> String {
    let mut s = format!("{e:#}");
    s.retain(|c| c != '\n');
    s.chars().take(500).collect()
}

pub(crate) fn clone_state(s: &State) -> State {
    match s {
        State::Ready => State::Ready,
        State::Skipped(r) => State::Skipped(r.clone()),
        State::Missing(r) => State::Missing(r.clone()),
        State::Fails(r) => State::Fails(r.clone()),
        State::NotApplicable(r) => State::NotApplicable(r.clone()),
        State::Pending(r) => State::Pending(r.clone()),
    }
}
