//! The cold start with networking group (metric 2): /bin/true as in the cold
//! start, under claude-shim's network modes and, for the plain runtimes, in a
//! namespace with pasta the harness attaches, timed as a whole.

use std::path::Path;
use std::time::Instant;

use serde_json::json;

use crate::bundle::Net;
use crate::case::{ms, Ctx, Sample, SampleFn, State};
use crate::cold_start::cold_fn;
use crate::exec::{exec, with_pasta};
use crate::plan::{net_annotations, Job, Planner};
use crate::runtimes::Kind;

impl<'a> Planner<'a> {
    // ---- metric 2
    pub(crate) fn cold_start_net(&mut self) {
        let m = || vec!["cold_start_net", "cold_start_net_cpu"];
        for i in self.all() {
            let kind = self.ctx.rts[i].kind;
            match kind {
                Kind::Host => self.case(i, "", m(), State::Ready, |p, rt| {
                    let launch = p.launch(rt, Job::new(vec!["/bin/true".into()], Path::new("/")))?;
                    Ok((launch.clone(), cold_fn(rt.clone(), launch, "cold_start_net")))
                }),
                Kind::Runc | Kind::Crun => self.pasta_case(i, "pasta", m(), false, |_| vec!["/bin/true".into()], None),
                Kind::Runsc => {
                    self.pasta_case(i, "netstack + pasta", m(), false, |_| vec!["/bin/true".into()], None);
                    self.pasta_case(i, "hostinet + pasta", m(), true, |_| vec!["/bin/true".into()], None);
                }
                Kind::ClaudeShim => {
                    for mode in ["none", "allowlist", "public"] {
                        let st = self.shim_net_state();
                        self.case(i, &format!("network {mode}"), m(), st, |p, rt| {
                            let mut job = Job::new(vec!["/bin/true".into()], Path::new("/"));
                            job.annotations = net_annotations(mode, json!({"allow": [], "deny": []}));
                            let launch = p.launch(rt, job)?;
                            Ok((launch.clone(), cold_fn(rt.clone(), launch, "cold_start_net")))
                        });
                    }
                }
                Kind::Bwrap => self.na(i, "", m(), "bwrap --unshare-all leaves only loopback; Claude Code's proxy bridge (socat) is not part of the seed's flags"),
                // Not in all(): srt_elsewhere gives it its n/a rows.
                Kind::Srt | Kind::Codex => {}
                Kind::Sandbox => self.na(i, "", m(), "the shipped policy's own network mode is what the cold start row measures"),
            }
        }
    }

    /// A plain-runtime case in a pasta-attached namespace, timed as a whole
    /// (namespace, pasta, run, teardown), for cold start; `argv` from the port.
    fn pasta_case(
        &mut self,
        i: usize,
        variant: &str,
        metrics: Vec<&'static str>,
        hostinet: bool,
        argv: impl FnOnce(u16) -> Vec<String>,
        tcp_in: Option<u16>,
    ) {
        let st = self.pasta_state();
        let ns_path = self.ctx.work.join("netns").join(format!("n{}", self.cases.len()));
        let metric = metrics[0];
        self.case(i, variant, metrics, st, |p, rt| {
            let mut job = Job::new(argv(tcp_in.unwrap_or(0)), Path::new("/"));
            if rt.kind == Kind::Runsc {
                job.runsc_network = if hostinet { "host" } else { "sandbox" };
            }
            job.net = if hostinet {
                Net::Inherit
            } else {
                Net::Path(ns_path.clone())
            };
            let launch = p.launch(rt, job)?;
            let rt = rt.clone();
            let l = launch.clone();
            let f: SampleFn = Box::new(move |ctx: &Ctx| {
                let id = ctx.id();
                let t0 = Instant::now();
                let (r, pid) = with_pasta(ctx, &ns_path, None, |ns| {
                    exec(ctx, &rt, &l, &id, hostinet.then_some(ns))
                })?;
                let el = t0.elapsed();
                crate::net::reap_pasta(pid);
                let _ = r;
                Ok(Sample::one(metric, ms(el)))
            });
            Ok((launch, f))
        });
    }
}
