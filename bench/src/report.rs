//! What a run's results (`results`) become: the rows' ratios to the host and
//! runc, and the files written from them: results.json, table.md (with the
//! verdicts of `targets`), one SVG per metric (`svg`), the `latest` link, and
//! optionally the README's benchmark section.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::machine::Machine;
use crate::results::{fmt_num, Better, Results, Row, RowStatus};
use crate::runtimes::Kind;
use crate::stats::{self, Verdict};

fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or("—".to_owned(), |r| format!("{r:.2}x"))
}

/// Ratios to the host row and to runc's row (same variant if there is one) of each metric.
pub fn fill_ratios(rows: &mut [Row]) {
    let medians: Vec<(String, Kind, String, Option<f64>)> = rows
        .iter()
        .map(|r| (r.metric.clone(), r.kind, r.variant.clone(), r.summary.map(|s| s.median)))
        .collect();
    for r in rows.iter_mut() {
        let Some(m) = r.summary.map(|s| s.median) else {
            continue;
        };
        let of = |kind: Kind, variant: Option<&str>| {
            medians
                .iter()
                .find(|(metric, k, v, med)| {
                    *metric == r.metric && *k == kind && med.is_some() && variant.is_none_or(|want| v == want)
                })
                .and_then(|x| x.3)
        };
        r.ratio_host = of(Kind::Host, None).and_then(|h| stats::ratio(m, h));
        let runc = of(Kind::Runc, Some(&r.variant)).or_else(|| of(Kind::Runc, None));
        r.ratio_runc = runc.and_then(|b| stats::ratio(m, b));
    }
}

fn load_text(m: &Machine) -> String {
    let l = |x: &Option<crate::parse::LoadAvg>| {
        x.map_or("?".to_owned(), |l| {
            format!("{:.2} {:.2} {:.2}", l.one, l.five, l.fifteen)
        })
    };
    format!("before {}, after {}", l(&m.loadavg_before), l(&m.loadavg_after))
}

/// The targets as one table: figure, limit, verdict.
fn targets_table(r: &Results) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "| target | claude-shim | limit | verdict |\n|---|---:|---:|---|");
    for t in &r.targets {
        let v = t.value.map_or("—".into(), |v| format!("{} {}", fmt_num(v), t.unit));
        let l = t.limit.map_or("—".into(), |v| format!("{} {}", fmt_num(v), t.unit));
        let verdict = match (&t.verdict, &t.reason) {
            (Verdict::NotEvaluated, Some(why)) => format!("not evaluated: {}", md_cell(why)),
            (v, _) => format!("**{}**", v.text()),
        };
        let _ = writeln!(s, "| {} | {v} | {l} | {verdict} |", md_cell(&t.target));
    }
    s
}

pub fn markdown(r: &Results) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "### claude-shim benchmark, {}\n", r.started);
    let _ = writeln!(s, "- Machine: {}", r.machine.line());
    let _ = writeln!(s, "- Load average: {}", load_text(&r.machine));
    if let Some(w) = r.machine.busy_warning() {
        let _ = writeln!(s, "- **Note:** {w}");
    }
    let _ =
        writeln!(
        s,
        "- Rounds: {} measured after {} warm-up, runtimes interleaved in a new shuffled order each round (seed {}){}",
        r.settings["rounds"],
        r.settings["warmup"],
        r.settings["seed"],
        if r.settings["quick"] == true { "; quick sizes" } else { "" }
    );
    let tools: Vec<String> = r
        .tools
        .iter()
        .map(|t| {
            let v = t.version.clone().unwrap_or_else(|| "version unknown".into());
            match &t.package_version {
                Some(p) => format!("{} {v} (Debian {p})", t.name),
                None if t.path.is_none() => format!("{} missing", t.name),
                None => format!("{} {v}", t.name),
            }
        })
        .collect();
    let _ = writeln!(s, "- Tools: {}", tools.join(", "));
    for rt in &r.runtimes {
        if let Some(n) = &rt.note {
            let _ = writeln!(s, "- {}: {n}", rt.name);
        }
    }
    for n in &r.notes {
        let _ = writeln!(s, "- {n}");
    }
    if r.interrupted {
        let _ = writeln!(s, "- **Interrupted:** the run was stopped before its last round.");
    }

    match (&r.containment, &r.containment_error) {
        (Some(c), _) => {
            let totals: Vec<String> = c
                .columns
                .iter()
                .map(|col| format!("{} {}", col.name, col.total()))
                .collect();
            let _ = writeln!(
                s,
                "- Containment (escapes blocked / applicable, containment.md): {}",
                totals.join("; ")
            );
        }
        (None, Some(e)) => {
            let _ = writeln!(s, "- Containment: not measured: {}", md_cell(e));
        }
        (None, None) => {}
    }

    let _ = writeln!(s, "\n#### Targets (claude-shim; checked, not tests)\n");
    s.push_str(&targets_table(r));

    for m in &r.metrics {
        let rows: Vec<&Row> = r.rows.iter().filter(|x| x.metric == m.id).collect();
        // A CPU-time metric is a column of its wall-time table.
        if rows.is_empty() || m.id.ends_with("_cpu") {
            continue;
        }
        let cpu_id = format!("{}_cpu", m.id);
        let cpu_def = r.metrics.iter().find(|d| d.id == cpu_id);
        let cpu_of = |label: &str| -> String {
            r.rows
                .iter()
                .find(|x| x.metric == cpu_id && x.label == label)
                .and_then(|x| x.summary)
                .map_or("—".into(), |c| fmt_num(c.median))
        };
        let better = if m.better == Better::Lower { "lower" } else { "higher" };
        let _ = writeln!(s, "\n#### {} ({}; {better} is better)\n", m.title, m.unit);
        let _ = writeln!(s, "{}\n", m.definition);
        if let Some(c) = cpu_def {
            let _ = writeln!(s, "CPU ms, {}: {}\n", c.title, c.definition);
        }
        let cpu_head = if cpu_def.is_some() { " CPU ms |" } else { "" };
        let cpu_rule = if cpu_def.is_some() { "---:|" } else { "" };
        let _ = writeln!(
            s,
            "| runtime | median |{cpu_head} min–max | × host | × runc | n |\n|---|---:|{cpu_rule}---:|---:|---:|---:|"
        );
        let cpu_cell = |label: &str| {
            if cpu_def.is_some() {
                format!(" {} |", cpu_of(label))
            } else {
                String::new()
            }
        };
        let cpu_blank = if cpu_def.is_some() { " |" } else { "" };
        for row in rows {
            match row.summary {
                Some(sum) if row.status == RowStatus::Ok => {
                    let fails = if row.failures.is_empty() {
                        String::new()
                    } else {
                        format!(" ({} failed: {})", row.failures.len(), md_cell(&row.failures[0]))
                    };
                    let _ = writeln!(
                        s,
                        "| {}{fails} | {} |{} {}–{} | {} | {} | {} |",
                        md_cell(&row.label),
                        fmt_num(sum.median),
                        cpu_cell(&row.label),
                        fmt_num(sum.min),
                        fmt_num(sum.max),
                        fmt_ratio(row.ratio_host),
                        fmt_ratio(row.ratio_runc),
                        sum.n
                    );
                }
                _ => {
                    let why = match (&row.status, &row.failures.first()) {
                        (RowStatus::Ok, Some(f)) => format!("no sample: {f}"),
                        (RowStatus::Ok, None) => "no sample".to_owned(),
                        (st, _) => format!("{}: {}", st.text(), row.reason.as_deref().unwrap_or("")),
                    };
                    let _ = writeln!(
                        s,
                        "| {} | {} |{cpu_blank} | | | 0 |",
                        md_cell(&row.label),
                        md_cell(&why)
                    );
                }
            }
        }
    }
    s
}

fn md_cell(s: &str) -> String {
    let one: String = s.replace('|', "\\|").replace('\n', " ");
    if one.chars().count() > 220 {
        one.chars().take(217).collect::<String>() + "..."
    } else {
        one
    }
}

/// Writes results.json, table.md and the plots into `dir`, and points `latest` at it.
pub fn write_all(r: &Results, dir: &Path) -> Result<Vec<PathBuf>> {
    fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let mut written = Vec::new();
    let json = dir.join("results.json");
    fs::write(&json, serde_json::to_vec_pretty(r)?).with_context(|| format!("write {}", json.display()))?;
    written.push(json);
    let table = dir.join("table.md");
    fs::write(&table, markdown(r)).with_context(|| format!("write {}", table.display()))?;
    written.push(table);
    let footer = format!("{} | {} | {}", r.started, r.machine.line(), load_text(&r.machine));
    for m in &r.metrics {
        let rows: Vec<&Row> = r.rows.iter().filter(|x| x.metric == m.id).collect();
        if rows.is_empty() {
            continue;
        }
        let p = dir.join(format!("{}.svg", m.id));
        fs::write(&p, crate::svg::chart(m, &rows, &footer)).with_context(|| format!("write {}", p.display()))?;
        written.push(p);
    }
    if let Some(c) = &r.containment {
        let md = dir.join("containment.md");
        fs::write(&md, crate::containment_table::markdown(c)).with_context(|| format!("write {}", md.display()))?;
        written.push(md);
        let svg = dir.join("containment.svg");
        fs::write(&svg, crate::containment_table::plot(c, &r.rows, &footer))
            .with_context(|| format!("write {}", svg.display()))?;
        written.push(svg);
    }
    if let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) {
        let latest = parent.join("latest");
        let tmp = parent.join(".latest.tmp");
        let _ = fs::remove_file(&tmp);
        std::os::unix::fs::symlink(name, &tmp).with_context(|| format!("create {}", tmp.display()))?;
        fs::rename(&tmp, &latest).with_context(|| format!("replace {}", latest.display()))?;
    }
    Ok(written)
}

pub const README_BEGIN: &str = "<!-- bench:begin (written by claude-shim-bench --readme) -->";
pub const README_END: &str = "<!-- bench:end -->";

/// Replaces the README's benchmark section (or appends one) with this run's
/// targets, one table; the full tables, plots and method stay in `dir`.
pub fn update_readme(readme: &Path, r: &Results, dir: &Path) -> Result<()> {
    let text = fs::read_to_string(readme).with_context(|| format!("read {}", readme.display()))?;
    // "README.md" has the parent "", which canonicalize refuses.
    let base = readme
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let base = fs::canonicalize(base).unwrap_or(base.to_path_buf());
    let dir = fs::canonicalize(dir).unwrap_or(dir.to_path_buf());
    let rel = dir.strip_prefix(&base).unwrap_or(&dir).display().to_string();
    let mut section = format!("{README_BEGIN}\n");
    let _ = writeln!(
        section,
        "Targets measured by `hack/bench --publish` on {} ({}; load average {}); printed, never asserted.\n",
        r.started,
        r.machine.line(),
        load_text(&r.machine)
    );
    if let Some(w) = r.machine.busy_warning() {
        let _ = writeln!(section, "**Note:** {w}\n");
    }
    section.push_str(&targets_table(r));
    if let Some(c) = &r.containment {
        let _ = writeln!(
            section,
            "\nContainment: the {} policy's escape checks (`claude-shim verify`'s) run in every sandbox, escapes \
             blocked / applicable ([{rel}/containment.md]({rel}/containment.md), plot: \
             [{rel}/containment.svg]({rel}/containment.svg)):\n",
            c.policy
        );
        let score = |col: &crate::containment_types::Column| {
            let why = col
                .reason
                .as_deref()
                .map(|r| format!(" (did not run: {})", md_cell(r)))
                .unwrap_or_default();
            format!("{}{why}", col.total())
        };
        // One line per peer: the root run, then the same peer as the
        // unprivileged user (held against that user's own host).
        let paired = |col: &crate::containment_types::Column| {
            col.pair
                .as_deref()
                .is_some_and(|p| c.columns.iter().any(|r| r.pair.is_none() && r.name == p))
        };
        for col in c.columns.iter().filter(|col| !paired(col)) {
            let mut line = format!("- {}: {}", col.name, score(col));
            for u in c
                .columns
                .iter()
                .filter(|u| u.pair.as_deref() == Some(col.name.as_str()))
            {
                let _ = write!(line, "; {}: {}", u.name, score(u));
            }
            let _ = writeln!(section, "{line}");
        }
    }
    let _ = writeln!(
        section,
        "\nEvery table (each runtime, min–max, CPU time, ratios to the host and runc), the method and the plots: \
         [{rel}/table.md]({rel}/table.md); raw figures: [{rel}/results.json]({rel}/results.json)."
    );
    section.push_str(README_END);
    let new = match (text.find(README_BEGIN), text.find(README_END)) {
        (Some(a), Some(b)) if b > a => format!("{}{section}{}", &text[..a], &text[b + README_END.len()..]),
        _ => format!(
            "{}\n## Benchmarks\n\n{section}\n",
            text.trim_end_matches('\n').to_owned() + "\n"
        ),
    };
    fs::write(readme, new).with_context(|| format!("write {}", readme.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::fixtures::row;
    use crate::results::{MetricDef, SCHEMA};

    #[test]
    fn ratios_use_the_host_and_runc_of_the_same_variant() {
        let mut rows = vec![
            row("s", Kind::Host, "", &[10.0]),
            row("s", Kind::Runc, "no seccomp", &[20.0]),
            row("s", Kind::Runc, "default seccomp", &[40.0]),
            row("s", Kind::ClaudeShim, "default seccomp", &[80.0]),
            row("s", Kind::ClaudeShim, "agent seccomp", &[30.0]),
        ];
        fill_ratios(&mut rows);
        assert_eq!(rows[3].ratio_host, Some(8.0));
        assert_eq!(rows[3].ratio_runc, Some(2.0), "same variant");
        assert_eq!(
            rows[4].ratio_runc,
            Some(1.5),
            "no agent variant for runc: its first row"
        );
        assert_eq!(rows[0].ratio_host, Some(1.0));
    }

    #[test]
    fn the_readme_section_is_replaced_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let readme = dir.path().join("README.md");
        fs::write(
            &readme,
            format!("# x\n\n{README_BEGIN}\nprevious-section-text\n{README_END}\n\n## after\n"),
        )
        .unwrap();
        let r = Results {
            schema: SCHEMA,
            started: "2026-01-01T00:00:00Z".into(),
            finished: String::new(),
            duration_s: 0.0,
            settings: serde_json::json!({"rounds": 1, "warmup": 1, "seed": 1, "quick": true}),
            machine: crate::machine::collect(),
            tools: vec![],
            runtimes: vec![],
            metrics: vec![MetricDef {
                id: "cold_start",
                title: "Cold",
                unit: "ms",
                better: Better::Lower,
                definition: "d".into(),
            }],
            rows: vec![row("cold_start", Kind::Host, "", &[1.0])],
            targets: vec![],
            interrupted: false,
            notes: vec![],
            containment: Some(crate::containment_types::Containment {
                policy: "agent",
                checks: vec![],
                columns: vec![
                    column("runc (runc spec)", None, 1),
                    column("runc (runc spec --rootless) as user", Some("runc (runc spec)"), 0),
                    column("host as user", Some("host"), 0),
                ],
            }),
            containment_error: None,
        };
        let res = dir.path().join("results/20260101");
        update_readme(&readme, &r, &res).unwrap();
        let text = fs::read_to_string(&readme).unwrap();
        assert!(!text.contains("previous-section-text"));
        // Only the targets go into the README; the tables stay in the results folder.
        assert!(
            text.contains("[results/20260101/table.md](results/20260101/table.md)"),
            "{text}"
        );
        assert!(text.contains("| target | claude-shim | limit | verdict |"), "{text}");
        assert!(!text.contains("#### Cold"), "{text}");
        assert!(text.ends_with("## after\n"));
        assert_eq!(text.matches(README_BEGIN).count(), 1);
        // One line per peer: root and user scores side by side; a user
        // column without its root one still gets a line.
        assert!(
            text.contains("\n- runc (runc spec): 1/2; runc (runc spec --rootless) as user: 0/2\n"),
            "{text}"
        );
        assert_eq!(text.matches("runc (runc spec --rootless) as user").count(), 1, "{text}");
        assert!(text.contains("\n- host as user: 0/2\n"), "{text}");
    }

    fn column(name: &str, pair: Option<&str>, blocked: usize) -> crate::containment_types::Column {
        crate::containment_types::Column {
            name: name.into(),
            kind: Kind::Runc,
            variant: String::new(),
            reason: None,
            pair: pair.map(String::from),
            blocked,
            applicable: 2,
            cells: Default::default(),
            escapes: Default::default(),
        }
    }
}
