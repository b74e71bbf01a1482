//! The targets for claude-shim, checked on the rows of a run: each
//! compares one figure with a limit derived from another row (crun's median,
//! the host's...) and gives a verdict with its reason. Printed, never
//! asserted; `report` writes them, the Claude Code group adds its own.

use crate::results::{Row, TargetResult};
use crate::runtimes::Kind;
use crate::stats;

/// The median of the first measured row that matches, or why there is none.
pub(crate) fn figure(rows: &[Row], metric: &str, kind: Kind, variant: Option<&str>) -> Result<(f64, String), String> {
    let candidates: Vec<&Row> = rows
        .iter()
        .filter(|r| r.metric == metric && r.kind == kind && variant.is_none_or(|v| r.variant == v))
        .collect();
    if let Some(r) = candidates.iter().find(|r| r.summary.is_some()) {
        return Ok((r.summary.map(|s| s.median).unwrap_or(f64::NAN), r.label.clone()));
    }
    match candidates.first() {
        Some(r) => Err(format!(
            "{} ({metric}): {}{}",
            r.label,
            r.status.text(),
            r.reason.as_ref().map(|x| format!(": {x}")).unwrap_or_default()
        )),
        None => Err(format!("no {kind:?} row for {metric}")),
    }
}

pub(crate) fn target(
    rows: &[Row],
    name: String,
    unit: &str,
    value: Result<(f64, String), String>,
    reference: Result<(f64, String), String>,
    factor: f64,
) -> TargetResult {
    let (verdict, reason) = stats::at_most(
        value.as_ref().map(|v| v.0).map_err(Clone::clone),
        reference.as_ref().map(|v| v.0).map_err(Clone::clone),
        factor,
    );
    let _ = rows;
    TargetResult {
        target: name,
        value: value.as_ref().ok().map(|v| v.0),
        reference: reference.as_ref().ok().map(|v| v.0),
        limit: reference.as_ref().ok().map(|v| v.0 * factor),
        unit: unit.to_owned(),
        verdict,
        reason,
    }
}

/// The targets for claude-shim; they are printed, never asserted.
pub fn targets(rows: &[Row], workloads: &[&str], syscalls: &[&str]) -> Vec<TargetResult> {
    let shim = |metric: &str, variant: &str| figure(rows, metric, Kind::ClaudeShim, Some(variant));
    let mut out = Vec::new();
    let sandbox = |variant: &str| figure(rows, "cold_start", Kind::Sandbox, Some(variant));
    let bwrap = figure(rows, "cold_start", Kind::Bwrap, None);
    out.push(target(
        rows,
        "`sandbox -- true` (agent policy) <= 2x bwrap with Claude Code's flags".into(),
        "ms",
        sandbox(""),
        bwrap.clone(),
        2.0,
    ));
    out.push(target(
        rows,
        "`sandbox -- true` CPU time <= 2x bwrap's".into(),
        "ms",
        figure(rows, "cold_start_cpu", Kind::Sandbox, Some("")),
        figure(rows, "cold_start_cpu", Kind::Bwrap, None),
        2.0,
    ));
    out.push(target(
        rows,
        "`sandbox -- true` in a 150k-file tree <= 1.10x in the small tree".into(),
        "ms",
        sandbox(BIG_TREE),
        sandbox(""),
        1.10,
    ));
    let crun = figure(rows, "cold_start", Kind::Crun, None);
    let crun_name = crun.as_ref().map(|c| c.1.clone()).unwrap_or_else(|_| "crun".into());
    out.push(target(
        rows,
        format!("cold start median <= {crun_name}'s"),
        "ms",
        shim("cold_start", ""),
        crun,
        1.0,
    ));
    out.push(target(
        rows,
        "cold start median <= 0.1x runsc's".into(),
        "ms",
        shim("cold_start", ""),
        figure(rows, "cold_start", Kind::Runsc, None),
        0.1,
    ));
    out.push(target(
        rows,
        "cold start with allowlist networking <= 2x its own cold start".into(),
        "ms",
        shim("cold_start_net", "network allowlist"),
        shim("cold_start", ""),
        2.0,
    ));
    for s in syscalls {
        out.push(target(
            rows,
            format!("{s} with the agent seccomp profile <= 1.10x host"),
            "ns",
            shim(s, "agent seccomp"),
            figure(rows, s, Kind::Host, None),
            1.10,
        ));
    }
    for w in workloads {
        out.push(target(
            rows,
            format!("{w} <= 1.05x host"),
            "ms",
            shim(w, ""),
            figure(rows, w, Kind::Host, None),
            1.05,
        ));
        out.push(target(
            rows,
            format!("{w} under `claude-shim sandbox` <= 1.05x host"),
            "ms",
            figure(rows, w, Kind::Sandbox, None),
            figure(rows, w, Kind::Host, None),
            1.05,
        ));
    }
    for mode in ["none", "allowlist"] {
        out.push(target(
            rows,
            format!("runtime-side PSS per sandbox, network {mode}, <= 4 MiB"),
            "MiB",
            shim("memory_pss", &format!("network {mode}")),
            Ok((4.0, "4 MiB".into())),
            1.0,
        ));
    }
    let crun20 = figure(rows, "start20", Kind::Crun, None);
    let crun20_name = crun20.as_ref().map(|c| c.1.clone()).unwrap_or_else(|_| "crun".into());
    out.push(target(
        rows,
        format!("20 sandboxes at once <= {crun20_name}'s time"),
        "ms",
        shim("start20", ""),
        crun20,
        1.0,
    ));
    out.push(target(
        rows,
        format!(
            "a policy with {} protected paths compiles in under 1 s",
            crate::policy_compile::PROTECTED
        ),
        "ms",
        figure(rows, "policy_compile", Kind::Sandbox, None),
        Ok((1000.0, "1 s".into())),
        1.0,
    ));
    out
}

/// The variant of the `sandbox` start-up row run in the large generated tree.
pub const BIG_TREE: &str = "150k-file tree";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::fixtures::row;
    use crate::stats::Verdict;

    #[test]
    fn targets_are_met_not_met_or_not_evaluated_with_the_reason() {
        let rows = vec![
            row("cold_start", Kind::ClaudeShim, "", &[50.0, 60.0, 70.0]),
            row("cold_start", Kind::Crun, "", &[]),
            row("cold_start", Kind::Runsc, "", &[700.0]),
            row("cold_start_net", Kind::ClaudeShim, "network allowlist", &[130.0]),
            row("cold_start", Kind::Bwrap, "", &[9.0]),
            row("cold_start", Kind::Sandbox, "", &[20.0]),
            row("cold_start", Kind::Sandbox, BIG_TREE, &[21.0]),
        ];
        let t = targets(&rows, &[], &[]);
        let by = |prefix: &str| t.iter().find(|x| x.target.starts_with(prefix)).unwrap();
        let crun = by("cold start median <= crun");
        assert_eq!(crun.verdict, Verdict::NotEvaluated);
        assert!(
            crun.reason.as_deref().unwrap().contains("it broke"),
            "{:?}",
            crun.reason
        );
        let runsc = by("cold start median <= 0.1x runsc");
        assert_eq!(runsc.verdict, Verdict::Met, "60 <= 0.1 * 700");
        assert_eq!(runsc.limit, Some(70.0));
        assert_eq!(by("cold start with allowlist").verdict, Verdict::NotMet, "130 > 2 * 60");
        let bwrap = by("`sandbox -- true` (agent policy) <= 2x bwrap");
        assert_eq!(bwrap.verdict, Verdict::NotMet, "20 > 2 * 9");
        assert_eq!(bwrap.limit, Some(18.0));
        let tree = by("`sandbox -- true` in a 150k-file tree");
        assert_eq!(tree.verdict, Verdict::Met, "21 <= 1.10 * 20");
        assert_eq!(tree.value, Some(21.0));
    }
}
