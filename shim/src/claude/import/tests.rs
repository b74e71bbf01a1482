use super::paths::{resolve, Syntax};
use super::*;
use serde_json::json;
use std::path::Path;

const SETTINGS: &str = include_str!("../../../../tests/fixtures/import/settings.json");
const SETTINGS_EXPECTED: &str = include_str!("../../../../tests/fixtures/import/settings.expected.toml");
const SRT: &str = include_str!("../../../../tests/fixtures/import/srt-settings.json");
const SRT_EXPECTED: &str = include_str!("../../../../tests/fixtures/import/srt-settings.expected.toml");

fn env() -> Env {
    Env {
        home: "/home/u".into(),
        cwd: "/home/u/proj".into(),
    }
}

fn source(name: &str, scope: Scope, root: &str, value: Value) -> Source {
    Source {
        name: name.into(),
        scope,
        root: root.into(),
        value,
    }
}

/// The imported policy equals the agent policy with the expected
/// `[filesystem]` and `[network]`.
fn assert_imports_as(text: &str, expected: &str) {
    let got = Policy::from_toml_str(text, "p").unwrap_or_else(|e| panic!("{e}\n{text}"));
    let want = Policy::from_toml_str(expected, "p").unwrap();
    let agent = Policy::embedded_default();
    assert_eq!(got.filesystem, want.filesystem, "{text}");
    assert_eq!(got.network, want.network, "{text}");
    assert_eq!(got.environment, agent.environment);
    assert_eq!(got.identity, agent.identity);
    assert_eq!(got.resources, agent.resources);
    assert_eq!(got.seccomp, agent.seccomp);
    assert_eq!(got.name(), "imported");
}

fn comment_has(text: &str, needle: &str) {
    assert!(
        text.lines().any(|l| l.starts_with('#') && l.contains(needle)),
        "no comment with {needle:?} in\n{text}"
    );
}

#[test]
fn claude_settings_fixture() {
    let src = source(
        "/home/u/proj/.claude/settings.json",
        Scope::Project,
        "/home/u/proj",
        serde_json::from_str(SETTINGS).unwrap(),
    );
    let (text, notes) = import(&[src], &env()).unwrap();
    assert_imports_as(&text, SETTINGS_EXPECTED);
    for needle in [
        "sandbox.sandboxMode: unknown key",
        "model: Claude Code's own settings",
        "excludedCommands [\"docker\"]",
        "allowLocalBinding = true",
        "autoAllowBashIfSandboxed = true",
        "\"~/.claude\": would make ~/.claude writable",
        "\"secrets/*.pem\": a glob pattern",
        "\"Bash(curl:*)\": a rule of Claude Code's own prompts",
        "defaultMode = \"acceptEdits\"",
    ] {
        comment_has(&text, needle);
        assert!(notes.iter().any(|n| n.contains(needle)), "{needle:?} not in {notes:#?}");
    }
    comment_has(&text, "\"Edit(src/**)\"");
    comment_has(
        &text,
        "permissions.deny \"Read(/private/**)\" -> filesystem.hidden \"~/proj/private\"",
    );
}

#[test]
fn srt_settings_fixture() {
    let src = source(
        "/home/u/.srt-settings.json",
        Scope::Srt,
        "/home/u/proj",
        serde_json::from_str(SRT).unwrap(),
    );
    assert!(looks_like_srt(&src.value));
    let (text, notes) = import(&[src], &env()).unwrap();
    assert_imports_as(&text, SRT_EXPECTED);
    for needle in [
        "/home/u/.srt-settings.json.proxyMode: unknown key",
        "\"*\": every host",
        "\"[::1]\"",
        "allowUnixSockets",
        "strictAllowlist = true",
        "allowGitConfig = true",
        "enableWeakerNestedSandbox = true",
        "would make ~/.bashrc writable",
        "filesystem.writable \"~/.ssh/sockets\": dropped",
        "\"TERM\": passed by environment.allow",
    ] {
        comment_has(&text, needle);
        assert!(notes.iter().any(|n| n.contains(needle)), "{needle:?} not in {notes:#?}");
    }
    comment_has(&text, "\"GH_TOKEN\" -> not passed");
}

#[test]
fn precedence_order_and_merged_lists() {
    let managed = source(
        "/etc/claude-code/managed-settings.json",
        Scope::Managed,
        "/home/u/proj",
        json!({"sandbox": {"enabled": false, "network": {"allowedDomains": ["corp.example"], "allowManagedDomainsOnly": true}}}),
    );
    let user = source(
        "/home/u/.claude/settings.json",
        Scope::User,
        "/home/u/.claude",
        json!({
            "sandbox": {"enabled": true, "network": {"allowedDomains": ["github.com"], "deniedDomains": ["bad.example"]},
                        "filesystem": {"denyRead": ["cache/secret"]}},
            "permissions": {"allow": ["WebFetch(domain:docs.rs)"]}
        }),
    );
    let (text, _) = import(&[managed, user], &env()).unwrap();
    let p = Policy::from_toml_str(&text, "p").unwrap();
    let hosts =
        |l: &[claude_shim_bundle::policy::values::HostPattern]| l.iter().map(|h| h.0.clone()).collect::<Vec<_>>();
    // allowManagedDomainsOnly: only managed hosts are allowed; denials merge from all.
    assert_eq!(hosts(&p.network.allow), ["corp.example"]);
    assert_eq!(hosts(&p.network.deny), ["bad.example"]);
    comment_has(&text, "ignored: managed settings set allowManagedDomainsOnly");
    // Relative sandbox paths of user settings are relative to its directory.
    assert!(text.contains("\"~/.claude/cache/secret\""), "{text}");
    // The highest source decides sandbox.enabled.
    comment_has(
        &text,
        "managed-settings.json: sandbox.enabled = false: claude-shim sandboxes anyway",
    );
    let order: Vec<&str> = text.lines().filter(|l| l.contains("settings)")).collect();
    assert_eq!(
        order,
        [
            "#   /etc/claude-code/managed-settings.json (managed settings)",
            "#   /home/u/.claude/settings.json (user settings)"
        ]
    );
}

#[test]
fn path_syntaxes() {
    let e = env();
    let root = Path::new("/home/u/proj");
    let r = |p, s| resolve(p, s, root, &e).map(|p| p.display().to_string());
    assert_eq!(r("//etc/x", Syntax::Rule).unwrap(), "/etc/x");
    assert_eq!(r("/etc/x", Syntax::Rule).unwrap(), "/home/u/proj/etc/x");
    assert_eq!(r("/etc/x", Syntax::Sandbox).unwrap(), "/etc/x");
    assert_eq!(r("~/a/../b/**", Syntax::Sandbox).unwrap(), "/home/u/b");
    assert_eq!(r("x", Syntax::Sandbox).unwrap(), "/home/u/proj/x");
    assert!(r("~root/x", Syntax::Srt).is_err());
    assert_eq!(r("/../..", Syntax::Srt).unwrap(), "/");
    assert!(r("*.key", Syntax::Rule).is_err());
}

#[test]
fn odd_values_are_named_not_fatal() {
    let src = source(
        "s.json",
        Scope::Named,
        "/home/u",
        json!({"sandbox": {"network": {"allowedDomains": "github.com"}, "filesystem": [1], "enabled": "yes"},
               "permissions": {"deny": [7, "Read(\nx)"]}}),
    );
    let (text, notes) = import(&[src], &env()).unwrap();
    assert!(notes.iter().any(|n| n.contains("is not a list")), "{notes:#?}");
    assert!(notes.iter().any(|n| n.contains("7 is not a string")), "{notes:#?}");
    assert!(notes.iter().any(|n| n.contains("is not a boolean")), "{notes:#?}");
    // A line break in a value stays inside its comment line.
    assert!(
        text.lines()
            .all(|l| l.is_empty() || l.starts_with('#') || !l.contains("Read(")),
        "{text}"
    );
    Policy::from_toml_str(&text, "p").unwrap();
}

#[test]
fn the_agents_tool_binds_stay_unless_a_denied_read_takes_them() {
    let src = source(
        "s.json",
        Scope::Named,
        "/home/u",
        json!({"sandbox": {"filesystem": {"denyRead": ["~/.config"]}}}),
    );
    let (text, notes) = import(&[src], &env()).unwrap();
    let p = Policy::from_toml_str(&text, "p").unwrap_or_else(|e| panic!("{e}\n{text}"));
    let ro: Vec<String> = p.filesystem.readonly.iter().map(|b| b.path.to_string()).collect();
    assert!(ro.contains(&"~/.cargo".to_owned()), "{ro:?}");
    assert!(!ro.contains(&"~/.config/git".to_owned()), "{ro:?}");
    assert!(
        notes
            .iter()
            .any(|n| n.contains("~/.config/git") && n.contains("dropped")),
        "{notes:#?}"
    );
}

/// Issue 26: a grant below ~/.claude is dropped like one of ~/.claude; an
/// entry the policy refuses gets one verdict (dropped), not two; the
/// nested-namespace key is known and dropped on purpose; sandbox.enabled
/// = true is explained.
#[test]
fn one_verdict_per_entry_and_the_keys_of_issue_26() {
    let src = source(
        "/home/u/.claude/settings.json",
        Scope::User,
        "/home/u/.claude",
        json!({"sandbox": {"enabled": true, "allowNestedUserNamespaces": true,
                           "filesystem": {"allowWrite": ["~/.claude/agents", "~/.ssh/known_hosts", "~/.config/git/hooks"]}}}),
    );
    let (text, notes) = import(&[src], &env()).unwrap();
    let p = Policy::from_toml_str(&text, "p").unwrap_or_else(|e| panic!("{e}\n{text}"));
    let w: Vec<String> = p.filesystem.writable.iter().map(|b| b.path.to_string()).collect();
    assert!(w.is_empty(), "{w:?}\n{text}");
    for (entry, why) in [
        ("\"~/.claude/agents\"", "lies in ~/.claude"),
        ("\"~/.config/git/hooks\"", "lies in ~/.config/git"),
        ("\"~/.ssh/known_hosts\"", "dropped"),
    ] {
        let lines: Vec<&str> = text.lines().filter(|l| l.contains(entry)).collect();
        assert_eq!(lines.len(), 1, "{entry}: one verdict, got {lines:#?}");
        assert!(lines[0].contains(why) && lines[0].contains("allowWrite"), "{lines:?}");
        assert_eq!(notes.iter().filter(|n| n.contains(entry)).count(), 1, "{notes:#?}");
    }
    assert!(!text.contains("-> filesystem.writable"), "{text}");
    comment_has(&text, "allowNestedUserNamespaces = true: dropped on purpose");
    assert!(!text.contains("allowNestedUserNamespaces: unknown key"), "{text}");
    comment_has(&text, "sandbox.enabled = true: claude-shim is the sandbox");
}
