//! One SVG bar chart per metric, written by hand (no plotting crate): one
//! horizontal bar per row at its median, a whisker from min to max, and rows
//! that could not be measured shown with their reason, never left out.

use std::fmt::Write as _;

use crate::results::{fmt_num, Better, MetricDef, Row, RowStatus};
use crate::runtimes::Kind;

const W: f64 = 960.0;
const LABEL_W: f64 = 330.0;
const BAR_W: f64 = 480.0;
const ROW_H: f64 = 26.0;
const TOP: f64 = 58.0;

pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

pub fn color(kind: Kind) -> &'static str {
    match kind {
        Kind::Host => "#9e9e9e",
        Kind::Bwrap => "#7e57c2",
        Kind::Runc => "#1e88e5",
        Kind::Crun => "#26a69a",
        Kind::Runsc => "#8d6e63",
        Kind::ClaudeShim => "#f4511e",
        Kind::Sandbox => "#bf360c",
        Kind::Srt => "#5e35b1",
        Kind::Codex => "#43a047",
    }
}

pub fn chart(metric: &MetricDef, rows: &[&Row], footer: &str) -> String {
    let h = TOP + ROW_H * rows.len() as f64 + 44.0;
    let scale_max = rows
        .iter()
        .filter_map(|r| r.summary.map(|s| s.max))
        .fold(0.0_f64, f64::max);
    let scale = if scale_max > 0.0 { BAR_W / scale_max } else { 0.0 };
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" viewBox="0 0 {W} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let better = match metric.better {
        Better::Lower => "lower is better",
        Better::Higher => "higher is better",
    };
    let _ = writeln!(
        s,
        r#"<text x="10" y="22" font-size="15" font-weight="bold">{}</text>"#,
        escape(metric.title)
    );
    let _ = writeln!(
        s,
        r##"<text x="10" y="42" fill="#555">{} ({better}); bar: median, whisker: min to max</text>"##,
        escape(metric.unit)
    );
    for (i, r) in rows.iter().enumerate() {
        let y = TOP + ROW_H * i as f64;
        let mid = y + ROW_H / 2.0;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LABEL_W - 8.0,
            mid + 4.0,
            escape(&r.label)
        );
        match (&r.status, r.summary) {
            (RowStatus::Ok, Some(sum)) => {
                let x0 = LABEL_W;
                let _ = writeln!(
                    s,
                    r#"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"/>"#,
                    y + 4.0,
                    (sum.median * scale).max(1.0),
                    ROW_H - 8.0,
                    color(r.kind)
                );
                let (a, b) = (x0 + sum.min * scale, x0 + sum.max * scale);
                let _ = writeln!(
                    s,
                    r#"<path d="M{a:.1} {mid:.1}H{b:.1}M{a:.1} {:.1}V{:.1}M{b:.1} {:.1}V{:.1}" stroke="black" stroke-width="1.2"/>"#,
                    mid - 5.0,
                    mid + 5.0,
                    mid - 5.0,
                    mid + 5.0
                );
                let _ = writeln!(
                    s,
                    r#"<text x="{:.1}" y="{:.1}">{} {}</text>"#,
                    b.max(x0 + sum.median * scale) + 6.0,
                    mid + 4.0,
                    fmt_num(sum.median),
                    escape(metric.unit)
                );
            }
            _ => {
                let mut why = format!("{}: {}", r.status.text(), r.reason.as_deref().unwrap_or(""));
                if why.chars().count() > 95 {
                    why = why.chars().take(92).collect::<String>() + "...";
                }
                let _ = writeln!(
                    s,
                    r##"<text x="{:.1}" y="{:.1}" fill="#888" font-style="italic">{}</text>"##,
                    LABEL_W + 4.0,
                    mid + 4.0,
                    escape(&why)
                );
            }
        }
    }
    let _ = writeln!(
        s,
        r##"<text x="10" y="{:.1}" fill="#555" font-size="11">{}</text>"##,
        h - 14.0,
        escape(footer)
    );
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::summarize;

    fn row(label: &str, status: RowStatus, samples: &[f64]) -> Row {
        Row {
            metric: "m".into(),
            label: label.into(),
            runtime: label.into(),
            kind: Kind::Runc,
            variant: String::new(),
            status,
            reason: Some("crun <1.9 & hybrid".into()),
            samples: samples.to_vec(),
            failures: vec![],
            summary: summarize(samples),
            ratio_host: None,
            ratio_runc: None,
            note: None,
            command: None,
        }
    }

    #[test]
    fn every_row_appears_and_text_is_escaped() {
        let def = MetricDef {
            id: "m",
            title: "Cold <start>",
            unit: "ms",
            better: Better::Lower,
            definition: String::new(),
        };
        let a = row("runc", RowStatus::Ok, &[1.0, 2.0, 3.0]);
        let b = row("crun", RowStatus::Fails, &[]);
        let svg = chart(&def, &[&a, &b], "machine");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains(">runc<") && svg.contains(">crun<"));
        assert!(svg.contains("fails here: crun &lt;1.9 &amp; hybrid"));
        assert!(svg.contains("Cold &lt;start&gt;"));
        assert_eq!(svg.matches("<rect").count(), 2, "background and one bar");
    }
}
