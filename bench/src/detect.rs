//! Which runtimes this machine has and whether each runs here: a runtime row
//! for every runtime `--runtimes` can name (crun once more with cgroup2
//! hidden when it fails here, runsc once per platform), the tools' versions,
//! and what the planner needs to know beyond them (claude-shim's network
//! modes, the seccomp profiles, bwrap's filter). First step of the run.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::json;

use crate::bundle::{self, Layout, Variant};
use crate::case::err_text;
use crate::plan::Support;
use crate::proc::{self, Runner};
use crate::runtimes::{self, Availability, Kind, Launch, Runtime, ToolInfo};
use crate::seccomp;
use crate::settings::Settings;

/// The runtimes `--runtimes` selects.
pub const RUNTIMES: &[&str] = &[
    "host",
    "bwrap",
    "srt",
    "codex",
    "runc",
    "crun",
    "runsc",
    "claude-shim",
    "sandbox",
];

fn preflight_true(
    runner: &Runner,
    rt: &Runtime,
    work: &Path,
    layout: &Layout,
    timeout: Duration,
) -> Result<(), String> {
    let dir = work.join("bundles").join("preflight");
    bundle::write(&dir, layout, &Variant::new(vec!["/bin/true".into()])).map_err(|e| err_text(&e))?;
    let launch = Launch::Bundle {
        dir,
        runsc_network: "none",
        oci_seccomp: false,
    };
    let id = format!("cbench-{}-preflight", std::process::id());
    let f = runner
        .run(rt.run_command(&launch, &id, &[]), &rt.hooks(), timeout)
        .map_err(|e| err_text(&e))?;
    if f.status.success() {
        Ok(())
    } else {
        rt.cleanup(&id, None);
        Err(f.why())
    }
}

fn selected(s: &Settings, name: &str) -> bool {
    s.runtimes.as_ref().is_none_or(|l| l.iter().any(|x| x == name))
}

pub(crate) fn detect(
    s: &Settings,
    runner: &Runner,
    work: &Path,
    layout: &Layout,
) -> (Vec<Runtime>, Vec<ToolInfo>, Support) {
    let state = work.join("state");
    let mk = |kind: Kind, name: &str, path: Option<PathBuf>, missing: &str| Runtime {
        kind,
        name: name.to_owned(),
        availability: match (&path, selected(s, runtime_key(kind))) {
            (_, false) => Availability::NotSelected,
            (Some(_), true) => Availability::Present,
            (None, true) => Availability::Missing(missing.to_owned()),
        },
        path,
        note: None,
        root: state.join(name.replace([' ', '(', ')'], "")),
        hide_cgroup2: false,
        platform: None,
    };
    let mut tools = Vec::new();
    let mut rts = vec![mk(Kind::Host, "host", Some("/".into()), "")];

    let bwrap = runtimes::find("bwrap");
    tools.push(runtimes::tool_info("bwrap", bwrap.as_deref(), &["--version"]));
    rts.push(mk(
        Kind::Bwrap,
        "bwrap",
        bwrap,
        "bwrap is not installed (apt-get install bubblewrap)",
    ));

    let runc = runtimes::find("runc");
    tools.push(runtimes::tool_info("runc", runc.as_deref(), &["--version"]));
    rts.push(mk(
        Kind::Runc,
        "runc",
        runc,
        "runc is not installed (apt-get install runc)",
    ));

    let crun = runtimes::find("crun");
    tools.push(runtimes::tool_info("crun", crun.as_deref(), &["--version"]));
    let mut c = mk(Kind::Crun, "crun", crun, "crun is not installed (apt-get install crun)");
    if c.present() {
        if let Err(why) = preflight_true(runner, &c, work, layout, s.timeout) {
            c.availability = Availability::Fails(why.clone());
            let mut hidden = c.clone();
            hidden.name = "crun (cgroup2 hidden)".into();
            hidden.root = state.join("crun-hidden");
            hidden.hide_cgroup2 = true;
            hidden.availability = Availability::Present;
            match preflight_true(runner, &hidden, work, layout, s.timeout) {
                Ok(()) => {
                    hidden.note = Some(format!(
                        "crun fails on this machine ({why}); this row runs the same crun in a private mount namespace \
                         where /sys/fs/cgroup/unified is unmounted (made in the child before exec, timed)"
                    ));
                }
                Err(e) => hidden.availability = Availability::Fails(e),
            }
            rts.push(c);
            rts.push(hidden);
        } else {
            rts.push(c);
        }
    } else {
        rts.push(c);
    }

    let runsc = runtimes::find("runsc");
    tools.push(runtimes::tool_info("runsc", runsc.as_deref(), &["--version"]));
    let default_platform = runsc
        .as_deref()
        .and_then(|p| proc::capture(p, &["flags"]))
        .and_then(|(_, out)| crate::parse::runsc_default_platform(&out));
    let platforms = if s.runsc_platforms.is_empty() {
        vec![default_platform.clone().unwrap_or_else(|| "ptrace".into())]
    } else {
        s.runsc_platforms.clone()
    };
    for p in platforms {
        let mut r = mk(
            Kind::Runsc,
            &format!("runsc ({p})"),
            runsc.clone(),
            "runsc is not installed (apt-get install runsc)",
        );
        r.note = Some(format!(
            "platform {p} (runsc's default here: {}); runsc's `create` and `run` chown the stdin, stdout and \
             stderr they are given to nobody:nogroup (Debian's 0.0~20221219 build; `start`, `delete` and \
             `--version` do not), so every runtime gets pipes and files of the bench's own, never the host's \
             /dev/null or terminal",
            default_platform.as_deref().unwrap_or("unknown")
        ));
        r.platform = Some(p);
        rts.push(r);
    }

    let shim_path = s.claude_shim.is_file().then(|| s.claude_shim.clone());
    tools.push(runtimes::tool_info("claude-shim", shim_path.as_deref(), &["--version"]));
    let missing_shim = format!(
        "{} is missing (cargo build --release, or --claude-shim PATH)",
        s.claude_shim.display()
    );
    rts.push(mk(Kind::ClaudeShim, "claude-shim", shim_path.clone(), &missing_shim));
    let mut sandbox = mk(Kind::Sandbox, "claude-shim sandbox", shim_path.clone(), &missing_shim);
    if sandbox.present() {
        let ok = shim_path
            .as_deref()
            .and_then(|p| proc::capture(p, &["sandbox", "--help"]))
            .is_some_and(|(ok, _)| ok);
        if !ok {
            sandbox.availability = Availability::Missing(
                "this claude-shim has no `sandbox` verb (`claude-shim sandbox --help` fails): not landed yet".into(),
            );
        }
    }
    rts.push(sandbox);

    let srt = runtimes::find("srt");
    tools.push(runtimes::tool_info("srt", srt.as_deref(), &["--version"]));
    let mut srt = mk(
        Kind::Srt,
        "srt",
        srt,
        "srt is not installed (npm install -g @anthropic-ai/sandbox-runtime)",
    );
    if srt.present() {
        if let Err(e) = write_srt_settings(&srt) {
            srt.availability = Availability::Fails(err_text(&e));
        }
    }
    rts.push(srt);

    let codex = runtimes::find("codex");
    tools.push(runtimes::tool_info("codex", codex.as_deref(), &["--version"]));
    rts.push(mk(
        Kind::Codex,
        "codex sandbox",
        codex,
        "codex is not installed (npm install -g @openai/codex)",
    ));

    let pasta = runtimes::find("pasta");
    tools.push(runtimes::tool_info("pasta", pasta.as_deref(), &["--version"]));
    for (name, args) in [
        ("gcc", &["--version"][..]),
        ("git", &["--version"]),
        ("make", &["--version"]),
    ] {
        tools.push(runtimes::tool_info(name, runtimes::find(name).as_deref(), args));
    }

    let shim_net = match shim_path.as_deref() {
        None => Err(missing_shim.clone()),
        Some(p) => {
            let helper = proc::capture(p, &["__network", "--help"]).is_some_and(|(ok, _)| ok);
            let features =
                proc::capture(p, &["features"]).is_some_and(|(_, out)| out.contains("run.claude-shim.network"));
            if helper || features {
                Ok(())
            } else {
                Err("this claude-shim has no network modes (no `__network` helper, no run.claude-shim.network in its features): not landed yet".into())
            }
        }
    };
    let default_seccomp = seccomp::load_containers_default(bundle::CAPS)
        .map_err(|e| format!("{} (apt-get install golang-github-containers-common)", err_text(&e)));
    let agent_seccomp = if s.agent_seccomp.is_file() {
        seccomp::load_oci(&s.agent_seccomp).map_err(|e| err_text(&e))
    } else {
        Err(format!(
            "{} is not in this checkout yet (the policy crate generates it)",
            s.agent_seccomp.display()
        ))
    };
    let bpf = work.join("claude-code-filter.bpf");
    let bwrap_bpf = seccomp::write_bwrap_bpf(&bpf).map(|_| bpf).map_err(|e| err_text(&e));
    let _ = pasta.clone();
    (
        rts,
        tools,
        Support {
            shim_net,
            default_seccomp,
            agent_seccomp,
            bwrap_bpf,
        },
    )
}

/// srt's settings: one allowed domain (its proxies start as they would for
/// Claude Code), writes to the working directory only.
fn write_srt_settings(rt: &Runtime) -> Result<()> {
    fs::create_dir_all(&rt.root).with_context(|| format!("create {}", rt.root.display()))?;
    let settings = json!({
        "network": { "allowedDomains": ["api.anthropic.com"], "deniedDomains": [] },
        "filesystem": { "denyRead": ["~/.ssh"], "allowWrite": ["."], "denyWrite": [] }
    });
    let p = rt.srt_settings();
    fs::write(&p, serde_json::to_vec_pretty(&settings)?).with_context(|| format!("write {}", p.display()))
}

fn runtime_key(kind: Kind) -> &'static str {
    match kind {
        Kind::Host => "host",
        Kind::Bwrap => "bwrap",
        Kind::Runc => "runc",
        Kind::Crun => "crun",
        Kind::Runsc => "runsc",
        Kind::ClaudeShim => "claude-shim",
        Kind::Sandbox => "sandbox",
        Kind::Srt => "srt",
        Kind::Codex => "codex",
    }
}
