//! Claude Code, for `claude-shim claude`: the `claude` program and its
//! version, and settings that conflict with running it inside claude-shim.

use std::path::PathBuf;

use super::check::{first_line, Check};
use crate::program::find as find_program;

pub fn checks() -> Vec<Check> {
    let Some(claude) = find_program("claude") else {
        return vec![Check::warn(
            "claude code",
            "claude is not on PATH",
            "npm install -g @anthropic-ai/claude-code (only `claude-shim claude` needs it)",
        )];
    };
    let version = match first_line(&claude, &["--version"]) {
        Ok(v) => Check::ok("claude code", format!("{} ({v})", claude.display())),
        Err(e) => Check::warn("claude code", e, "reinstall @anthropic-ai/claude-code"),
    };
    vec![version, settings()]
}

/// Claude Code's own sandbox (bubblewrap) cannot create its namespaces inside
/// claude-shim's, whose seccomp profile denies nested user namespaces: with
/// `sandbox.enabled: true` every Bash call fails there.
fn settings() -> Check {
    let dir = std::env::var_os("CLAUDE_CONFIG_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".claude")));
    let Some(path) = dir.map(|d| d.join("settings.json")) else {
        return Check::ok("claude code settings", "no HOME, no settings.json");
    };
    let text = match std::fs::read_to_string(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Check::ok("claude code settings", format!("{} does not exist", path.display()))
        }
        Err(e) => {
            return Check::warn(
                "claude code settings",
                format!("read {}: {e}", path.display()),
                "make it readable",
            )
        }
        Ok(t) => t,
    };
    let value: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            return Check::warn(
                "claude code settings",
                format!("{} does not parse: {e}", path.display()),
                "fix the JSON (Claude Code ignores a file it cannot read)",
            )
        }
    };
    let enabled = value.pointer("/sandbox/enabled").and_then(|v| v.as_bool()) == Some(true);
    if enabled {
        Check::warn(
            "claude code settings",
            format!(
                "{} sets sandbox.enabled: true: Claude Code's own sandbox (bwrap) cannot start inside claude-shim's",
                path.display()
            ),
            "set sandbox.enabled to false for `claude-shim claude` (claude-shim policy import translates its rules)",
        )
    } else {
        Check::ok(
            "claude code settings",
            format!("{}: no conflicting setting", path.display()),
        )
    }
}
