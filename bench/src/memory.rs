//! The memory group (metric 6a): the runtime-side PSS and RSS of one sandbox
//! running sleep, summed over the processes the runtime keeps beside it (its
//! helpers, the harness's pasta), not the container's own (runsc's sentry,
//! which runs the workload, is counted).

use std::collections::HashSet;
use std::fs;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Result};
use serde_json::{json, Value};

use crate::bundle::Net;
use crate::case::{Ctx, Sample, SampleFn, State};
use crate::exec::{hooks_for, run_ok, with_pasta};
use crate::net::NetNs;
use crate::plan::{net_annotations, Job, Planner};
use crate::proc;
use crate::runtimes::{Kind, Launch, Runtime};

impl<'a> Planner<'a> {
    // ---- metric 6a
    pub(crate) fn memory(&mut self) {
        let m = || vec!["memory_pss", "memory_rss"];
        let sleep = vec!["/usr/bin/sleep".to_owned(), "600".to_owned()];
        for i in self.all() {
            let kind = self.ctx.rts[i].kind;
            match kind {
                Kind::Host => self.na(i, "", m(), "no runtime: nothing runs beside the workload"),
                // Not in all(): srt_elsewhere gives it its n/a rows.
                Kind::Srt | Kind::Codex => {}
                Kind::Sandbox => self.na(i, "", m(), "a foreground verb; see the claude-shim bundle rows"),
                Kind::Bwrap => {
                    let argv = sleep.clone();
                    self.case(i, "", m(), State::Ready, |p, rt| {
                        let launch = p.launch(rt, Job::new(argv, Path::new("/")))?;
                        let rt = rt.clone();
                        let l = launch.clone();
                        let f: SampleFn = Box::new(move |ctx: &Ctx| bwrap_memory(ctx, &rt, &l));
                        Ok((launch, f))
                    });
                }
                Kind::Runc | Kind::Crun | Kind::Runsc | Kind::ClaudeShim => {
                    let argv = sleep.clone();
                    self.case(i, "", m(), State::Ready, |p, rt| {
                        let launch = p.launch(rt, Job::new(argv, Path::new("/")))?;
                        let rt = rt.clone();
                        let l = launch.clone();
                        let f: SampleFn = Box::new(move |ctx: &Ctx| oci_memory(ctx, &rt, &l, None));
                        Ok((launch, f))
                    });
                    if kind == Kind::ClaudeShim {
                        for mode in ["none", "allowlist", "public"] {
                            let argv = sleep.clone();
                            let st = self.shim_net_state();
                            self.case(i, &format!("network {mode}"), m(), st, |p, rt| {
                                let mut job = Job::new(argv, Path::new("/"));
                                job.annotations = net_annotations(mode, json!({"allow": [], "deny": []}));
                                let launch = p.launch(rt, job)?;
                                let rt = rt.clone();
                                let l = launch.clone();
                                let f: SampleFn = Box::new(move |ctx: &Ctx| oci_memory(ctx, &rt, &l, None));
                                Ok((launch, f))
                            });
                        }
                    } else {
                        let variants: &[(&str, bool)] = if kind == Kind::Runsc {
                            &[("hostinet + pasta", true)]
                        } else {
                            &[("pasta", false)]
                        };
                        for (variant, hostinet) in variants {
                            let argv = sleep.clone();
                            let st = self.pasta_state();
                            let ns_path = self.ctx.work.join("netns").join(format!("n{}", self.cases.len()));
                            let hostinet = *hostinet;
                            self.case(i, variant, m(), st, |p, rt| {
                                let mut job = Job::new(argv, Path::new("/"));
                                if rt.kind == Kind::Runsc {
                                    job.runsc_network = "host";
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
                                    oci_memory(ctx, &rt, &l, Some((ns_path.as_path(), hostinet)))
                                });
                                Ok((launch, f))
                            });
                        }
                    }
                }
            }
        }
    }
}

struct Counted {
    pid: i32,
    name: String,
    mem: crate::parse::Memory,
}

fn summed(procs: &[Counted]) -> Sample {
    let pss: u64 = procs.iter().map(|p| p.mem.pss_kib).sum();
    let rss: u64 = procs.iter().map(|p| p.mem.rss_kib).sum();
    let note = if procs.is_empty() {
        "no runtime-side process".to_owned()
    } else {
        procs
            .iter()
            .map(|p| {
                format!(
                    "{} {} (rss {} KiB, pss {} KiB)",
                    p.pid, p.name, p.mem.rss_kib, p.mem.pss_kib
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    Sample {
        values: vec![("memory_pss", pss as f64 / 1024.0), ("memory_rss", rss as f64 / 1024.0)],
        note: Some(note),
    }
}

fn helper_pids(rt: &Runtime, id: &str) -> Vec<i32> {
    let meta = rt.root.join(".claude-shim").join(id).join("meta.json");
    let Ok(raw) = fs::read(&meta) else {
        return Vec::new();
    };
    let v: Value = serde_json::from_slice(&raw).unwrap_or_default();
    v["helpers"]
        .as_object()
        .map(|m| m.values().filter_map(|p| p.as_i64()).map(|p| p as i32).collect())
        .unwrap_or_default()
}

fn oci_memory(ctx: &Ctx, rt: &Runtime, launch: &Launch, pasta: Option<(&Path, bool)>) -> Result<Sample> {
    let before: HashSet<i32> = proc::pids().into_iter().collect();
    let id = ctx.id();
    let measure = |ns: Option<&NetNs>, pasta_pid: Option<i32>| -> Result<Vec<Counted>> {
        let hooks = hooks_for(rt, launch, ns)?;
        run_ok(ctx, rt, rt.create_command(launch, &id), &hooks, &id)?;
        run_ok(ctx, rt, rt.verb(launch, &["start"], &id), &hooks, &id)?;
        std::thread::sleep(Duration::from_millis(300));
        let state = ctx.runner.run(rt.verb(launch, &["state"], &id), &hooks, ctx.timeout)?;
        let init = serde_json::from_str::<Value>(&state.stdout)
            .ok()
            .and_then(|v| v["pid"].as_i64())
            .map(|p| p as i32);
        // runsc's sentry runs the workload: its pid namespace is not the container's to exclude.
        let container_ns = if rt.kind == Kind::Runsc {
            None
        } else {
            init.and_then(proc::pid_ns)
        };
        let mut extra: HashSet<i32> = HashSet::new();
        for h in helper_pids(rt, &id).into_iter().chain(pasta_pid) {
            extra.extend(proc::tree(h));
        }
        let markers = [rt.root.display().to_string(), id.clone()];
        let mut out = Vec::new();
        for pid in proc::pids() {
            if before.contains(&pid) && !extra.contains(&pid) {
                continue;
            }
            let cl = proc::cmdline(pid);
            if !(extra.contains(&pid) || markers.iter().any(|m| cl.contains(m.as_str()))) {
                continue;
            }
            if container_ns.is_some() && proc::pid_ns(pid) == container_ns {
                continue;
            }
            if let Some(mem) = proc::smaps(pid) {
                // runsc re-executes itself (comm "exe"); argv[0] says runsc-sandbox or runsc-gofer.
                let argv0 = cl.split(' ').next().unwrap_or_default();
                let name = argv0
                    .rsplit('/')
                    .next()
                    .filter(|n| !n.is_empty())
                    .map_or_else(|| proc::comm(pid), str::to_owned);
                out.push(Counted { pid, name, mem });
            }
        }
        Ok(out)
    };
    let result = match pasta {
        None => {
            let r = measure(None, None);
            rt.cleanup(&id, None);
            r
        }
        Some((ns_path, hostinet)) => {
            let (r, pid) = with_pasta(ctx, ns_path, None, |ns| {
                let pasta_pid = fs::read_to_string(ns_path.with_extension("pasta.pid"))
                    .ok()
                    .and_then(|s| s.trim().parse().ok());
                let r = measure(hostinet.then_some(ns), pasta_pid);
                rt.cleanup(&id, hostinet.then_some(&ns.fd));
                Ok(r)
            })?;
            crate::net::reap_pasta(pid);
            r
        }
    };
    Ok(summed(&result?))
}

fn bwrap_memory(ctx: &Ctx, rt: &Runtime, launch: &Launch) -> Result<Sample> {
    let hooks = hooks_for(rt, launch, None)?;
    let running = ctx
        .runner
        .spawn(rt.run_command(launch, "", &ctx.bwrap_flags), &hooks, ctx.timeout)?;
    std::thread::sleep(Duration::from_millis(300));
    let procs: Vec<Counted> = proc::tree(running.pid())
        .into_iter()
        .filter(|p| proc::comm(*p) == "bwrap")
        .filter_map(|pid| {
            Some(Counted {
                pid,
                name: "bwrap".into(),
                mem: proc::smaps(pid)?,
            })
        })
        .collect();
    let alive = procs.len();
    running.kill();
    if alive == 0 {
        bail!("bwrap exited before it could be measured");
    }
    Ok(summed(&procs))
}
