//! The Claude Code row: the time of one Bash tool call of the real `claude`
//! CLI against a mock of the Messages API (the tests' mock, shared), for
//! Claude Code unsandboxed, with its own sandbox (`sandbox.enabled`: bwrap,
//! socat and ripgrep), and under both modes of `claude-shim claude`.
//!
//! A call is timed from the mock's side: from the last byte of the
//! `tool_use` answer to the arrival of the request carrying its
//! `tool_result`. That is everything Claude Code does for the call (start
//! the shell, in a sandbox or not, run the command, read its output, send the
//! next request) and nothing of its own start-up, which differs between the
//! modes but is paid once per session, not per call.
//!
//! Each sample is one `claude -p` session of one check call and `CALLS`
//! calls of `true`. The check reads the mount namespace: unsandboxed it must
//! be the harness's own, in every other variant a different one, so a
//! variant that silently ran outside its sandbox fails instead of looking
//! fast.
//!
//! The group's plan (`Planner::claude`, over `plan`) is here too, beside the
//! session it samples.

use std::fs;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use claude_shim_mock_api::MockApi;

use crate::case::{err_text, Ctx, Sample, SampleFn, State};
use crate::plan::{gate, Planner};
use crate::proc::{self, Hooks};
use crate::results::{Row, TargetResult};
use crate::runtimes::{self, Kind, Runtime};
use crate::targets::{figure, target};

pub const METRIC: &str = "claude_bash_call";

/// Timed calls per session.
const CALLS: usize = 5;

/// The check call's command.
const CHECK: &str = "readlink /proc/self/ns/mnt";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Unsandboxed,
    /// Claude Code's own sandbox: `sandbox.enabled` in its settings.
    OwnSandbox,
    /// `claude-shim claude`: the whole agent in the sandbox.
    Whole,
    /// `claude-shim claude --per-command`: each Bash call in a sandbox.
    PerCommand,
}

impl Mode {
    pub const ALL: [Mode; 4] = [Mode::Unsandboxed, Mode::OwnSandbox, Mode::Whole, Mode::PerCommand];

    /// The row's runtime: the host for the floor, srt's row for Claude
    /// Code's own sandbox (srt is that sandbox as a package), `sandbox` for
    /// claude-shim's modes.
    pub fn kind(self) -> Kind {
        match self {
            Mode::Unsandboxed => Kind::Host,
            Mode::OwnSandbox => Kind::Srt,
            Mode::Whole | Mode::PerCommand => Kind::Sandbox,
        }
    }

    /// The row's variant, which the targets look rows up by.
    pub fn variant(self) -> &'static str {
        match self {
            Mode::Unsandboxed => "Claude Code",
            Mode::OwnSandbox => "Claude Code sandbox.enabled",
            Mode::Whole => "claude-shim claude",
            Mode::PerCommand => "claude-shim claude --per-command",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Mode::Unsandboxed => "Claude Code, unsandboxed",
            Mode::OwnSandbox => "Claude Code's own sandbox (sandbox.enabled)",
            Mode::Whole => "claude-shim claude (whole agent)",
            Mode::PerCommand => "claude-shim claude --per-command",
        }
    }

    fn slug(self) -> &'static str {
        match self {
            Mode::Unsandboxed => "host",
            Mode::OwnSandbox => "own-sandbox",
            Mode::Whole => "whole",
            Mode::PerCommand => "per-command",
        }
    }
}

/// Why a mode cannot run here, if it cannot (claude-shim's own presence is
/// its runtime row's availability).
pub fn missing(mode: Mode) -> Option<String> {
    if runtimes::find("claude").is_none() {
        return Some("claude is not installed (npm install -g @anthropic-ai/claude-code)".into());
    }
    match mode {
        Mode::OwnSandbox => ["bwrap", "socat", "rg"]
            .into_iter()
            .find(|t| runtimes::find(t).is_none())
            .map(|t| format!("Claude Code's sandbox needs {t} (apt-get install bubblewrap socat ripgrep)")),
        _ => None,
    }
}

/// One `claude -p` session of the mode, against the mock at `url`.
fn session(mode: Mode, claude: &Path, rt: &Runtime, home: &Path, proj: &Path, url: &str) -> Result<Command> {
    let mut c = match mode {
        Mode::Unsandboxed | Mode::OwnSandbox => Command::new(claude),
        Mode::Whole | Mode::PerCommand => {
            let mut c = Command::new(rt.path.as_ref().context("claude-shim's path")?);
            c.arg("--root").arg(&rt.root).arg("claude");
            if mode == Mode::PerCommand {
                c.arg("--per-command");
            }
            c.arg("--");
            c
        }
    };
    c.args(["-p", "run the commands", "--allowedTools", "Bash"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("ANTHROPIC_BASE_URL", url)
        .env("ANTHROPIC_API_KEY", "sk-ant-bench-placeholder")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .current_dir(proj)
        .stdin(crate::proc::empty_stdin()?);
    Ok(c)
}

/// A session runner for one mode: its own home and project under the
/// harness's work directory, and its own mock, kept across samples; and the
/// command line a sample runs, for the JSON.
pub fn case(mode: Mode, rt: Runtime, work: &Path) -> Result<(SampleFn, String)> {
    let base = work.join("claude").join(mode.slug());
    let _ = fs::remove_dir_all(&base);
    let home = base.join("home");
    let proj = base.join("proj");
    for d in [home.join(".claude"), proj.join(".git")] {
        fs::create_dir_all(&d).with_context(|| format!("create {}", d.display()))?;
    }
    let settings = if mode == Mode::OwnSandbox {
        r#"{"sandbox": {"enabled": true, "autoAllowBashIfSandboxed": true}}"#
    } else {
        "{}"
    };
    fs::write(home.join(".claude/settings.json"), settings)?;
    let host_mnt = fs::read_link("/proc/self/ns/mnt").context("read the harness's mount namespace")?;
    let claude = runtimes::find("claude").context("find claude")?;
    let mock = MockApi::start(&[]);
    let line = proc::command_line(&session(mode, &claude, &rt, &home, &proj, &mock.url())?);
    let run = Box::new(move |ctx: &Ctx| {
        let first = mock.call_times().len();
        let results_before = mock.tool_results().len();
        let mut queue = vec![CHECK];
        queue.extend(std::iter::repeat_n("true", CALLS));
        mock.queue(&queue);
        let c = session(mode, &claude, &rt, &home, &proj, &mock.url())?;
        let f = ctx.runner.run(c, &Hooks::default(), ctx.timeout)?;
        if !f.status.success() {
            bail!("{}: {}", mode.label(), f.why());
        }
        let results = mock.tool_results();
        let check = results
            .get(results_before)
            .with_context(|| format!("{}: no tool_result of the check call", mode.label()))?;
        check_namespace(mode, check.trim(), &host_mnt.to_string_lossy())?;
        let times = mock.call_times();
        let calls = &times[first..];
        if calls.len() != CALLS + 1 || calls.iter().any(Option::is_none) {
            bail!(
                "{}: {} of {} Bash calls came back",
                mode.label(),
                calls.iter().flatten().count(),
                CALLS + 1
            );
        }
        Ok(Sample {
            values: calls[1..]
                .iter()
                .flatten()
                .map(|d| (METRIC, d.as_secs_f64() * 1000.0))
                .collect(),
            note: None,
        })
    });
    Ok((run, line))
}

impl<'a> Planner<'a> {
    /// The Claude Code row: one case per mode, on the runtime row of its
    /// kind. Claude Code's own sandbox sits on srt's row but needs only
    /// claude, bwrap, socat and ripgrep, not the srt package.
    pub(crate) fn claude(&mut self) {
        for mode in Mode::ALL {
            let Some(i) = self.ctx.rts.iter().position(|r| r.kind == mode.kind()) else {
                continue;
            };
            let rt = self.ctx.rts[i].clone();
            let state = match (gate(&rt), missing(mode)) {
                (State::Skipped(r), _) => State::Skipped(r),
                (_, Some(why)) => State::Missing(why),
                (_, None) if mode == Mode::OwnSandbox => State::Ready,
                (other, None) => other,
            };
            let (state, run, command) = match state {
                State::Ready => match case(mode, rt, &self.ctx.work) {
                    Ok((f, line)) => (State::Ready, Some(f), Some(line)),
                    Err(e) => (State::Fails(err_text(&e)), None, None),
                },
                other => (other, None, None),
            };
            self.push(mode.label().into(), i, mode.variant(), vec![METRIC], state, run);
            if let Some(c) = self.cases.last_mut() {
                c.command = command;
            }
        }
        for i in 0..self.ctx.rts.len() {
            self.na_unless_measured(
                i,
                METRIC,
                "Claude Code is compared unsandboxed, in its own sandbox and under `claude-shim claude`",
            );
        }
    }
}

/// The issues' targets for each claude-shim mode, as overheads per call over
/// unsandboxed Claude Code. `--per-command` (issue 27): at most 2 ms, and at
/// most 0.1x the overhead of Claude Code's own sandbox; the whole agent
/// (issue 14): at most 0.5x that overhead. Printed, never asserted.
pub fn targets(rows: &[Row]) -> Vec<TargetResult> {
    let call = |kind, variant: Option<&str>| figure(rows, METRIC, kind, variant);
    let host = call(Kind::Host, None);
    let over = |v: Result<(f64, String), String>| -> Result<(f64, String), String> {
        let (h, _) = host.clone()?;
        v.map(|(x, label)| (x - h, label))
    };
    let own = over(call(Kind::Srt, Some(Mode::OwnSandbox.variant())));
    let mode = |m: Mode| over(call(Kind::Sandbox, Some(m.variant())));
    let per_command = Mode::PerCommand.variant();
    vec![
        target(
            rows,
            format!("Bash call overhead of `{per_command}` over unsandboxed Claude Code <= 2 ms"),
            "ms",
            mode(Mode::PerCommand),
            Ok((2.0, "2 ms".into())),
            1.0,
        ),
        target(
            rows,
            format!(
                "Bash call overhead of `{per_command}` over unsandboxed Claude Code <= 0.1x that of Claude Code's own sandbox"
            ),
            "ms",
            mode(Mode::PerCommand),
            own.clone(),
            0.1,
        ),
        target(
            rows,
            format!(
                "Bash call overhead of `{}` over unsandboxed Claude Code <= 0.5x that of Claude Code's own sandbox",
                Mode::Whole.variant()
            ),
            "ms",
            mode(Mode::Whole),
            own,
            0.5,
        ),
    ]
}

/// The check call ran where the mode says: on the host's mount namespace
/// unsandboxed, in another one otherwise.
fn check_namespace(mode: Mode, seen: &str, host: &str) -> Result<()> {
    if !seen.starts_with("mnt:[") {
        bail!(
            "{}: the check call printed {seen:?}, not a mount namespace",
            mode.label()
        );
    }
    match (mode == Mode::Unsandboxed, seen == host) {
        (true, false) => bail!("{}: ran in {seen}, not the host's {host}", mode.label()),
        (false, true) => bail!(
            "{}: the Bash call ran on the host's mount namespace, outside any sandbox",
            mode.label()
        ),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sandboxed_mode_on_the_hosts_namespace_fails() {
        let host = "mnt:[4026531832]";
        assert!(check_namespace(Mode::Unsandboxed, host, host).is_ok());
        assert!(check_namespace(Mode::PerCommand, "mnt:[4026532241]", host).is_ok());
        let e = check_namespace(Mode::OwnSandbox, host, host).unwrap_err();
        assert!(e.to_string().contains("outside any sandbox"), "{e}");
        assert!(check_namespace(Mode::Unsandboxed, "mnt:[1]", host).is_err());
        assert!(check_namespace(Mode::Whole, "bash: readlink: not found", host).is_err());
    }

    #[test]
    fn per_command_is_held_to_2_ms_and_to_a_tenth_of_the_own_sandboxs_overhead() {
        use crate::results::fixtures::row;
        use crate::stats::Verdict;
        let rows = |per_command: f64| {
            vec![
                row(METRIC, Kind::Host, Mode::Unsandboxed.variant(), &[100.0]),
                row(METRIC, Kind::Srt, Mode::OwnSandbox.variant(), &[130.0]),
                row(METRIC, Kind::Sandbox, Mode::Whole.variant(), &[110.0]),
                row(METRIC, Kind::Sandbox, Mode::PerCommand.variant(), &[per_command]),
            ]
        };
        let verdicts = |per_command: f64| -> Vec<(String, Verdict, Option<f64>)> {
            targets(&rows(per_command))
                .into_iter()
                .map(|t| (t.target, t.verdict, t.limit))
                .collect()
        };
        // 1.5 ms over: within 2 ms and within 0.1 x 30 ms.
        let met = verdicts(101.5);
        assert_eq!(met.len(), 3, "{met:?}");
        assert!(met[0].0.ends_with("<= 2 ms") && met[0].1 == Verdict::Met, "{met:?}");
        assert!(met[1].0.contains("<= 0.1x") && met[1].1 == Verdict::Met, "{met:?}");
        assert_eq!(met[1].2, Some(3.0));
        // 2.5 ms over: past 2 ms though within 3 ms.
        let over = verdicts(102.5);
        assert_eq!((over[0].1, over[1].1), (Verdict::NotMet, Verdict::Met), "{over:?}");
        // The whole agent keeps issue 14's half: 10 ms over, limit 15 ms.
        assert!(met[2].0.contains("<= 0.5x") && met[2].1 == Verdict::Met, "{met:?}");
    }

    #[test]
    fn every_mode_has_its_own_row() {
        let mut v: Vec<_> = Mode::ALL.iter().map(|m| (m.kind(), m.variant())).collect();
        v.dedup();
        assert_eq!(v.len(), Mode::ALL.len());
    }
}
