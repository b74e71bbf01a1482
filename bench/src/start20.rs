//! The start20 group (metric 6b): 20 sandboxes of /bin/true started at once,
//! timed from the first `run` to the last one's exit, with their CPU time.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Result};

use crate::case::{err_text, ms, Ctx, Sample, SampleFn, State};
use crate::exec::hooks_for;
use crate::plan::{Job, Planner};
use crate::proc::{self, Running};
use crate::runtimes::{Kind, Launch, Runtime};

pub(crate) const AT_ONCE: usize = 20;

impl<'a> Planner<'a> {
    // ---- metric 6b
    pub(crate) fn start20(&mut self) {
        for i in self.all() {
            let tree = self.ctx.tree.clone();
            self.case(i, "", vec!["start20", "start20_cpu"], State::Ready, |p, rt| {
                let cwd = if rt.kind == Kind::Sandbox {
                    tree
                } else {
                    PathBuf::from("/")
                };
                let launch = p.launch(rt, Job::new(vec!["/bin/true".into()], &cwd))?;
                let rt = rt.clone();
                let l = launch.clone();
                let f: SampleFn = Box::new(move |ctx: &Ctx| start_many(ctx, &rt, &l));
                Ok((launch, f))
            });
        }
    }
}

fn start_many(ctx: &Ctx, rt: &Runtime, launch: &Launch) -> Result<Sample> {
    let ids: Vec<String> = (0..AT_ONCE).map(|_| ctx.id()).collect();
    let hooks = hooks_for(rt, launch, None)?;
    let cpu0 = proc::children_cpu();
    let t0 = Instant::now();
    let mut running = Vec::new();
    for id in &ids {
        match ctx
            .runner
            .spawn(rt.run_command(launch, id, &ctx.bwrap_flags), &hooks, ctx.timeout)
        {
            Ok(r) => running.push(r),
            Err(e) => {
                running.into_iter().for_each(Running::kill);
                ids.iter().for_each(|id| rt.cleanup(id, None));
                return Err(e);
            }
        }
    }
    let mut first_err = None;
    for r in running {
        match r.wait() {
            Ok(f) if f.status.success() => {}
            Ok(f) => {
                first_err.get_or_insert(f.why());
            }
            Err(e) => {
                first_err.get_or_insert(err_text(&e));
            }
        }
    }
    let el = t0.elapsed();
    let cpu = proc::children_cpu().saturating_sub(cpu0);
    if let Some(e) = first_err {
        ids.iter().for_each(|id| rt.cleanup(id, None));
        bail!("{}: one of {AT_ONCE}: {e}", rt.name);
    }
    Ok(Sample {
        values: vec![("start20", ms(el)), ("start20_cpu", ms(cpu))],
        note: None,
    })
}
