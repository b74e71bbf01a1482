//! The API gateway of `claude-shim claude` forwards only the shapes Claude
//! Code sends (issue 24, item 1): raw requests written from inside the
//! whole-agent sandbox (a stand-in `claude` that speaks HTTP through bash's
//! /dev/tcp, so every byte is the test's), against an upstream the test runs
//! on loopback that keeps every byte it receives. The real Claude Code
//! through the same gateway is tests/claude.rs.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

use claude_shim_e2e::claude_world::{text, World, API_KEY};
use claude_shim_e2e::mock_api::MockApi;
use claude_shim_e2e::*;

/// Keeps each request's bytes and answers `{}`.
struct Upstream {
    port: u16,
    got: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Upstream {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = got.clone();
        std::thread::spawn(move || {
            for mut s in listener.incoming().flatten() {
                let mut raw = Vec::new();
                let mut chunk = [0u8; 65536];
                // The gateway sends Content-Length and closes its side never:
                // read the head, then exactly the body.
                let want = loop {
                    let n = s.read(&mut chunk).unwrap_or(0);
                    if n == 0 {
                        break None;
                    }
                    raw.extend_from_slice(&chunk[..n]);
                    if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .map(|v| v.trim().parse().unwrap())
                            .unwrap_or(0);
                        break Some(end + 4 + len);
                    }
                };
                while want.is_some_and(|w| raw.len() < w) {
                    let n = s.read(&mut chunk).unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    raw.extend_from_slice(&chunk[..n]);
                }
                g.lock().unwrap().push(raw);
                let _ =
                    s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}");
            }
        });
        Self { port, got }
    }

    fn got(&self) -> Vec<Vec<u8>> {
        self.got.lock().unwrap().clone()
    }
}

fn request(target: &str, headers: &str, body: &str) -> String {
    format!(
        "POST {target} HTTP/1.1\r\nHost: 127.0.0.1:3180\r\nx-api-key: sk-placeholder\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Everything Claude Code never sends, in the head.
const HOSTILE_HEADERS: &str = "anthropic-version: 2023-06-01\r\nanthropic-beta: claude-code-20250219,mcp-client-2025-04-04,files-api-2025-04-14\r\nX-Forwarded-Host: evil.example\r\nForwarded: host=evil.example\r\nX-Anything: 1\r\nUser-Agent: claude-cli/2.1.197 (external, sdk-cli)\r\nContent-Type: application/json\r\n";
const PLAIN_BODY: &str = r#"{"model":"claude-test","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}"#;
const MCP_BODY: &str = r#"{"model":"claude-test","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"mcp_servers":[{"type":"url","url":"https://exfil.example/sse","name":"x"}]}"#;

/// (name, request, the status the sandbox must get, what its error names)
fn cases() -> Vec<(&'static str, String, &'static str, &'static str)> {
    let search = r#"{"model":"claude-test","max_tokens":1,"messages":[{"role":"user","content":"q"}],"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":8}]}"#;
    let fetch = r#"{"model":"claude-test","max_tokens":1,"messages":[],"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]}"#;
    let file = r#"{"model":"claude-test","max_tokens":1,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"file","file_id":"file_1"}}]}]}"#;
    let code = r#"{"model":"claude-test","max_tokens":1,"messages":[],"container":"c_1"}"#;
    let twice = r#"{"model":"claude-test","max_tokens":1,"messages":[],"tools":[{"type":"web_fetch_20250910","name":"f"}],"tools":[]}"#;
    let unknown = r#"{"model":"claude-test","max_tokens":1,"messages":[],"betas":["files-api-2025-04-14"]}"#;
    let ct = "Content-Type: application/json\r\n";
    let (m, beta, hh) = ("/v1/messages", "/v1/messages?beta=true", HOSTILE_HEADERS);
    vec![
        ("headers", request(beta, hh, PLAIN_BODY), "200", ""),
        (
            "web-search",
            request("/v1/messages/count_tokens", ct, search),
            "200",
            "",
        ),
        (
            "issue",
            request("/v1/messages?/../../v1/files", hh, MCP_BODY),
            "403",
            "the query",
        ),
        ("mcp", request(beta, hh, MCP_BODY), "403", "mcp_servers"),
        ("web-fetch", request(m, ct, fetch), "403", "tools[0].type"),
        (
            "file",
            request(m, ct, file),
            "403",
            "messages[0].content[0].source.file_id",
        ),
        ("container", request(m, ct, code), "403", "container"),
        ("twice", request(m, ct, twice), "400", "appears twice"),
        ("unknown", request(m, ct, unknown), "400", "betas"),
        // HTTP has no place for a control character: malformed, named escaped at exit.
        (
            "escape",
            request("/v1/\x1b]0;T\x07", ct, "{}"),
            "400",
            "malformed request",
        ),
        ("files-api", request("/v1/files", ct, "{}"), "403", "is not an API path"),
    ]
}

/// The stand-in `claude`: sends each request file of its directory, in
/// order, and prints `== NAME` and the answer.
const FAKE_CLAUDE: &str = r#"#!/bin/bash
dir=$(dirname "$0")
for f in $(ls "$dir"/req-*); do
  echo "== ${f##*/req-}"
  exec 3<>/dev/tcp/127.0.0.1/3180
  cat "$f" >&3
  cat <&3
  exec 3>&-
  echo
done
"#;

fn shown(b: &[u8]) -> String {
    String::from_utf8_lossy(b).replace(API_KEY, "<the caller's key>")
}

#[test]
fn only_claude_codes_shapes_reach_the_upstream() {
    let w = World::new(None);
    let upstream = Upstream::start();
    let bin = w.dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let mode = |p: &Path, m: u32| std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(m)).unwrap();
    std::fs::write(bin.join("claude"), FAKE_CLAUDE).unwrap();
    mode(&bin.join("claude"), 0o755);
    let cases = cases();
    for (i, (name, req, _, _)) in cases.iter().enumerate() {
        std::fs::write(bin.join(format!("req-{i:02}-{name}")), req).unwrap();
    }
    let unused = MockApi::start(&[]);
    let mut c = w.command(&shim_path(), &unused);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    c.env("PATH", path)
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{}", upstream.port))
        .arg("--root")
        .arg(&w.root)
        .arg("claude");
    let out = output_of(c, w.dir.path());
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    for (i, raw) in upstream.got().iter().enumerate() {
        eprintln!("---- the upstream's request {i}, verbatim:\n{}\n----", shown(raw));
    }
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    for (i, (name, _, status, names)) in cases.iter().enumerate() {
        let answer = stdout
            .split(&format!("== {i:02}-{name}\n"))
            .nth(1)
            .and_then(|a| a.split("\n== ").next())
            .unwrap_or_else(|| panic!("no answer to {name}: {stdout}"));
        assert!(answer.starts_with(&format!("HTTP/1.1 {status} ")), "{name}: {answer}");
        if *status != "200" {
            // The error as the API gives its own, which Claude Code shows.
            let body: serde_json::Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
            assert_eq!(body["type"], "error", "{name}: {answer}");
            let message = body["error"]["message"].as_str().unwrap();
            assert!(
                message.starts_with("claude-shim gateway: ") && message.contains(names),
                "{name}: {message}"
            );
        }
    }
    let up = format!("127.0.0.1:{}", upstream.port);
    let want = [
        format!(
            "POST /v1/messages?beta=true HTTP/1.1\r\nHost: {up}\r\nanthropic-version: 2023-06-01\r\nanthropic-beta: claude-code-20250219\r\nUser-Agent: claude-cli/2.1.197 (external, sdk-cli)\r\nContent-Type: application/json\r\nx-api-key: {API_KEY}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{PLAIN_BODY}",
            PLAIN_BODY.len()
        ),
        format!(
            "POST /v1/messages/count_tokens HTTP/1.1\r\nHost: {up}\r\nContent-Type: application/json\r\nx-api-key: {API_KEY}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
            cases[1].1.split("\r\n\r\n").nth(1).unwrap().len(),
            cases[1].1.split("\r\n\r\n").nth(1).unwrap()
        ),
    ];
    let got: Vec<String> = upstream
        .got()
        .iter()
        .map(|r| String::from_utf8_lossy(r).into_owned())
        .collect();
    assert_eq!(
        got, want,
        "the upstream got other bytes than the allowed requests, cut down"
    );
    // Each refusal is named once at exit, its terminal escape shown, not sent.
    assert!(
        stderr.contains("claude-shim: refused egress: API path POST /v1/\\u{1b}]0;T\\u{7} ("),
        "stderr: {stderr}"
    );
    assert!(
        !stderr.contains('\x1b') && !stderr.contains('\x07'),
        "stderr: {stderr:?}"
    );
    for field in [
        "mcp_servers",
        "tools[0].type",
        "source.file_id",
        "appears twice",
        "the query",
    ] {
        assert!(stderr.contains(field), "{field} not named on stderr: {stderr}");
    }
}
