//! Visible denials: after a sandbox run in which the proxy decided on at
//! least one request, its log (which goes with the container's state) is
//! kept under `$XDG_STATE_HOME/claude-shim/logs/` (the last `KEEP` such
//! runs), and every refused host is named on stderr, one line each, as
//! Claude Code's own sandbox annotates its violations. A run without network
//! traffic (most commands) keeps nothing: its log says only that the proxy
//! started and stopped, and copying it and pruning the directory cost about
//! a millisecond on every command.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// How many runs' logs are kept.
pub const KEEP: usize = 50;

/// One line per refused destination: `host:port (reason)`, or the API path
/// the gateway refused, in the order first seen.
pub fn refused(log: &str) -> Vec<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = Vec::new();
    for line in log.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if v["decision"] != "deny" {
            continue;
        }
        let reason = v["reason"].as_str().unwrap_or("refused");
        let what = match (v["proto"].as_str(), v["host"].as_str()) {
            (Some("gateway"), _) => format!(
                "API path {} {}",
                v["method"].as_str().unwrap_or("?"),
                v["path"].as_str().unwrap_or("?")
            ),
            (_, Some(host)) => match v["port"].as_u64() {
                Some(p) => format!("{host}:{p}"),
                None => host.to_owned(),
            },
            _ => "a malformed request".to_owned(),
        };
        if seen.insert(what.clone(), out.len()).is_none() {
            out.push(format!("{what} ({reason})"));
        }
    }
    out
}

/// Whether the proxy decided on any request (allowed or refused).
pub fn decided(log: &str) -> bool {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .any(|v| v.get("decision").is_some())
}

/// Keeps `proxy_log` as `<logs>/<id>.log`, drops the oldest beyond `KEEP`,
/// and returns the kept path.
pub fn keep(logs: &Path, id: &str, proxy_log: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(logs)?;
    let dest = logs.join(format!("{id}.log"));
    std::fs::copy(proxy_log, &dest)?;
    let mut all: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(logs)?
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    all.sort();
    let excess = all.len().saturating_sub(KEEP);
    for (_, p) in all.into_iter().take(excess) {
        let _ = std::fs::remove_file(p);
    }
    Ok(dest)
}

/// Called with the container's state still in place: keeps its proxy log
/// and reports what was refused.
pub fn report(meta_dir: &Path, id: &str) {
    let log = meta_dir.join("proxy.log");
    let Ok(text) = std::fs::read_to_string(&log) else {
        return;
    };
    if !decided(&text) {
        return;
    }
    let kept = match super::state_home() {
        Ok(home) => match keep(&home.join("logs"), id, &log) {
            Ok(p) => Some(p),
            Err(e) => {
                tracing::warn!("keep the proxy log of {id}: {e}");
                None
            }
        },
        Err(_) => None,
    };
    let lines = refused(&text);
    for l in &lines {
        eprintln!("claude-shim: refused egress: {l}");
    }
    if let Some(p) = kept {
        if !lines.is_empty() || tracing::enabled!(tracing::Level::DEBUG) {
            eprintln!("claude-shim: network log: {}", p.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_refused_host() {
        let log = r#"{"event":"started"}
{"client":"127.0.0.1:1","proto":"http-connect","host":"evil.example","port":443,"decision":"deny","reason":"not on the allowlist"}
{"client":"127.0.0.1:2","proto":"http-connect","host":"github.com","port":443,"decision":"allow","reason":"allowlist"}
{"client":"127.0.0.1:3","proto":"socks5","host":"evil.example","port":443,"decision":"deny","reason":"not on the allowlist"}
{"client":"127.0.0.1:4","proto":"gateway","method":"POST","path":"/v1/files","status":403,"decision":"deny","reason":"not forwarded"}
not json"#;
        assert_eq!(
            refused(log),
            [
                "evil.example:443 (not on the allowlist)",
                "API path POST /v1/files (not forwarded)"
            ]
        );
    }

    #[test]
    fn only_a_log_with_requests_counts_as_decided() {
        let quiet = "{\"event\":\"started\"}\n{\"event\":\"stopped\",\"reason\":\"the container's init exited\"}\n";
        assert!(!decided(quiet));
        let busy = format!("{quiet}{{\"host\":\"github.com\",\"port\":443,\"decision\":\"allow\"}}\n");
        assert!(decided(&busy));
    }

    #[test]
    fn the_last_runs_are_kept() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("proxy.log");
        std::fs::write(&src, "x\n").unwrap();
        let logs = t.path().join("logs");
        for i in 0..KEEP + 3 {
            keep(&logs, &format!("run{i}"), &src).unwrap();
        }
        assert_eq!(std::fs::read_dir(&logs).unwrap().count(), KEEP);
    }
}
