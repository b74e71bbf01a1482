//! `state`, `list`, `ps`: reading containers.

use std::io::Write;
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::runtime::Runtime;

/// runc's state JSON with its keys in runc's order (its `containerState`:
/// ociVersion, id, pid, status, bundle, rootfs, created, annotations when
/// there are any, owner), where a map would sort them: what engines and
/// scripts read as text is what runc prints.
#[derive(serde::Serialize)]
struct InRuncsOrder<'a> {
    #[serde(rename = "ociVersion")]
    oci_version: &'a Value,
    id: &'a Value,
    pid: &'a Value,
    status: &'a Value,
    bundle: &'a Value,
    rootfs: &'a Value,
    created: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<&'a Value>,
    owner: &'a Value,
}

impl<'a> InRuncsOrder<'a> {
    fn of(v: &'a Value) -> Self {
        Self {
            oci_version: &v["ociVersion"],
            id: &v["id"],
            pid: &v["pid"],
            status: &v["status"],
            bundle: &v["bundle"],
            rootfs: &v["rootfs"],
            created: &v["created"],
            // Go's omitempty: none, or an empty map, is left out.
            annotations: v
                .get("annotations")
                .filter(|a| a.as_object().is_some_and(|o| !o.is_empty())),
            owner: &v["owner"],
        }
    }
}

pub fn state(rt: &Runtime, id: &str) -> Result<i32> {
    let v = rt.state_json(id)?;
    println!("{}", serde_json::to_string_pretty(&InRuncsOrder::of(&v))?);
    Ok(0)
}

pub fn list(rt: &Runtime, args: &crate::cli::List) -> Result<i32> {
    let all = rt.list()?;
    let mut out = std::io::stdout().lock();
    if args.quiet {
        for c in &all {
            writeln!(out, "{}", c["id"].as_str().unwrap_or_default())?;
        }
        return Ok(0);
    }
    match args.format.as_str() {
        // runc prints `null` for no containers (a nil slice).
        "json" if all.is_empty() => writeln!(out, "null")?,
        "json" => {
            let ordered: Vec<InRuncsOrder> = all.iter().map(InRuncsOrder::of).collect();
            writeln!(out, "{}", serde_json::to_string(&ordered)?)?
        }
        "table" => {
            let mut rows = vec![["ID", "PID", "STATUS", "BUNDLE", "CREATED", "OWNER"]
                .map(String::from)
                .to_vec()];
            for c in &all {
                let s = |k: &str| match &c[k] {
                    serde_json::Value::String(s) => s.clone(),
                    v => v.to_string(),
                };
                rows.push(vec![
                    s("id"),
                    s("pid"),
                    s("status"),
                    s("bundle"),
                    s("created"),
                    s("owner"),
                ]);
            }
            write_table(&mut out, &rows)?;
        }
        f => bail!("list containers: format {f:?} is neither table nor json"),
    }
    Ok(0)
}

/// Columns as runc's tabwriter sets them (minimum width 12, padding 3; the
/// last column unpadded), so that the table reads as runc's.
fn write_table(out: &mut impl Write, rows: &[Vec<String>]) -> Result<()> {
    let cols = rows.first().map(|r| r.len()).unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|i| (rows.iter().map(|r| r[i].len()).max().unwrap_or(0) + 3).max(12))
        .collect();
    for r in rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i + 1 == cols {
                line.push_str(c);
            } else {
                line.push_str(&format!("{c:<w$}", w = widths[i]));
            }
        }
        writeln!(out, "{line}")?;
    }
    Ok(())
}

pub fn ps(rt: &Runtime, args: &liboci_cli::Ps) -> Result<i32> {
    let pids = rt.pids(&args.container_id)?;
    match args.format.as_str() {
        "json" => println!("{}", serde_json::to_string(&pids)?),
        "table" => {
            let opts = if args.ps_options.is_empty() {
                vec!["-ef".to_owned()]
            } else {
                args.ps_options.clone()
            };
            let output = Command::new("ps").args(&opts).output().context("run ps")?;
            if !output.status.success() {
                bail!(
                    "run ps {}: {}",
                    opts.join(" "),
                    String::from_utf8_lossy(&output.stderr).trim()
                );
            }
            let text = String::from_utf8_lossy(&output.stdout);
            let mut lines = text.lines();
            let header = lines.next().unwrap_or_default();
            let col = header
                .split_whitespace()
                .position(|h| h == "PID")
                .context("find the PID column in ps output")?;
            println!("{header}");
            for line in lines {
                let pid = line.split_whitespace().nth(col).and_then(|p| p.parse::<i32>().ok());
                if pid.is_some_and(|p| pids.contains(&p)) {
                    println!("{line}");
                }
            }
        }
        f => bail!("list processes: format {f:?} is neither table nor json"),
    }
    Ok(0)
}
