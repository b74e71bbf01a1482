//! The cold start group (metric 1): /bin/true under every runtime, srt
//! included, timed from the fork of the runtime's command to its exit, with
//! the CPU time of what it waited for; the sandbox also in the 150k-file tree.
//! `cold_fn` is the sample of the networked cold start too.

use std::path::PathBuf;

use crate::case::{ms, Ctx, Sample, SampleFn, State};
use crate::exec::exec;
use crate::plan::{Job, Planner};
use crate::runtimes::{Kind, Launch, Runtime};
use crate::targets::BIG_TREE;

impl<'a> Planner<'a> {
    // ---- metric 1
    pub(crate) fn cold_start(&mut self) {
        let m = || vec!["cold_start", "cold_start_cpu"];
        for i in self.with_srt() {
            let tree = self.ctx.tree.clone();
            self.case(i, "", m(), State::Ready, |p, rt| {
                let cwd = if matches!(rt.kind, Kind::Sandbox | Kind::Srt | Kind::Codex) {
                    tree
                } else {
                    PathBuf::from("/")
                };
                let launch = p.launch(rt, Job::new(vec!["/bin/true".into()], &cwd))?;
                Ok((launch.clone(), cold_fn(rt.clone(), launch, "cold_start")))
            });
            if self.ctx.rts[i].kind == Kind::Sandbox {
                let big = match &self.ctx.big_tree {
                    Ok(p) => (State::Ready, p.clone()),
                    Err(e) => (State::Fails(e.clone()), PathBuf::new()),
                };
                self.case(i, BIG_TREE, m(), big.0, |p, rt| {
                    let launch = p.launch(rt, Job::new(vec!["/bin/true".into()], &big.1))?;
                    Ok((launch.clone(), cold_fn(rt.clone(), launch, "cold_start")))
                });
            }
        }
    }
}

pub(crate) fn cold_fn(rt: Runtime, launch: Launch, metric: &'static str) -> SampleFn {
    Box::new(move |ctx: &Ctx| {
        let id = ctx.id();
        let f = exec(ctx, &rt, &launch, &id, None)?;
        Ok(Sample {
            values: vec![(metric, ms(f.elapsed)), (cpu_metric(metric), ms(f.cpu))],
            note: None,
        })
    })
}

/// The CPU-time companion of a start-up metric.
fn cpu_metric(metric: &str) -> &'static str {
    match metric {
        "cold_start_net" => "cold_start_net_cpu",
        "start20" => "start20_cpu",
        _ => "cold_start_cpu",
    }
}
