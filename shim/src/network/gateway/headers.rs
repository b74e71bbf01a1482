//! The request headers the gateway passes up: the ones Claude Code sends
//! (docs/claude.md lists what it was seen sending) and nothing else, so that
//! no header from the sandbox (`X-Forwarded-Host`, a beta flag that turns on
//! the MCP connector or the Files API...) changes what the upstream does
//! with the caller's key. Pure logic.

use claude_shim_bundle::policy::values::ServerTool;

/// Headers passed up as sent: the content's type and encodings, the API
/// version, and Claude Code's client identification.
const FORWARDED: &[&str] = &[
    "content-type",
    "accept",
    "accept-encoding",
    "user-agent",
    "anthropic-version",
    "anthropic-dangerous-direct-browser-access",
    "x-app",
    "x-claude-code-session-id",
    "x-client-request-id",
];
/// The SDK's client description (`X-Stainless-Arch`, `-Retry-Count`...).
const FORWARDED_PREFIX: &str = "x-stainless-";

/// Dropped without a word: the credential the sandbox holds (a
/// placeholder), the hop's own headers, and the framing the gateway sets.
const EXPECTED_DROPS: &[&str] = &[
    "x-api-key",
    "authorization",
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "content-length",
    "expect",
];

/// The `anthropic-beta` values Claude Code sends that change only how the
/// model answers (thinking, context, caching, output), never what the API
/// reaches.
const BETAS: &[&str] = &[
    "claude-code-20250219",
    "interleaved-thinking-2025-05-14",
    "context-1m-2025-08-07",
    "context-management-2025-06-27",
    "compact-2026-01-12",
    "effort-2025-11-24",
    "thinking-token-count-2026-05-13",
    "redact-thinking-2026-02-12",
    "prompt-caching-scope-2026-01-05",
    "extended-cache-ttl-2025-04-11",
    "mid-conversation-system-2026-04-07",
    "fine-grained-tool-streaming-2025-05-14",
    "token-efficient-tools-2025-02-19",
    "structured-outputs-2025-11-13",
    "structured-outputs-2025-12-15",
    "fast-mode-2026-02-01",
    "task-budgets-2026-03-13",
    "token-counting-2024-11-01",
    "oauth-2025-04-20",
];

/// Betas that turn on a server-side feature: passed only when the policy
/// allows the feature (the body is checked for it as well).
const FEATURE_BETAS: &[(&str, ServerTool)] = &[
    ("web-search-", ServerTool::WebSearch),
    ("web-fetch-", ServerTool::WebFetch),
    ("code-execution-", ServerTool::CodeExecution),
    ("mcp-client-", ServerTool::Mcp),
    ("files-api-", ServerTool::Files),
    ("tool-search-tool-", ServerTool::ToolSearch),
];

/// One request's headers, judged.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Judged {
    /// In the order sent.
    pub forwarded: Vec<(String, Vec<u8>)>,
    /// Names of the headers dropped beyond the expected ones (lowercase).
    pub dropped: Vec<String>,
    /// Beta values dropped.
    pub dropped_betas: Vec<String>,
}

impl Judged {
    /// Judges one header; `allowed` are the policy's server tools.
    pub fn add(&mut self, name: &str, value: &[u8], allowed: &[ServerTool]) {
        let lower = name.to_ascii_lowercase();
        if lower == "anthropic-beta" {
            let text = String::from_utf8_lossy(value);
            let mut kept = Vec::new();
            for b in text.split(',').map(str::trim).filter(|b| !b.is_empty()) {
                if beta_allowed(b, allowed) {
                    kept.push(b);
                } else {
                    self.dropped_betas.push(b.to_owned());
                }
            }
            if !kept.is_empty() {
                self.forwarded.push((name.to_owned(), kept.join(",").into_bytes()));
            }
        } else if FORWARDED.contains(&lower.as_str()) || lower.starts_with(FORWARDED_PREFIX) {
            self.forwarded.push((name.to_owned(), value.to_vec()));
        } else if !EXPECTED_DROPS.contains(&lower.as_str()) {
            self.dropped.push(lower);
        }
    }
}

fn beta_allowed(beta: &str, allowed: &[ServerTool]) -> bool {
    BETAS.contains(&beta)
        || FEATURE_BETAS
            .iter()
            .any(|(prefix, tool)| beta.starts_with(prefix) && allowed.contains(tool))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(headers: &[(&str, &str)], allowed: &[ServerTool]) -> Judged {
        let mut j = Judged::default();
        for (n, v) in headers {
            j.add(n, v.as_bytes(), allowed);
        }
        j
    }

    #[test]
    fn claude_codes_headers_pass_as_sent() {
        // As Claude Code 2.1.197 sent them (docs/claude.md).
        let sent = [
            ("Accept", "application/json"),
            ("Content-Type", "application/json"),
            ("User-Agent", "claude-cli/2.1.197 (external, sdk-cli)"),
            ("X-Claude-Code-Session-Id", "12ab8049-3eef-4ec1-a5c4-13f919d2190a"),
            ("X-Stainless-Arch", "x64"),
            ("X-Stainless-Retry-Count", "0"),
            ("anthropic-beta", "claude-code-20250219,context-1m-2025-08-07,interleaved-thinking-2025-05-14,thinking-token-count-2026-05-13,context-management-2025-06-27,prompt-caching-scope-2026-01-05,mid-conversation-system-2026-04-07,effort-2025-11-24"),
            ("anthropic-dangerous-direct-browser-access", "true"),
            ("anthropic-version", "2023-06-01"),
            ("x-app", "cli"),
            ("Accept-Encoding", "gzip, deflate, br, zstd"),
        ];
        let mut all = sent.to_vec();
        all.extend([
            ("x-api-key", "sk-placeholder"),
            ("Connection", "keep-alive"),
            ("Host", "127.0.0.1:3180"),
            ("Content-Length", "2"),
        ]);
        let j = judge(&all, &[]);
        let want: Vec<(String, Vec<u8>)> = sent
            .iter()
            .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
            .collect();
        assert_eq!(
            j,
            Judged {
                forwarded: want,
                ..Judged::default()
            }
        );
    }

    #[test]
    fn other_headers_and_betas_are_dropped() {
        let j = judge(
            &[
                ("X-Forwarded-Host", "evil.example"),
                ("Forwarded", "host=evil.example"),
                (
                    "anthropic-beta",
                    "mcp-client-2025-04-04, files-api-2025-04-14,effort-2025-11-24",
                ),
                ("Anthropic-Beta", "web-fetch-2025-09-10"),
                ("Cookie", "a=b"),
            ],
            &[],
        );
        assert_eq!(
            j.forwarded,
            [("anthropic-beta".to_owned(), b"effort-2025-11-24".to_vec())]
        );
        assert_eq!(j.dropped, ["x-forwarded-host", "forwarded", "cookie"]);
        assert_eq!(
            j.dropped_betas,
            ["mcp-client-2025-04-04", "files-api-2025-04-14", "web-fetch-2025-09-10"]
        );
    }

    #[test]
    fn a_feature_beta_passes_when_the_policy_allows_the_feature() {
        let j = judge(
            &[("anthropic-beta", "mcp-client-2025-04-04,files-api-2025-04-14")],
            &[ServerTool::Mcp],
        );
        assert_eq!(
            j.forwarded,
            [("anthropic-beta".to_owned(), b"mcp-client-2025-04-04".to_vec())]
        );
        assert_eq!(j.dropped_betas, ["files-api-2025-04-14"]);
    }
}
