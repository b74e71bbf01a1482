//! The syscall group (metric 3): the probe's cost per call of four syscalls,
//! timed inside each sandbox, without a seccomp filter, with the engines'
//! default profile, with claude-shim's agent profile and, for bwrap, with
//! Claude Code's filter.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::Value;

use crate::case::{Ctx, Sample, SampleFn, State};
use crate::exec::exec;
use crate::plan::{Job, Planner, Support};
use crate::runtimes::{Kind, Launch, Runtime};

const SYSCALLS: &[&str] = &[
    "syscall_getppid",
    "syscall_stat",
    "syscall_open_close",
    "syscall_write_devnull",
];

impl<'a> Planner<'a> {
    // ---- metric 3
    pub(crate) fn syscalls(&mut self) {
        let budget = self.ctx.budget_ms.to_string();
        let argv = self.probe_argv(&["syscalls", "--budget-ms", &budget]);
        let default_state = |s: &Support| match &s.default_seccomp {
            Ok(_) => State::Ready,
            Err(e) => State::Missing(e.clone()),
        };
        let ds = self.support.default_seccomp.as_ref().ok().cloned();
        let agent = self.support.agent_seccomp.as_ref().ok().cloned();
        for i in self.with_codex() {
            let kind = self.ctx.rts[i].kind;
            let m = SYSCALLS.to_vec();
            let plain = |p: &mut Self, variant: &str, seccomp: Option<Value>, oci: bool, st: State| {
                let argv = argv.clone();
                let tree = p.ctx.tree.clone();
                p.case(i, variant, m.clone(), st, |p, rt| {
                    // The sandbox refuses / as its writable working directory.
                    // Codex's sandbox makes its working directory writable.
                    let cwd = if matches!(rt.kind, Kind::Sandbox | Kind::Codex) {
                        tree
                    } else {
                        PathBuf::from("/")
                    };
                    let mut job = Job::new(argv, &cwd);
                    let holder = seccomp;
                    job.seccomp = holder.as_ref();
                    job.oci_seccomp = oci;
                    let launch = p.launch(rt, job)?;
                    Ok((launch.clone(), syscalls_fn(rt.clone(), launch)))
                });
            };
            match kind {
                Kind::Host => plain(self, "", None, false, State::Ready),
                // Not in with_codex(): srt_elsewhere gives it its n/a rows.
                Kind::Srt => {}
                Kind::Codex => plain(self, "", None, false, State::Ready),
                Kind::Sandbox => plain(self, "shipped policy", None, false, State::Ready),
                Kind::Bwrap => {
                    plain(self, "no seccomp", None, false, State::Ready);
                    let bpf = self.support.bwrap_bpf.clone();
                    let st = match &bpf {
                        Ok(_) => State::Ready,
                        Err(e) => State::Fails(e.clone()),
                    };
                    let argv = argv.clone();
                    self.case(i, "Claude Code filter", m.clone(), st, |p, rt| {
                        let mut job = Job::new(argv, Path::new("/"));
                        job.bpf = bpf.ok();
                        let launch = p.launch(rt, job)?;
                        Ok((launch.clone(), syscalls_fn(rt.clone(), launch)))
                    });
                }
                Kind::Runc | Kind::Crun | Kind::Runsc | Kind::ClaudeShim => {
                    plain(self, "no seccomp", None, false, State::Ready);
                    let st = default_state(self.support);
                    plain(self, "default seccomp", ds.clone(), kind == Kind::Runsc, st);
                    if kind == Kind::ClaudeShim {
                        let st = match &self.support.agent_seccomp {
                            Ok(_) => State::Ready,
                            Err(e) => State::Pending(e.clone()),
                        };
                        plain(self, "agent seccomp", agent.clone(), false, st);
                    }
                }
            }
        }
    }
}

fn syscalls_fn(rt: Runtime, launch: Launch) -> SampleFn {
    Box::new(move |ctx: &Ctx| {
        let id = ctx.id();
        let out = exec(ctx, &rt, &launch, &id, None)?;
        let lines = crate::parse::probe_syscalls(&out.stdout).map_err(anyhow::Error::msg)?;
        let mut values = Vec::new();
        for m in SYSCALLS {
            let name = &m["syscall_".len()..];
            let v = lines
                .iter()
                .find(|(n, _)| n == name)
                .with_context(|| format!("find {name} in the probe's output"))?;
            values.push((*m, v.1));
        }
        Ok(Sample { values, note: None })
    })
}
