//! The host side of `verify`: reads what the probe printed against the plan,
//! turns every gap into a FAIL (a check that never reported, a line that is not
//! a result, a probe that did not exit 0), prints the table (or JSON), compares
//! runtimes side by side, and gives the exit code.

use std::collections::{BTreeSet, HashMap};

use serde::Serialize;

use super::expect::Expectations;
use super::outcome::Outcome;
use super::plan::{plan, Check};

#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    #[serde(rename = "PASS")]
    Pass,
    #[serde(rename = "FAIL")]
    Fail,
    #[serde(rename = "N/A")]
    NotApplicable,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::NotApplicable => "N/A",
        }
    }
}

#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub check: String,
    pub group: String,
    pub expected: String,
    pub observed: String,
    pub result: Verdict,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What running the probe gave: its stdout, stderr and exit code (None when a
/// signal ended it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProbeRun {
    pub stdout: String,
    pub stderr: String,
    pub exit_code: Option<i32>,
}

/// The results of one probe run under one runtime.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub runtime: String,
    pub rows: Vec<Row>,
}

fn clip(s: &str, max: usize) -> String {
    let s = s.trim();
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let mut out: String = s.chars().take(max).collect();
        out.push_str("...");
        out
    }
}

impl Report {
    /// Matches the probe's lines to the plan. Every planned check gets exactly
    /// one row; anything missing, unreadable, duplicated or unplanned is a FAIL.
    pub fn new(runtime: &str, plan: &[Check], run: &ProbeRun) -> Self {
        let mut extra = Vec::new();
        let mut seen: HashMap<String, Outcome> = HashMap::new();
        for line in run.stdout.lines().filter(|l| !l.trim().is_empty()) {
            match serde_json::from_str::<Outcome>(line) {
                Ok(o) if seen.contains_key(&o.check) => extra.push(Row {
                    check: o.check.clone(),
                    group: o.group,
                    expected: "one result".into(),
                    observed: "reported twice".into(),
                    result: Verdict::Fail,
                    reason: None,
                }),
                Ok(o) => {
                    seen.insert(o.check.clone(), o);
                }
                Err(e) => extra.push(Row {
                    check: "probe output".into(),
                    group: "probe".into(),
                    expected: "one JSON result per line".into(),
                    observed: format!("{:?}: {e}", clip(line, 80)),
                    result: Verdict::Fail,
                    reason: None,
                }),
            }
        }
        let ended = match run.exit_code {
            Some(c) => format!("exit status {c}"),
            None => "killed by a signal".to_owned(),
        };
        let last_err = run.stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
        let mut rows = Vec::with_capacity(plan.len() + extra.len() + 1);
        for c in plan {
            match seen.remove(&c.id) {
                Some(o) => rows.push(Row {
                    check: c.id.clone(),
                    group: c.group.name().to_owned(),
                    expected: c.expected.clone(),
                    observed: o.observed,
                    result: match o.pass {
                        Some(true) => Verdict::Pass,
                        Some(false) => Verdict::Fail,
                        None => Verdict::NotApplicable,
                    },
                    reason: o.reason,
                }),
                None => rows.push(Row {
                    check: c.id.clone(),
                    group: c.group.name().to_owned(),
                    expected: c.expected.clone(),
                    observed: format!("no result (probe {ended}{})", stderr_note(last_err)),
                    result: Verdict::Fail,
                    reason: None,
                }),
            }
        }
        let mut unplanned: Vec<Outcome> = seen.into_values().collect();
        unplanned.sort_by(|a, b| a.check.cmp(&b.check));
        for o in unplanned {
            rows.push(Row {
                check: o.check,
                group: o.group,
                expected: "not planned".into(),
                observed: o.observed,
                result: Verdict::Fail,
                reason: None,
            });
        }
        rows.extend(extra);
        if run.exit_code != Some(0) {
            rows.push(Row {
                check: "probe exit".into(),
                group: "probe".into(),
                expected: "exit status 0".into(),
                observed: format!("{ended}{}", stderr_note(last_err)),
                result: Verdict::Fail,
                reason: None,
            });
        }
        Self {
            runtime: runtime.to_owned(),
            rows,
        }
    }

    /// `new` with the plan of `exp`.
    pub fn for_expectations(runtime: &str, exp: &Expectations, run: &ProbeRun) -> Self {
        Self::new(runtime, &plan(exp), run)
    }

    pub fn count(&self, v: Verdict) -> usize {
        self.rows.iter().filter(|r| r.result == v).count()
    }

    /// 0 when nothing failed (N/A rows do not fail), 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        i32::from(self.count(Verdict::Fail) > 0)
    }

    pub fn summary(&self) -> String {
        format!(
            "{}: {} checks, {} passed, {} failed, {} not applicable",
            self.runtime,
            self.rows.len(),
            self.count(Verdict::Pass),
            self.count(Verdict::Fail),
            self.count(Verdict::NotApplicable)
        )
    }

    /// `check | expected | observed | PASS/FAIL`, aligned, then a summary line.
    pub fn table(&self) -> String {
        let mut lines = vec![vec![
            "check".to_owned(),
            "expected".to_owned(),
            "observed".to_owned(),
            "result".to_owned(),
        ]];
        for r in &self.rows {
            lines.push(vec![
                r.check.clone(),
                r.expected.clone(),
                observed_cell(r),
                r.result.label().to_owned(),
            ]);
        }
        let mut out = align(&lines);
        out.push_str(&self.summary());
        out.push('\n');
        out
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(&self.rows).expect("rows serialize to JSON")
    }
}

fn stderr_note(last: &str) -> String {
    if last.is_empty() {
        String::new()
    } else {
        format!("; stderr: {}", clip(last, 120))
    }
}

fn observed_cell(r: &Row) -> String {
    match &r.reason {
        Some(reason) => format!("{} ({reason})", r.observed),
        None => r.observed.clone(),
    }
}

/// Pads every column but the last to its widest cell, joined by " | ".
fn align(lines: &[Vec<String>]) -> String {
    let cols = lines.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0; cols];
    for line in lines {
        for (i, cell) in line.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for line in lines {
        let mut cells = Vec::with_capacity(cols);
        for (i, cell) in line.iter().enumerate() {
            if i + 1 == line.len() {
                cells.push(cell.clone());
            } else {
                let pad = widths[i] - cell.chars().count();
                cells.push(format!("{cell}{}", " ".repeat(pad)));
            }
        }
        out.push_str(cells.join(" | ").trim_end());
        out.push('\n');
    }
    out
}

/// The check ids of several reports, in the first report's order, then any
/// the others have in addition.
fn union_ids(reports: &[Report]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut ids = Vec::new();
    for r in reports {
        for row in &r.rows {
            if seen.insert(row.check.clone()) {
                ids.push(row.check.clone());
            }
        }
    }
    ids
}

fn find<'a>(r: &'a Report, id: &str) -> Option<&'a Row> {
    r.rows.iter().find(|row| row.check == id)
}

/// Checks whose verdict differs between the reports (or that some lack).
pub fn differences(reports: &[Report]) -> Vec<String> {
    union_ids(reports)
        .into_iter()
        .filter(|id| {
            let verdicts: BTreeSet<Option<&str>> = reports
                .iter()
                .map(|r| find(r, id).map(|row| row.result.label()))
                .collect();
            verdicts.len() > 1
        })
        .collect()
}

/// `check | expected | <runtime> | <runtime> ... | differs`: each runtime's
/// cell is its verdict and what it observed.
pub fn side_by_side(reports: &[Report]) -> String {
    let mut header = vec!["check".to_owned(), "expected".to_owned()];
    header.extend(reports.iter().map(|r| r.runtime.clone()));
    header.push("differs".to_owned());
    let differ: BTreeSet<String> = differences(reports).into_iter().collect();
    let mut lines = vec![header];
    for id in union_ids(reports) {
        let expected = reports
            .iter()
            .find_map(|r| find(r, &id))
            .map(|row| row.expected.clone())
            .unwrap_or_default();
        let mut line = vec![id.clone(), expected];
        for r in reports {
            line.push(match find(r, &id) {
                Some(row) => format!("{} {}", row.result.label(), observed_cell(row)),
                None => "-".to_owned(),
            });
        }
        line.push(if differ.contains(&id) {
            "*".into()
        } else {
            String::new()
        });
        lines.push(line);
    }
    let mut out = align(&lines);
    for r in reports {
        out.push_str(&r.summary());
        out.push('\n');
    }
    out
}

#[derive(Serialize)]
struct SideRow<'a> {
    check: &'a str,
    expected: &'a str,
    runs: Vec<SideCell<'a>>,
}

#[derive(Serialize)]
struct SideCell<'a> {
    runtime: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    row: Option<&'a Row>,
}

pub fn side_by_side_json(reports: &[Report]) -> String {
    let ids = union_ids(reports);
    let rows: Vec<SideRow<'_>> = ids
        .iter()
        .map(|id| SideRow {
            check: id,
            expected: reports
                .iter()
                .find_map(|r| find(r, id))
                .map(|row| row.expected.as_str())
                .unwrap_or_default(),
            runs: reports
                .iter()
                .map(|r| SideCell {
                    runtime: &r.runtime,
                    row: find(r, id),
                })
                .collect(),
        })
        .collect();
    serde_json::to_string_pretty(&rows).expect("rows serialize to JSON")
}

/// Non-zero when any report has a FAIL.
pub fn exit_code(reports: &[Report]) -> i32 {
    reports.iter().map(Report::exit_code).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::expect::sample;

    fn line(check: &str, pass: Option<bool>) -> String {
        serde_json::to_string(&Outcome {
            check: check.into(),
            group: "g".into(),
            expected: "e".into(),
            observed: format!("seen {check}"),
            pass,
            reason: pass.is_none().then(|| "not here".to_owned()),
        })
        .unwrap()
    }

    fn all_pass(plan: &[Check]) -> String {
        plan.iter().map(|c| line(&c.id, Some(true)) + "\n").collect()
    }

    #[test]
    fn complete_passing_run_exits_zero() {
        let plan = plan(&sample());
        let run = ProbeRun {
            stdout: all_pass(&plan),
            stderr: String::new(),
            exit_code: Some(0),
        };
        let r = Report::for_expectations("claude-shim", &sample(), &run);
        assert_eq!(r.rows.len(), plan.len());
        assert_eq!(r.count(Verdict::Pass), plan.len());
        assert_eq!(r.exit_code(), 0);
        assert_eq!(r.rows[0].expected, plan[0].expected, "the host's expectation is shown");
    }

    #[test]
    fn one_fail_makes_the_exit_code_nonzero() {
        let plan = plan(&sample());
        let mut stdout = String::new();
        for (i, c) in plan.iter().enumerate() {
            stdout += &line(&c.id, Some(i != 3));
            stdout.push('\n');
        }
        let r = Report::new(
            "x",
            &plan,
            &ProbeRun {
                stdout,
                stderr: String::new(),
                exit_code: Some(0),
            },
        );
        assert_eq!(r.count(Verdict::Fail), 1);
        assert_eq!(r.exit_code(), 1);
    }

    #[test]
    fn not_applicable_does_not_fail() {
        let plan = plan(&sample());
        let mut stdout = all_pass(&plan);
        stdout = stdout.replacen(&line(&plan[1].id, Some(true)), &line(&plan[1].id, None), 1);
        let r = Report::new(
            "x",
            &plan,
            &ProbeRun {
                stdout,
                stderr: String::new(),
                exit_code: Some(0),
            },
        );
        assert_eq!(r.count(Verdict::NotApplicable), 1);
        assert_eq!(r.exit_code(), 0);
        assert!(r.table().contains("(not here)"), "{}", r.table());
    }

    #[test]
    fn missing_results_and_a_crash_fail() {
        let plan = plan(&sample());
        let half: String = plan[..3].iter().map(|c| line(&c.id, Some(true)) + "\n").collect();
        let r = Report::new(
            "x",
            &plan,
            &ProbeRun {
                stdout: half,
                stderr: "thread 'main' panicked\n".into(),
                exit_code: None,
            },
        );
        assert_eq!(r.count(Verdict::Pass), 3);
        assert_eq!(r.count(Verdict::Fail), plan.len() - 3 + 1);
        let last = r.rows.last().unwrap();
        assert_eq!(last.check, "probe exit");
        assert!(last.observed.contains("killed by a signal"), "{}", last.observed);
        assert!(r.rows[3].observed.contains("no result"), "{}", r.rows[3].observed);
        assert!(r.rows[3].observed.contains("panicked"), "{}", r.rows[3].observed);
    }

    #[test]
    fn garbage_duplicates_and_unplanned_checks_fail() {
        let plan = plan(&sample());
        let mut stdout = all_pass(&plan);
        stdout += "not json\n";
        stdout += &line(&plan[0].id, Some(true));
        stdout += "\n";
        stdout += &line("invented", Some(true));
        let r = Report::new(
            "x",
            &plan,
            &ProbeRun {
                stdout,
                stderr: String::new(),
                exit_code: Some(0),
            },
        );
        assert_eq!(r.count(Verdict::Fail), 3);
        assert!(r
            .rows
            .iter()
            .any(|row| row.check == "invented" && row.result == Verdict::Fail));
        assert!(r.rows.iter().any(|row| row.check == "probe output"));
        assert!(r.rows.iter().any(|row| row.observed == "reported twice"));
    }

    #[test]
    fn table_is_aligned() {
        let plan = plan(&sample());
        let r = Report::new(
            "claude-shim",
            &plan,
            &ProbeRun {
                stdout: all_pass(&plan),
                stderr: String::new(),
                exit_code: Some(0),
            },
        );
        let table = r.table();
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("check "), "{table}");
        let bar = lines[0].find(" | ").unwrap();
        for l in &lines[1..lines.len() - 1] {
            assert_eq!(l.find(" | "), Some(bar), "{table}");
            assert!(l.ends_with("PASS"), "{l}");
        }
        assert!(lines.last().unwrap().contains("0 failed"), "{table}");
        let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(json.as_array().unwrap().len(), plan.len());
        assert_eq!(json[0]["result"], "PASS");
    }

    #[test]
    fn side_by_side_marks_differences() {
        let plan = plan(&sample());
        let ok = ProbeRun {
            stdout: all_pass(&plan),
            stderr: String::new(),
            exit_code: Some(0),
        };
        let a = Report::new("claude-shim", &plan, &ok);
        let mut loose = ok.clone();
        loose.stdout = loose.stdout.replacen(
            &line("syscall mount", Some(true)),
            &line("syscall mount", Some(false)),
            1,
        );
        let b = Report::new("runc", &plan, &loose);
        assert_eq!(differences(&[a.clone(), b.clone()]), vec!["syscall mount".to_owned()]);
        let table = side_by_side(&[a.clone(), b.clone()]);
        let row = table.lines().find(|l| l.starts_with("syscall mount")).unwrap();
        assert!(row.contains("PASS seen syscall mount"), "{row}");
        assert!(row.contains("FAIL seen syscall mount"), "{row}");
        assert!(row.trim_end().ends_with('*'), "{row}");
        assert_eq!(exit_code(&[a.clone(), b.clone()]), 1);
        assert_eq!(exit_code(std::slice::from_ref(&a)), 0);
        let json: serde_json::Value = serde_json::from_str(&side_by_side_json(&[a, b])).unwrap();
        let mount = json
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["check"] == "syscall mount")
            .unwrap();
        assert_eq!(mount["runs"][1]["row"]["result"], "FAIL");
    }
}
