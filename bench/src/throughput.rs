//! The throughput group (metric 5): one TCP transfer container -> host (to
//! the veth peer) and host -> container (through pasta's forwarded port) over
//! each runtime's network, and the host's own floor without a sandbox.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::json;

use crate::bundle::Net;
use crate::case::{clone_state, Ctx, Sample, SampleFn, State};
use crate::exec::{exec, hooks_for, with_pasta};
use crate::net::free_port;
use crate::plan::{net_annotations, Job, Planner};
use crate::probe;
use crate::runtimes::{Kind, Launch, Runtime};

impl<'a> Planner<'a> {
    // ---- metric 5
    pub(crate) fn throughput(&mut self) {
        let peer_state = match &self.ctx.peer {
            Ok(_) => State::Ready,
            Err(e) => State::Fails(format!("set up the throughput peer: {e}")),
        };
        let bytes = self.ctx.bytes.to_string();
        let target = match &self.ctx.peer {
            Ok(p) => format!("{}:{}", p.peer_ip, self.ctx.peer_port),
            Err(_) => "0.0.0.0:0".into(),
        };
        for i in self.all() {
            let kind = self.ctx.rts[i].kind;
            match kind {
                Kind::Host => {
                    let st = clone_state(&peer_state);
                    let t = target.clone();
                    self.case(i, "", vec!["tput_c2h"], st, |_, rt| {
                        let f: SampleFn = Box::new(move |ctx: &Ctx| {
                            let (b, ns) = probe::source(&t, ctx.bytes, None, Duration::from_secs(5))?;
                            Ok(Sample::one("tput_c2h", gbit(b, ns)))
                        });
                        Ok((host_launch(rt), f))
                    });
                    self.case(i, "", vec!["tput_h2c"], State::Ready, |_, rt| {
                        let f: SampleFn = Box::new(move |ctx: &Ctx| {
                            let (_, addr) = ctx.host_sink.as_ref().context("start the loopback sink")?;
                            let (b, ns) = probe::source(addr, ctx.bytes, None, Duration::from_secs(5))?;
                            Ok(Sample::one("tput_h2c", gbit(b, ns)))
                        });
                        Ok((host_launch(rt), f))
                    });
                }
                Kind::Runc | Kind::Crun | Kind::Runsc => {
                    let variants: &[(&str, bool)] = if kind == Kind::Runsc {
                        &[("netstack + pasta", false), ("hostinet + pasta", true)]
                    } else {
                        &[("pasta", false)]
                    };
                    for (variant, hostinet) in variants {
                        let src = self.probe_argv(&["source", "--connect", &target, "--bytes", &bytes]);
                        self.tput_pasta_c2h(i, variant, *hostinet, src, &peer_state);
                        self.tput_pasta_h2c(i, variant, *hostinet);
                    }
                }
                Kind::ClaudeShim => {
                    for mode in ["none", "allowlist", "public"] {
                        let variant = format!("network {mode}");
                        if mode == "none" {
                            self.na(i, &variant, vec!["tput_c2h", "tput_h2c"], "no network in this mode");
                            continue;
                        }
                        let mut args = vec!["source", "--connect", &target, "--bytes", &bytes];
                        if mode == "allowlist" {
                            args.extend(["--proxy", "127.0.0.1:3128"]);
                        }
                        let argv = self.probe_argv(&args);
                        let st = match (self.shim_net_state(), clone_state(&peer_state)) {
                            (State::Ready, s) => s,
                            (s, _) => s,
                        };
                        let t = target.clone();
                        self.case(i, &variant, vec!["tput_c2h"], st, |p, rt| {
                            let mut job = Job::new(argv, Path::new("/"));
                            let cidr = format!(
                                "{}/32:{}",
                                t.rsplit_once(':').map_or("", |x| x.0),
                                t.rsplit_once(':').map_or("", |x| x.1)
                            );
                            job.annotations =
                                net_annotations(mode, json!({"allow": [t], "deny": [], "allow_cidrs": [cidr]}));
                            let launch = p.launch(rt, job)?;
                            let rt = rt.clone();
                            let l = launch.clone();
                            let f: SampleFn = Box::new(move |ctx: &Ctx| {
                                let id = ctx.id();
                                let out = exec(ctx, &rt, &l, &id, None)?;
                                let (b, ns) = crate::parse::probe_transfer(&out.stdout).map_err(anyhow::Error::msg)?;
                                Ok(Sample::one("tput_c2h", gbit(b, ns)))
                            });
                            Ok((launch, f))
                        });
                        let why = format!("claude-shim's {mode} mode forwards no inbound port to the sandbox");
                        self.na(i, &variant, vec!["tput_h2c"], &why);
                    }
                }
                Kind::Bwrap => self.na(
                    i,
                    "",
                    vec!["tput_c2h", "tput_h2c"],
                    "bwrap --unshare-all leaves only loopback",
                ),
                // Not in all(): srt_elsewhere gives it its n/a rows.
                Kind::Srt | Kind::Codex => {}
                Kind::Sandbox => self.na(
                    i,
                    "",
                    vec!["tput_c2h", "tput_h2c"],
                    "measured on the bundle rows of each network mode",
                ),
            }
        }
    }

    fn tput_pasta_c2h(&mut self, i: usize, variant: &str, hostinet: bool, argv: Vec<String>, peer: &State) {
        let st = match (self.pasta_state(), clone_state(peer)) {
            (State::Ready, s) => s,
            (s, _) => s,
        };
        let ns_path = self.ctx.work.join("netns").join(format!("n{}", self.cases.len()));
        self.case(i, variant, vec!["tput_c2h"], st, |p, rt| {
            let mut job = Job::new(argv, Path::new("/"));
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
                let (out, pid) = with_pasta(ctx, &ns_path, None, |ns| {
                    exec(ctx, &rt, &l, &id, hostinet.then_some(ns))
                })?;
                crate::net::reap_pasta(pid);
                let (b, ns) = crate::parse::probe_transfer(&out.stdout).map_err(anyhow::Error::msg)?;
                Ok(Sample::one("tput_c2h", gbit(b, ns)))
            });
            Ok((launch, f))
        });
    }

    fn tput_pasta_h2c(&mut self, i: usize, variant: &str, hostinet: bool) {
        let st = self.pasta_state();
        let ns_path = self.ctx.work.join("netns").join(format!("n{}", self.cases.len()));
        let port = free_port();
        let argv = self.probe_argv(&["sink", "--listen", &format!("0.0.0.0:{port}"), "--once"]);
        self.case(i, variant, vec!["tput_h2c"], st, |p, rt| {
            let mut job = Job::new(argv, Path::new("/"));
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
                let (v, pid) = with_pasta(ctx, &ns_path, Some(port), |ns| {
                    let hooks = hooks_for(&rt, &l, hostinet.then_some(ns))?;
                    let mut running =
                        ctx.runner
                            .spawn(rt.run_command(&l, &id, &ctx.bwrap_flags), &hooks, ctx.timeout)?;
                    // Until the sink inside listens, pasta's forwarded port accepts and closes; a
                    // container that exited will never listen, and its own error is the reason.
                    let deadline = Instant::now() + Duration::from_secs(20);
                    let sent = loop {
                        let r = probe::source(
                            &format!("127.0.0.1:{port}"),
                            ctx.bytes,
                            None,
                            Duration::from_millis(200),
                        );
                        if r.is_ok() || Instant::now() > deadline || running.exited() {
                            break r;
                        }
                    };
                    match sent {
                        Ok(v) => {
                            let f = running.wait()?;
                            if !f.status.success() {
                                rt.cleanup(&id, hooks.netns.as_ref());
                                bail!("{}: {}", rt.name, f.why());
                            }
                            Ok(v)
                        }
                        Err(e) if running.exited() => {
                            let f = running.wait()?;
                            rt.cleanup(&id, hooks.netns.as_ref());
                            if !f.status.success() {
                                bail!("{}: {}", rt.name, f.why());
                            }
                            Err(e)
                        }
                        Err(e) => {
                            running.kill();
                            rt.cleanup(&id, hooks.netns.as_ref());
                            Err(e)
                        }
                    }
                })?;
                crate::net::reap_pasta(pid);
                Ok(Sample::one("tput_h2c", gbit(v.0, v.1)))
            });
            Ok((launch, f))
        });
    }
}

fn host_launch(_rt: &Runtime) -> Launch {
    Launch::Argv {
        argv: vec!["(in the harness)".into()],
        cwd: "/".into(),
        bpf: None,
    }
}

fn gbit(bytes: u64, ns: u64) -> f64 {
    if ns == 0 {
        return f64::NAN;
    }
    bytes as f64 * 8.0 / ns as f64
}
