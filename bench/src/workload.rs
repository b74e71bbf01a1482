//! The workload group (metric 4): each command of `workloads` (git, gcc,
//! find | grep, make) on the generated tree, timed by the probe inside each
//! sandbox, container start excluded.

use crate::case::{Ctx, Sample, SampleFn, State};
use crate::exec::exec;
use crate::plan::{Job, Planner};
use crate::workloads;

impl<'a> Planner<'a> {
    // ---- metric 4
    pub(crate) fn workloads(&mut self) {
        let tree = self.ctx.tree.clone();
        let tmp = tree.join("tmp");
        for w in workloads::workloads(&tree) {
            let mut args = vec![
                "time".to_owned(),
                "--cwd".into(),
                tree.display().to_string(),
                "--tmp".into(),
                tmp.display().to_string(),
                "--".into(),
            ];
            args.extend(w.argv.iter().cloned());
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            let argv = self.probe_argv(&refs);
            for i in self.with_codex() {
                let argv = argv.clone();
                let tree = tree.clone();
                let metric = w.metric;
                self.case(i, "", vec![metric], State::Ready, |p, rt| {
                    let launch = p.launch(rt, Job::new(argv, &tree))?;
                    let rt = rt.clone();
                    let l = launch.clone();
                    let f: SampleFn = Box::new(move |ctx: &Ctx| {
                        let id = ctx.id();
                        let out = exec(ctx, &rt, &l, &id, None)?;
                        let ns = crate::parse::probe_elapsed(&out.stdout).map_err(anyhow::Error::msg)?;
                        Ok(Sample::one(metric, ns / 1e6))
                    });
                    Ok((launch, f))
                });
            }
        }
    }
}
