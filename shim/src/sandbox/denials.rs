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

use crate::hostfs::{Dir, Kind};

/// How many runs' logs are kept.
pub const KEEP: usize = 50;

/// One refused destination, as printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// `host:port (reason)`, or the API path and why, control characters escaped.
    pub line: String,
    /// The allow entry that would admit it (`host`, or `host:port` off the
    /// web's ports), when the reason is only that the lists lack it.
    pub entry: Option<String>,
}

/// The entry `claude-shim allow` takes to admit `host:port` refused for
/// `reason`: only for a host that is not listed (a denied or blocked one
/// stays refused whatever is allowed), and only a plain host name or
/// address, which the proxy has normalized (so it is safe in a command line).
fn entry_for(host: &str, port: u64, reason: &str) -> Option<String> {
    let unlisted = reason == "not on the allowlist"
        || reason == "the allowlist is empty"
        || reason.starts_with(&format!("port {port} is not allowed"));
    let plain = host
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_.:[]".contains(&b));
    if !unlisted || !plain || host.is_empty() {
        return None;
    }
    Some(match port {
        443 | 80 => host.to_owned(),
        p => format!("{host}:{p}"),
    })
}

/// One per refused destination: a host once (the first reason seen), an
/// API path the gateway refused once per reason, in the order first seen.
pub fn refusals(log: &str) -> Vec<Refusal> {
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
        let gateway = v["proto"] == "gateway";
        let mut entry = None;
        let what = match (v["proto"].as_str(), v["host"].as_str()) {
            (Some("gateway"), _) => format!(
                "API path {} {}",
                v["method"].as_str().unwrap_or("?"),
                v["path"].as_str().unwrap_or("?")
            ),
            (_, Some(host)) => match v["port"].as_u64() {
                Some(p) => {
                    entry = entry_for(host, p, reason);
                    format!("{host}:{p}")
                }
                None => host.to_owned(),
            },
            _ => "a malformed request".to_owned(),
        };
        let line = format!("{what} ({reason})");
        // A host once; an API path once per reason (each names a field).
        let key = if gateway { line.clone() } else { what };
        if seen.insert(key, out.len()).is_none() {
            // Every part of it is the sandbox's to choose.
            out.push(Refusal {
                line: crate::terminal::escaped(&line).into_owned(),
                entry,
            });
        }
    }
    out
}

/// One line per refused destination: `host:port (reason)`, or the API path
/// the gateway refused and why (one line per reason), in the order first
/// seen, control characters escaped.
pub fn refused(log: &str) -> Vec<String> {
    refusals(log).into_iter().map(|r| r.line).collect()
}

/// Each change the host made to the lists while the run went on
/// (`claude-shim allow`/`deny`), in order: `allow HOST: what it did`.
pub fn changes(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["event"] == "policy change")
        .map(|v| {
            let line = format!(
                "{} {}: {}",
                v["op"].as_str().unwrap_or("?"),
                v["entry"].as_str().unwrap_or("?"),
                v["said"].as_str().unwrap_or("")
            );
            crate::terminal::escaped(&line).into_owned()
        })
        .collect()
}

/// The gateway's distinct `upstream_error`s (the upstream did not take the
/// connection), in the order first seen, control characters escaped.
pub fn upstream_errors(log: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in log.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()) {
        if let Some(e) = v["upstream_error"].as_str() {
            let e = crate::terminal::escaped(e).into_owned();
            if !out.contains(&e) {
                out.push(e);
            }
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
/// and returns the kept path. `logs` is a handle: a sandbox whose working
/// directory is the home can plant links there, and none is followed.
pub fn keep(logs: &Dir, id: &str, proxy_log: &Path) -> anyhow::Result<PathBuf> {
    let name = PathBuf::from(format!("{id}.log"));
    let mut to = logs.create_new(&name, 0o600)?;
    // The runtime's own state directory: no sandbox writes there.
    let mut from = std::fs::File::open(proxy_log)?;
    std::io::copy(&mut from, &mut to)?;
    let mut all = Vec::new();
    for (n, kind) in logs.list(Path::new(""))? {
        let n = PathBuf::from(n);
        if kind == Kind::File && n.extension().is_some_and(|x| x == "log") {
            if let Some(st) = logs.stat(&n)? {
                all.push((st.mtime_ns, n));
            }
        }
    }
    all.sort();
    let excess = all.len().saturating_sub(KEEP);
    for (_, n) in all.into_iter().take(excess) {
        let _ = logs.remove_file(&n);
    }
    Ok(logs.join(name))
}

/// Called with the container's state still in place: keeps its proxy log
/// and reports what was refused.
pub fn report(meta_dir: &Path, id: &str) {
    let log = meta_dir.join("proxy.log");
    let Ok(text) = std::fs::read_to_string(&log) else {
        return;
    };
    let upstream = upstream_errors(&text);
    if !decided(&text) && upstream.is_empty() {
        return;
    }
    let kept = match super::state_dir("logs").and_then(|logs| keep(&logs, id, &log)) {
        Ok(p) => Some(p),
        Err(e) => {
            tracing::warn!("keep the proxy log of {id}: {e:#}");
            None
        }
    };
    let lines = refused(&text);
    for l in &lines {
        eprintln!("claude-shim: refused egress: {l}");
    }
    for u in &upstream {
        eprintln!("claude-shim: API gateway: {u}");
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
{"client":"127.0.0.1:5","proto":"gateway","method":"POST","path":"/v1/messages","status":403,"decision":"deny","reason":"mcp_servers: refused"}
{"client":"127.0.0.1:6","proto":"gateway","method":"POST","path":"/v1/messages","status":403,"decision":"deny","reason":"container: refused"}
{"client":"127.0.0.1:7","proto":"gateway","method":"POST","path":"/v1/messages","status":403,"decision":"deny","reason":"mcp_servers: refused"}
not json"#;
        assert_eq!(
            refused(log),
            [
                "evil.example:443 (not on the allowlist)",
                "API path POST /v1/files (not forwarded)",
                "API path POST /v1/messages (mcp_servers: refused)",
                "API path POST /v1/messages (container: refused)",
            ]
        );
    }

    /// The path, host and reason come from the sandbox: a terminal escape in
    /// any of them is shown, not sent to the user's terminal.
    #[test]
    fn sandbox_text_is_escaped() {
        let log = r#"{"proto":"gateway","method":"POST","path":"/v1/\u001b]0;TITLE\u0007","decision":"deny","reason":"POST /v1/\u001b]0;TITLE\u0007 is not an API path"}
{"proto":"http-connect","host":"a\r\nclaude-shim: all clear\u001b[2K","port":443,"decision":"deny","reason":"not on the allowlist"}
{"proto":"gateway","method":"P\u009bOST","path":"/v1/messages","decision":"deny","reason":"x\u202ey"}"#;
        assert_eq!(
            refused(log),
            [
                "API path POST /v1/\\u{1b}]0;TITLE\\u{7} (POST /v1/\\u{1b}]0;TITLE\\u{7} is not an API path)",
                "a\\r\\nclaude-shim: all clear\\u{1b}[2K:443 (not on the allowlist)",
                "API path P\\u{9b}OST /v1/messages (x\\u{202e}y)",
            ]
        );
    }

    #[test]
    fn an_unlisted_host_is_offered_to_allow_and_a_denied_one_is_not() {
        let log = r#"{"proto":"http-connect","host":"wild.test","port":443,"decision":"deny","reason":"not on the allowlist"}
{"proto":"socks5","host":"ssh.test","port":22,"decision":"deny","reason":"port 22 is not allowed: an entry without a port admits 443 and 80; add ssh.test:22 or *:22"}
{"proto":"http","host":"gist.github.com","port":80,"decision":"deny","reason":"denied by gist.github.com"}
{"proto":"http","host":"10.0.0.1","port":80,"decision":"deny","reason":"address 10.0.0.1 is in blocked range 10.0.0.0/8 (Private-Use)"}
{"proto":"http","host":"a;b","port":80,"decision":"deny","reason":"not on the allowlist"}
{"event":"policy change","op":"allow","entry":"wild.test","said":"wild.test is allowed (allowed by wild.test)"}"#;
        let entries: Vec<Option<String>> = refusals(log).into_iter().map(|r| r.entry).collect();
        assert_eq!(
            entries,
            [Some("wild.test".into()), Some("ssh.test:22".into()), None, None, None]
        );
        assert_eq!(
            changes(log),
            ["allow wild.test: wild.test is allowed (allowed by wild.test)"]
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
        let dir = Dir::create_beneath(t.path(), Path::new("logs"), 0o700).unwrap();
        for i in 0..KEEP + 3 {
            keep(&dir, &format!("run{i}"), &src).unwrap();
        }
        assert_eq!(std::fs::read_dir(&logs).unwrap().count(), KEEP);
        assert!(
            logs.join(format!("run{}.log", KEEP + 2)).is_file(),
            "the newest is kept"
        );
    }

    /// Links planted in the logs directory (the home as a sandbox's working
    /// directory): neither written through nor pruned through.
    #[test]
    fn planted_links_are_neither_written_nor_pruned_through() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("proxy.log");
        std::fs::write(&src, "x\n").unwrap();
        let victim = t.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        for i in 0..KEEP + 3 {
            std::fs::write(victim.join(format!("v{i}.log")), "host\n").unwrap();
        }
        let logs = t.path().join("logs");
        std::fs::create_dir(&logs).unwrap();
        std::os::unix::fs::symlink(victim.join("v0.log"), logs.join("next.log")).unwrap();
        let dir = Dir::open(&logs).unwrap();
        assert!(keep(&dir, "next", &src).is_err());
        for i in 0..KEEP + 3 {
            keep(&dir, &format!("run{i}"), &src).unwrap();
        }
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), KEEP + 3);
        assert_eq!(std::fs::read_to_string(victim.join("v0.log")).unwrap(), "host\n");
        // `logs` itself a link: the state directory is not followed there.
        std::fs::remove_dir_all(&logs).unwrap();
        std::os::unix::fs::symlink(&victim, &logs).unwrap();
        assert!(Dir::create_beneath(t.path(), Path::new("logs"), 0o700).is_err());
    }
}
