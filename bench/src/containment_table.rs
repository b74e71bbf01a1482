//! The containment table from verify's output: one row per check that is an
//! escape (what a sandbox must stop), one column per peer, B (blocked), E
//! (escaped) or n/a, and a blocked / applicable total per column. A check
//! the bare host cannot do either is n/a everywhere; an escape where the host
//! also escapes is a real escape. The unprivileged user's columns are held
//! against that user's own host column, root's against root's. Also the
//! plot of start-up against score.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

use crate::containment::{column_of, Raw, AGENT_COLUMN, OFFLINE_COLUMN, POLICY};
use crate::containment_types::{Cell, Column, Containment};
use crate::containment_user::{SUFFIX, USER};
use crate::results::{fmt_num, Row, RowStatus};
use crate::runtimes::Kind;
use crate::svg::escape;

/// Checks that say what a sandbox must still allow or how it is labelled
/// (the working directory is writable, the allowlisted host is reachable,
/// the sentinel is set), not what it stops.
pub fn is_escape_check(check: &str, group: &str, expected: &str) -> bool {
    const NOT_ESCAPES: &[&str] = &[
        "writable ",
        "network allowlist",
        "proxy ",
        "hostname",
        "user ids",
        "env allow-list",
        "empty home",
    ];
    group != "sentinel" && expected != "allowed" && !NOT_ESCAPES.iter().any(|p| check.starts_with(p))
}

/// A check the kernel itself refused without a filter (no capability, an
/// LSM) is blocked too: the yardstick asks for a refusal, verify for a
/// refusal by the seccomp filter.
fn blocked(row: Option<&Value>) -> Option<bool> {
    let row = row?;
    match row["result"].as_str()? {
        "PASS" => Some(true),
        "FAIL" => {
            let seen = row["observed"].as_str().unwrap_or_default();
            Some(seen.contains("(kernel: EPERM)") || seen.contains("(kernel: EACCES)"))
        }
        _ => None,
    }
}

/// A peer whose probe never reported (its runtime could not start it) has
/// no cells: read as rows, every check would be an escape.
fn never_ran(rows: &BTreeMap<String, Value>) -> Option<String> {
    let observed = |r: &Value| r["observed"].as_str().unwrap_or_default().to_owned();
    let first = observed(rows.values().next()?);
    rows.values()
        .all(|r| observed(r).starts_with("no result"))
        .then_some(first)
}

fn cell_of(row: Option<&Value>, host_escapes: bool) -> Cell {
    if !host_escapes {
        return Cell::NotApplicable;
    }
    match blocked(row) {
        Some(true) => Cell::B,
        Some(false) => Cell::E,
        None => Cell::NotApplicable,
    }
}

/// A column before its cells: who it is, and why it is empty if it is.
struct Spec<'a> {
    name: &'a str,
    kind: Kind,
    variant: &'a str,
    reason: Option<String>,
    pair: Option<String>,
}

/// The canary port in verify's check names (`direct ... 127.0.0.1:PORT`).
fn canary_port(v: &Value) -> Option<String> {
    v.as_array()?
        .iter()
        .filter_map(|r| r["check"].as_str())
        .find_map(|c| c.strip_prefix("direct host loopback 127.0.0.1:"))
        .map(str::to_owned)
}

/// `v` with its check names on `to`'s canary port: every verify run listens
/// on a port of its own, and its rows must land on the agent run's.
fn on_port_of(v: &Value, to: &Value) -> Value {
    let mut v = v.clone();
    let (Some(from), Some(to)) = (canary_port(&v), canary_port(to)) else {
        return v;
    };
    let tail = format!(":{from}");
    for row in v.as_array_mut().into_iter().flatten() {
        if let Some(c) = row["check"].as_str().and_then(|c| c.strip_suffix(&tail)) {
            row["check"] = Value::from(format!("{c}:{to}"));
        }
    }
    v
}

/// Appends `v`'s escape checks that are not rows yet.
fn escape_checks(v: &Value, host: &BTreeMap<String, Value>, checks: &mut Vec<(String, String, String)>) {
    for row in v.as_array().into_iter().flatten() {
        let check = row["check"].as_str().unwrap_or_default();
        let group = host.get(check).and_then(|r| r["group"].as_str()).unwrap_or_default();
        let expected = row["expected"].as_str().unwrap_or_default();
        if is_escape_check(check, group, expected) && !checks.iter().any(|(c, _, _)| c == check) {
            checks.push((check.to_owned(), group.to_owned(), expected.to_owned()));
        }
    }
}

pub fn build(raw: &Raw) -> Containment {
    let host = column_of(&raw.agent, Some("host"));
    let offline = raw.offline.as_ref().map(|v| on_port_of(v, &raw.agent));
    let user_agent = raw.user.agent.as_ref().map(|v| on_port_of(v, &raw.agent));
    let user_offline = raw.user.offline.as_ref().map(|v| on_port_of(v, &raw.agent));
    let user_host = user_agent
        .as_ref()
        .ok()
        .map(|v| column_of(v, Some(&format!("host{SUFFIX}"))))
        .unwrap_or_default();
    // Root's rows, then those only the user's run has (its own user
    // namespace, say).
    let mut checks = Vec::new();
    escape_checks(&raw.agent, &host, &mut checks);
    if let Ok(v) = &user_agent {
        escape_checks(v, &user_host, &mut checks);
    }
    let column = |p: Spec<'_>, rows: Option<BTreeMap<String, Value>>| {
        let baseline = if p.pair.is_some() { &user_host } else { &host };
        let mut c = Column {
            name: p.name.to_owned(),
            kind: p.kind,
            variant: p.variant.to_owned(),
            reason: p.reason,
            pair: p.pair,
            blocked: 0,
            applicable: 0,
            cells: BTreeMap::new(),
            escapes: BTreeMap::new(),
        };
        let Some(rows) = rows else { return c };
        if let Some(why) = never_ran(&rows) {
            c.reason = Some(why);
            return c;
        }
        for (check, _, _) in &checks {
            let cell = cell_of(rows.get(check), blocked(baseline.get(check)) == Some(false));
            match cell {
                Cell::B => c.blocked += 1,
                Cell::E => {
                    let seen = rows[check]["observed"].as_str().unwrap_or_default();
                    c.escapes.insert(check.clone(), seen.to_owned());
                }
                Cell::NotApplicable => {}
            }
            if cell != Cell::NotApplicable {
                c.applicable += 1;
            }
            c.cells.insert(check.clone(), cell);
        }
        c
    };
    let mut columns = Vec::new();
    for (peers, agent, offline, suffix) in [
        (&raw.peers, Ok(&raw.agent), offline.as_ref().map_err(|e| *e), ""),
        (
            &raw.user.peers,
            user_agent.as_ref().map_err(|e| *e),
            user_offline.as_ref().map_err(|e| *e),
            SUFFIX,
        ),
    ] {
        let user = (!suffix.is_empty()).then_some(());
        for p in peers {
            let (rows, reason) = match (&p.reason, &p.launch, agent) {
                (Some(r), _, _) => (None, Some(r.clone())),
                (None, Some(_), Ok(v)) => (Some(column_of(v, Some(&p.name))), None),
                (None, _, Err(e)) => (None, Some(e.to_string())),
                (None, None, Ok(_)) => (None, Some("no launch".to_owned())),
            };
            let spec = Spec {
                name: &p.name,
                kind: p.kind,
                variant: &p.variant,
                reason,
                pair: p.pair.clone(),
            };
            columns.push(column(spec, rows));
        }
        for (name, variant, v) in [
            (AGENT_COLUMN, "", agent.map(|v| column_of(v, Some("claude-shim")))),
            (OFFLINE_COLUMN, "offline", offline.map(|v| column_of(v, None))),
        ] {
            let spec = Spec {
                name: &format!("{name}{suffix}"),
                kind: Kind::Sandbox,
                variant,
                reason: v.as_ref().err().map(|e| e.to_string()),
                pair: user.map(|()| name.to_owned()),
            };
            columns.push(column(spec, v.ok()));
        }
    }
    Containment {
        policy: POLICY,
        checks,
        columns,
    }
}

pub fn markdown(c: &Containment) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## Containment: the {} policy's escape checks in every sandbox\n\n\
         B blocked (by the sandbox, or by the kernel for lack of a capability), E escaped, n/a not applicable \
         (the bare host cannot do it either, or the check says so). The checks are `claude-shim verify`'s for that \
         policy, run unchanged in every sandbox (`verify --peers`); what a sandbox must allow (a writable working \
         directory, the allowlisted host) is left out. Columns \"as user\" ran as the unprivileged user {USER} \
         (rootless, where the peer has such a mode); there an escape counts only where {USER}'s own host column \
         escapes too.\n",
        c.policy
    );
    let _ = writeln!(s, "| sandbox | blocked / applicable | escapes |");
    let _ = writeln!(s, "|---|---|---|");
    for col in &c.columns {
        let escapes = match &col.reason {
            Some(r) => format!("did not run: {}", r.replace('|', "/")),
            None if col.escapes.is_empty() => "none".into(),
            None => {
                let names: Vec<&str> = col.escapes.keys().map(String::as_str).collect();
                let more = names.len().saturating_sub(12);
                let shown = names[..names.len().min(12)].join(", ");
                if more > 0 {
                    format!("{shown} and {more} more")
                } else {
                    shown
                }
            }
        };
        let _ = writeln!(s, "| {} | {} | {} |", col.name, col.total(), escapes);
    }
    let _ = writeln!(s, "\n### Every check\n");
    let _ = write!(s, "| check |");
    for col in &c.columns {
        let _ = write!(s, " {} |", col.name);
    }
    let _ = write!(s, "\n|---|");
    for _ in &c.columns {
        let _ = write!(s, "---|");
    }
    s.push('\n');
    for (check, _, _) in &c.checks {
        let _ = write!(s, "| {} |", check.replace('|', "/"));
        for col in &c.columns {
            let cell = match (&col.reason, col.cells.get(check)) {
                (Some(_), _) | (None, None) => "",
                (None, Some(Cell::B)) => "B",
                (None, Some(Cell::E)) => "E",
                (None, Some(Cell::NotApplicable)) => "n/a",
            };
            let _ = write!(s, " {cell} |");
        }
        s.push('\n');
    }
    let _ = write!(s, "| **blocked / applicable** |");
    for col in &c.columns {
        let _ = write!(s, " **{}** |", col.total());
    }
    s.push('\n');
    s
}

/// The start-up median of the row a column matches (`cold_start`, same
/// runtime kind and variant), in ms.
fn start_up(col: &Column, rows: &[Row]) -> Option<f64> {
    let variant = if col.kind == Kind::Sandbox || col.variant == "default seccomp" {
        ""
    } else {
        col.variant.as_str()
    };
    rows.iter()
        .find(|r| {
            r.metric == "cold_start"
                && r.kind == col.kind
                && r.variant == variant
                && r.status == RowStatus::Ok
                && (col.kind != Kind::Runsc && col.kind != Kind::Crun || same_runtime(&r.runtime, &col.name))
        })
        .and_then(|r| r.summary.map(|s| s.median))
}

/// Whether a root OCI column (named by `containment::peers`) is that of the
/// runtime `runtime` ("runsc (ptrace)", "crun (cgroup2 hidden)"), whose
/// own label the column's extends.
fn same_runtime(runtime: &str, column: &str) -> bool {
    ["runc spec", "default seccomp"]
        .iter()
        .any(|label| crate::plan::label_of(runtime, label) == column)
}

/// Start-up (x, log scale) against the share of applicable escapes blocked (y).
pub fn plot(c: &Containment, rows: &[Row], footer: &str) -> String {
    let (w, h, left, top, pw, ph) = (960.0, 560.0, 70.0, 60.0, 620.0, 420.0);
    // A user column has no start-up row of its own: it sits above or below
    // its root counterpart, hollow, joined to it.
    let by_name = |name: &str| c.columns.iter().find(|col| col.name == name);
    let points: Vec<(&Column, f64, f64)> = c
        .columns
        .iter()
        .filter(|col| col.reason.is_none() && col.applicable > 0 && col.kind != Kind::Host)
        .filter_map(|col| {
            let timed = col.pair.as_deref().and_then(by_name).unwrap_or(col);
            start_up(timed, rows).map(|ms| (col, ms, col.blocked as f64 / col.applicable as f64))
        })
        .collect();
    let (lo, hi) = points
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), p| (lo.min(p.1), hi.max(p.1)));
    let (lo, hi) = if points.is_empty() {
        (1.0, 10.0)
    } else {
        ((lo / 1.5).max(0.01).log10(), (hi * 1.5).log10())
    };
    let x = |ms: f64| left + (ms.log10() - lo) / (hi - lo).max(1e-9) * pw;
    let y = |share: f64| top + (1.0 - share) * ph;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="10" y="22" font-size="15" font-weight="bold">Start-up against containment</text>"#
    );
    let _ = writeln!(
        s,
        r##"<text x="10" y="42" fill="#555">x: cold start to exit of /bin/true, median ms (log); y: escapes blocked / applicable ({} policy's checks); up and left is better; hollow: as an unprivileged user (x of the root run)</text>"##,
        c.policy
    );
    let _ = writeln!(
        s,
        r##"<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>"##
    );
    for pct in [0, 25, 50, 75, 100] {
        let yy = y(pct as f64 / 100.0);
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}" text-anchor="end" fill="#555">{pct}%</text>"##,
            left - 6.0,
            yy + 4.0
        );
    }
    let mut tick = 10f64.powf(lo.floor());
    while tick.log10() <= hi {
        if tick.log10() >= lo {
            let _ = writeln!(
                s,
                r##"<text x="{}" y="{}" text-anchor="middle" fill="#555">{}</text>"##,
                x(tick),
                top + ph + 16.0,
                fmt_num(tick)
            );
        }
        tick *= 10.0;
    }
    for (i, (col, ms, share)) in points.iter().enumerate() {
        let (px, py) = (x(*ms), y(*share));
        let color = crate::svg::color(col.kind);
        let root = col.pair.as_deref().and_then(|p| points.iter().find(|q| q.0.name == p));
        if let Some((_, _, root_share)) = root {
            let _ = writeln!(
                s,
                r##"<line x1="{px:.1}" y1="{:.1}" x2="{px:.1}" y2="{py:.1}" stroke="{color}" stroke-dasharray="3,3"/>"##,
                y(*root_share)
            );
        }
        let _ = match col.pair {
            Some(_) => writeln!(
                s,
                r##"<circle cx="{px:.1}" cy="{py:.1}" r="5" fill="white" stroke="{color}" stroke-width="2"/>"##
            ),
            None => writeln!(s, r##"<circle cx="{px:.1}" cy="{py:.1}" r="5" fill="{color}"/>"##),
        };
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}">{} ({}, {} ms)</text>"##,
            px + 8.0,
            py + 4.0 + (i % 3) as f64 * 3.0,
            escape(&col.name),
            col.total(),
            fmt_num(*ms)
        );
    }
    let missing: Vec<String> = c
        .columns
        .iter()
        .filter(|col| col.kind != Kind::Host && !points.iter().any(|p| p.0.name == col.name))
        .map(|col| col.name.clone())
        .collect();
    let _ = writeln!(
        s,
        r##"<text x="10" y="{}" fill="#555">not plotted (no score or no start-up row in this run): {}</text>"##,
        h - 30.0,
        escape(&missing.join(", "))
    );
    let _ = writeln!(
        s,
        r##"<text x="10" y="{}" fill="#888" font-size="10">{}</text>"##,
        h - 12.0,
        escape(footer)
    );
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_sandbox_must_allow_is_not_an_escape() {
        assert!(is_escape_check("syscall mount", "seccomp", "blocked: EPERM"));
        assert!(!is_escape_check("syscall fork", "seccomp", "allowed"));
        assert!(!is_escape_check("writable /tmp", "filesystem", "writable"));
        assert!(!is_escape_check("env IS_SANDBOX", "sentinel", "IS_SANDBOX=1"));
        assert!(is_escape_check("env GH_TOKEN absent", "env", "absent"));
    }

    #[test]
    fn runsc_and_crun_columns_find_their_start_up_row() {
        assert!(same_runtime("runsc (ptrace)", "runsc (ptrace, runc spec)"));
        assert!(same_runtime(
            "crun (cgroup2 hidden)",
            "crun (cgroup2 hidden, default seccomp)"
        ));
        assert!(same_runtime("crun", "crun (runc spec)"));
        assert!(!same_runtime("crun", "crun (cgroup2 hidden, runc spec)"));
    }

    #[test]
    fn the_offline_and_user_runs_land_on_the_agent_runs_rows() {
        let agent = serde_json::json!([{"check": "direct host loopback 127.0.0.1:100"}, {"check": "syscall mount"}]);
        let other = serde_json::json!([{"check": "direct host loopback 127.0.0.1:200"}, {"check": "direct private 10/8 10.0.0.1:200"}, {"check": "syscall mount"}]);
        let moved = on_port_of(&other, &agent);
        let names: Vec<&str> = moved
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["check"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "direct host loopback 127.0.0.1:100",
                "direct private 10/8 10.0.0.1:100",
                "syscall mount"
            ]
        );
    }

    #[test]
    fn a_peer_whose_probe_never_reported_has_a_reason_not_escapes() {
        let none = serde_json::json!({"result": "FAIL", "observed": "no result (probe exit status 128; stderr: x)"});
        let seen = serde_json::json!({"result": "FAIL", "observed": "allowed"});
        let rows = |v: Vec<&Value>| -> BTreeMap<String, Value> {
            v.into_iter()
                .enumerate()
                .map(|(i, r)| (i.to_string(), r.clone()))
                .collect()
        };
        assert_eq!(
            never_ran(&rows(vec![&none, &none])).as_deref(),
            Some("no result (probe exit status 128; stderr: x)")
        );
        assert_eq!(
            never_ran(&rows(vec![&none, &seen])),
            None,
            "a partial run keeps its cells"
        );
        assert_eq!(never_ran(&rows(vec![])), None);
    }

    #[test]
    fn a_check_the_host_cannot_do_is_not_applicable() {
        let pass = serde_json::json!({"result": "PASS"});
        let fail = serde_json::json!({"result": "FAIL"});
        assert_eq!(cell_of(Some(&pass), true), Cell::B);
        assert_eq!(cell_of(Some(&fail), true), Cell::E);
        assert_eq!(cell_of(Some(&fail), false), Cell::NotApplicable);
        assert_eq!(cell_of(None, true), Cell::NotApplicable);
        let kernel = serde_json::json!({"result": "FAIL", "observed": "not filtered (kernel: EPERM)"});
        assert_eq!(
            cell_of(Some(&kernel), true),
            Cell::B,
            "refused without a filter is blocked"
        );
        let reached = serde_json::json!({"result": "FAIL", "observed": "not filtered (kernel: EFAULT)"});
        assert_eq!(cell_of(Some(&reached), true), Cell::E);
    }
}
