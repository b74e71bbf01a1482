//! The planner the metric groups plan on: one case per metric x runtime x
//! variant, its launch (a bundle written for the runtimes that take one), and
//! a case with its reason for every combination that cannot run here, so
//! every runtime appears in every table. Each group adds its own
//! `impl Planner` block in its file; the run orders and samples the cases.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::Result;
use serde_json::Value;

use crate::bundle::{self, Layout, Net, Variant};
use crate::case::{err_text, Case, Ctx, SampleFn, State};
use crate::proc;
use crate::results::MetricDef;
use crate::runtimes::{Availability, Kind, Launch, Runtime};

/// Facts the planner needs beyond the runtimes.
pub(crate) struct Support {
    pub(crate) shim_net: Result<(), String>,
    pub(crate) default_seccomp: Result<Value, String>,
    pub(crate) agent_seccomp: Result<Value, String>,
    pub(crate) bwrap_bpf: Result<PathBuf, String>,
}

pub(crate) struct Planner<'a> {
    pub(crate) ctx: &'a Ctx,
    pub(crate) layout: &'a Layout,
    pub(crate) support: &'a Support,
    pub(crate) cases: Vec<Case>,
    pub(crate) n: usize,
}

/// What one case runs, before it is turned into a launch.
pub(crate) struct Job<'a> {
    pub(crate) argv: Vec<String>,
    pub(crate) cwd: PathBuf,
    pub(crate) seccomp: Option<&'a Value>,
    pub(crate) net: Net,
    pub(crate) annotations: BTreeMap<String, String>,
    pub(crate) runsc_network: &'static str,
    pub(crate) oci_seccomp: bool,
    pub(crate) bpf: Option<PathBuf>,
}

impl<'a> Job<'a> {
    pub(crate) fn new(argv: Vec<String>, cwd: &Path) -> Self {
        Self {
            argv,
            cwd: cwd.to_path_buf(),
            seccomp: None,
            net: Net::Own,
            annotations: BTreeMap::new(),
            runsc_network: "none",
            oci_seccomp: false,
            bpf: None,
        }
    }
}

pub(crate) fn gate(rt: &Runtime) -> State {
    match &rt.availability {
        Availability::Present => State::Ready,
        Availability::Missing(r) => State::Missing(r.clone()),
        Availability::Fails(r) => State::Fails(r.clone()),
        Availability::NotSelected => State::Skipped("not selected (--runtimes)".into()),
    }
}

impl<'a> Planner<'a> {
    pub(crate) fn launch(&mut self, rt: &Runtime, job: Job) -> Result<Launch> {
        match rt.kind {
            Kind::Host | Kind::Sandbox | Kind::Srt | Kind::Codex => Ok(Launch::Argv {
                argv: job.argv,
                cwd: job.cwd,
                bpf: None,
            }),
            Kind::Bwrap => Ok(Launch::Argv {
                argv: job.argv,
                cwd: job.cwd,
                bpf: job.bpf,
            }),
            _ => {
                self.n += 1;
                let dir = self.ctx.work.join("bundles").join(format!("b{:03}", self.n));
                let mut v = Variant::new(job.argv);
                v.cwd = job.cwd.display().to_string();
                v.seccomp = job.seccomp;
                v.net = job.net;
                v.annotations = job.annotations;
                bundle::write(&dir, self.layout, &v)?;
                Ok(Launch::Bundle {
                    dir,
                    runsc_network: job.runsc_network,
                    oci_seccomp: job.oci_seccomp,
                })
            }
        }
    }

    pub(crate) fn push(
        &mut self,
        label: String,
        rt: usize,
        variant: &str,
        metrics: Vec<&'static str>,
        state: State,
        run: Option<SampleFn>,
    ) {
        self.cases.push(Case {
            label,
            rt,
            variant: variant.to_owned(),
            metrics,
            state,
            run,
            command: None,
            samples: HashMap::new(),
            failures: Vec::new(),
            note: None,
        });
    }

    /// A case that runs when its runtime (and `extra`) allow it.
    pub(crate) fn case(
        &mut self,
        rt_i: usize,
        variant: &str,
        metrics: Vec<&'static str>,
        extra: State,
        make: impl FnOnce(&mut Self, &Runtime) -> Result<(Launch, SampleFn)>,
    ) {
        let rt = self.ctx.rts[rt_i].clone();
        let label = label_of(&rt.name, variant);
        let state = match (gate(&rt), extra) {
            (State::Ready, State::Ready) => State::Ready,
            (State::Ready, other) => other,
            (other, _) => other,
        };
        if !matches!(state, State::Ready) {
            return self.push(label, rt_i, variant, metrics, state, None);
        }
        match make(self, &rt) {
            Ok((launch, run)) => {
                let cmd = proc::command_line(&rt.run_command(&launch, "ID", &self.ctx.bwrap_flags));
                self.push(label, rt_i, variant, metrics, State::Ready, Some(run));
                if let Some(c) = self.cases.last_mut() {
                    c.command = Some(cmd);
                }
            }
            Err(e) => self.push(label, rt_i, variant, metrics, State::Fails(err_text(&e)), None),
        }
    }

    pub(crate) fn na(&mut self, rt_i: usize, variant: &str, metrics: Vec<&'static str>, why: &str) {
        let rt = &self.ctx.rts[rt_i];
        let label = label_of(&rt.name, variant);
        let state = match gate(rt) {
            State::Ready => State::NotApplicable(why.to_owned()),
            other => other,
        };
        self.push(label, rt_i, variant, metrics, state, None);
    }

    /// Every runtime but srt (compared on start-up only) and Codex's sandbox
    /// (start-up, syscalls, workloads and containment).
    pub(crate) fn all(&self) -> Vec<usize> {
        (0..self.ctx.rts.len())
            .filter(|&i| !matches!(self.ctx.rts[i].kind, Kind::Srt | Kind::Codex))
            .collect()
    }

    /// all(), and Codex's sandbox: the rows that run a command in the
    /// working directory (syscalls, workloads), which it makes writable.
    pub(crate) fn with_codex(&self) -> Vec<usize> {
        (0..self.ctx.rts.len())
            .filter(|&i| self.ctx.rts[i].kind != Kind::Srt)
            .collect()
    }

    pub(crate) fn with_srt(&self) -> Vec<usize> {
        (0..self.ctx.rts.len()).collect()
    }

    /// A not-applicable row for a runtime that has no case of `metric`, so
    /// every runtime appears in every table.
    pub(crate) fn na_unless_measured(&mut self, rt_i: usize, metric: &'static str, why: &str) {
        if !self.cases.iter().any(|c| c.rt == rt_i && c.metrics.contains(&metric)) {
            self.na(rt_i, "", vec![metric], why);
        }
    }

    /// srt's rows in the tables it is not measured in, so every runtime
    /// appears in every table.
    pub(crate) fn srt_elsewhere(&mut self, metrics: &[MetricDef]) {
        for i in 0..self.ctx.rts.len() {
            let why = match self.ctx.rts[i].kind {
                Kind::Srt => "srt is compared on start-up only",
                Kind::Codex => "Codex's sandbox is compared on start-up, syscalls, workloads and containment only",
                _ => continue,
            };
            for m in metrics {
                self.na_unless_measured(i, m.id, why);
            }
        }
    }

    pub(crate) fn probe_argv(&self, args: &[&str]) -> Vec<String> {
        let mut v = vec![self.ctx.bench_bin.display().to_string(), "__probe".to_owned()];
        v.extend(args.iter().map(|s| s.to_string()));
        v
    }

    pub(crate) fn shim_net_state(&self) -> State {
        match &self.support.shim_net {
            Ok(()) => State::Ready,
            Err(e) => State::Missing(e.clone()),
        }
    }

    pub(crate) fn pasta_state(&self) -> State {
        match &self.ctx.pasta {
            Some(_) => State::Ready,
            None => State::Missing("pasta is not installed (apt-get install passt)".into()),
        }
    }
}

/// "runc (no seccomp)", and "runsc (ptrace, no seccomp)" for a name that has its own parenthesis.
pub(crate) fn label_of(name: &str, variant: &str) -> String {
    match (variant.is_empty(), name.strip_suffix(')')) {
        (true, _) => name.to_owned(),
        (false, Some(open)) => format!("{open}, {variant})"),
        (false, None) => format!("{name} ({variant})"),
    }
}

pub(crate) fn net_annotations(mode: &str, policy: Value) -> BTreeMap<String, String> {
    let mut a = BTreeMap::new();
    a.insert("run.claude-shim.network".to_owned(), mode.to_owned());
    if mode != "none" {
        a.insert("run.claude-shim.network.policy".to_owned(), policy.to_string());
    }
    a
}
