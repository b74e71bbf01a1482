//! The published results of a run, results.json's schema: the metric
//! definitions, one row per metric and runtime variant, the targets' verdicts,
//! and the number format the table and the plots share. Below `report` and
//! `svg`, which both render it.

use serde::Serialize;

use crate::machine::Machine;
use crate::runtimes::{Kind, Runtime, ToolInfo};
use crate::stats::{Summary, Verdict};

pub const SCHEMA: &str = "claude-shim-bench/1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Lower,
    Higher,
}

#[derive(Debug, Clone, Serialize)]
pub struct MetricDef {
    pub id: &'static str,
    pub title: &'static str,
    pub unit: &'static str,
    pub better: Better,
    /// What exactly is timed or counted.
    pub definition: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RowStatus {
    Ok,
    /// The runtime or a tool it needs is not on this machine.
    Missing,
    /// Present, but it does not run here (its error is the reason).
    Fails,
    /// The combination does not exist (no inbound port in a mode without one).
    NotApplicable,
    /// Waiting for a part of claude-shim that has not landed.
    Pending,
    /// Left out by --runtimes.
    Skipped,
}

impl RowStatus {
    pub fn text(&self) -> &'static str {
        match self {
            RowStatus::Ok => "ok",
            RowStatus::Missing => "missing",
            RowStatus::Fails => "fails here",
            RowStatus::NotApplicable => "n/a",
            RowStatus::Pending => "pending",
            RowStatus::Skipped => "not selected",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub metric: String,
    pub label: String,
    /// The runtime's name (`runtimes[].name`).
    pub runtime: String,
    pub kind: Kind,
    /// What distinguishes rows of one runtime: "no seccomp", "network allowlist"...
    pub variant: String,
    pub status: RowStatus,
    pub reason: Option<String>,
    /// Measured samples, in the metric's unit, in the order taken.
    pub samples: Vec<f64>,
    /// Errors of measured rounds that did not give a sample.
    pub failures: Vec<String>,
    pub summary: Option<Summary>,
    pub ratio_host: Option<f64>,
    pub ratio_runc: Option<f64>,
    /// Detail of the last sample (for memory: the processes counted).
    pub note: Option<String>,
    /// The command a sample runs (container ids vary).
    pub command: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TargetResult {
    pub target: String,
    pub value: Option<f64>,
    /// The figure the limit is derived from (crun's median, the host's...).
    pub reference: Option<f64>,
    pub limit: Option<f64>,
    pub unit: String,
    pub verdict: Verdict,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Results {
    pub schema: &'static str,
    pub started: String,
    pub finished: String,
    pub duration_s: f64,
    pub settings: serde_json::Value,
    pub machine: Machine,
    pub tools: Vec<ToolInfo>,
    pub runtimes: Vec<Runtime>,
    pub metrics: Vec<MetricDef>,
    pub rows: Vec<Row>,
    pub targets: Vec<TargetResult>,
    pub interrupted: bool,
    pub notes: Vec<String>,
    /// The containment table (group `containment`) ...
    pub containment: Option<crate::containment_types::Containment>,
    /// ... or why it is missing.
    pub containment_error: Option<String>,
}

/// Three significant figures, at most two decimals.
pub fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Rows as the tests of what reads them need them.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;
    use crate::stats::summarize;

    pub(crate) fn row(metric: &str, kind: Kind, variant: &str, samples: &[f64]) -> Row {
        Row {
            metric: metric.into(),
            label: format!("{kind:?} {variant}"),
            runtime: format!("{kind:?}"),
            kind,
            variant: variant.into(),
            status: if samples.is_empty() {
                RowStatus::Fails
            } else {
                RowStatus::Ok
            },
            reason: samples.is_empty().then(|| "it broke".into()),
            samples: samples.to_vec(),
            failures: vec![],
            summary: summarize(samples),
            ratio_host: None,
            ratio_runc: None,
            note: None,
            command: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_printed_with_three_figures() {
        assert_eq!(fmt_num(1234.6), "1235");
        assert_eq!(fmt_num(12.345), "12.3");
        assert_eq!(fmt_num(0.1234), "0.12");
    }
}
