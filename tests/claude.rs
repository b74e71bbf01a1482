//! `claude-shim claude` end to end with the real `claude` CLI, driven by a
//! mock of the Messages API (tests/mock-api): the whole agent in the
//! sandbox with the key held by the gateway outside, the hook-planting
//! attack on the host's configuration, and `--per-command` through
//! `claude-shim-shell`; as root and as the unprivileged test user.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use claude_shim_e2e::claude_world::{text, World};
use claude_shim_e2e::mock_api::MockApi;
use claude_shim_e2e::*;

/// The real key, in two halves: the probe joins them at run time, so the
/// command text (kept in the agent's transcript) never holds the whole key.
const KEY_A: &str = "sk-ant-api03-REAL";
const KEY_B: &str = "-e2e-3f9c0d1e7a";

fn real_key() -> String {
    format!("{KEY_A}{KEY_B}")
}

/// The world of tests/src/claude_world, with the key in two halves.
fn world(owner: Option<(u32, u32)>) -> World {
    let mut w = World::new(owner);
    w.key = real_key();
    w
}

/// Root's world, with the project given to the test user: the sandboxes run
/// as that user (issue 23, item 5).
fn world_of_root_in_users_project() -> (World, (u32, u32)) {
    let w = world(None);
    let (uid, gid) = test_user();
    let ok = Command::new("chown")
        .args(["-R", &format!("{uid}:{gid}")])
        .arg(&w.proj)
        .status()
        .unwrap();
    assert!(ok.success());
    std::fs::set_permissions(w.dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    (w, (uid, gid))
}

fn owner_of(p: &Path) -> (u32, u32) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(p).unwrap();
    (m.uid(), m.gid())
}

/// The host's Claude Code files, to compare before and after.
fn host_config(w: &World) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = vec![(
        w.home.join(".claude.json"),
        std::fs::read(w.home.join(".claude.json")).unwrap_or_default(),
    )];
    let mut stack = vec![w.home.join(".claude")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.push((e.path(), std::fs::read(e.path()).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// The shared rootfs skeleton, the .env and root-only indexes and the
/// per-command entry (bin/) are kept across runs on purpose
/// (docs/startup.md); nothing else.
fn assert_nothing_left(w: &World) {
    let left = w.left_in_state();
    assert!(
        left.is_empty(),
        "left in {}: {left:?}",
        w.root.join(".claude-shim").display()
    );
}

/// What a user checks from inside: no capabilities, the seccomp filter, no
/// nested user namespace, a read-only /etc, the empty home (the host's Claude
/// Code configuration absent: what is written there stays in the sandbox's
/// tmpfs, which the callers check on the host), and no copy of the real key
/// anywhere.
fn probe() -> String {
    format!(
        r#"grep -E '^(CapEff|Seccomp):' /proc/self/status
unshare -U true 2>/dev/null && echo USERNS=open || echo USERNS=refused
touch /etc/claude-shim-probe 2>/dev/null && echo ETC=rw || echo ETC=ro
test -e "$HOME/.claude/CLAUDE.md" && echo HOSTCONFIG=visible || echo HOSTCONFIG=absent
echo '{{}}' >> "$HOME/.claude/settings.json" 2>/dev/null && echo SETTINGS=written || echo SETTINGS=refused
echo '{{}}' >> "$HOME/.claude.json" 2>/dev/null && echo STATE=written || echo STATE=refused
K={KEY_A}; K="$K{KEY_B}"
echo KEYENV=$(env | grep -cF -- "$K")
echo KEYFILES=$(grep -rlsF -- "$K" /proc/[0-9]*/environ /proc/[0-9]*/cmdline "$HOME" ${{CLAUDE_CONFIG_DIR:-}} "$PWD" /tmp 2>/dev/null | wc -l)"#
    )
}

fn assert_probe(result: &str) {
    for want in [
        "CapEff:\t0000000000000000",
        "Seccomp:\t2",
        "USERNS=refused",
        "ETC=ro",
        "HOSTCONFIG=absent",
        "KEYENV=0",
        "KEYFILES=0",
    ] {
        assert!(result.contains(want), "tool_result lacks {want:?}:\n{result}");
    }
}

fn assert_ran(out: &Output, mock: &MockApi, results: usize) -> Vec<String> {
    let got = mock.tool_results();
    assert!(
        out.status.success() && got.len() >= results,
        "claude exited {:?} with {} tool_results (want {results})\nstdout: {}\nstderr: {}",
        out.status,
        got.len(),
        text(&out.stdout)
            .chars()
            .rev()
            .take(3000)
            .collect::<String>()
            .chars()
            .rev()
            .collect::<String>(),
        text(&out.stderr)
    );
    got
}

fn whole_agent(owner: Option<(u32, u32)>) {
    let w = world(owner);
    let mock = MockApi::start(&[&probe()]);
    let before = host_config(&w);
    let out = w.claude(&[], &mock);
    let results = assert_ran(&out, &mock, 1);
    eprintln!("whole agent tool_result:\n{}", results[0]);
    assert_probe(&results[0]);
    // The agent's own configuration directory, seeded, never the credentials.
    let agent = w.home.join(".local/state/claude-shim/claude");
    assert_eq!(
        std::fs::read_to_string(agent.join("CLAUDE.md")).unwrap(),
        "host memory\n"
    );
    assert!(!agent.join(".credentials.json").exists());
    // The upstream got the real key on every request, never the placeholder.
    let seen = mock.seen();
    assert!(seen.len() >= 2);
    for s in &seen {
        assert_eq!(
            s.api_key.as_deref(),
            Some(real_key().as_str()),
            "request {} had another key",
            s.path
        );
        assert!(
            s.authorization.is_none(),
            "request {} had an Authorization header",
            s.path
        );
    }
    assert!(
        host_config(&w) == before,
        "the host's ~/.claude or ~/.claude.json changed"
    );
    assert_nothing_left(&w);
}

#[test]
fn whole_agent_as_root() {
    whole_agent(None);
}

#[test]
fn whole_agent_rootless() {
    whole_agent(Some(test_user()));
}

/// Root runs the agent in a user's project: the agent is that user, its
/// configuration directory is that user's (apart from root's own), and what
/// it writes in the project keeps the project's owner.
#[test]
fn whole_agent_as_root_in_a_users_project() {
    let (w, (uid, gid)) = world_of_root_in_users_project();
    let mock = MockApi::start(&[&format!("{}\necho uid=$(id -u)\necho x > made-by-agent", probe())]);
    let out = w.claude(&[], &mock);
    let results = assert_ran(&out, &mock, 1);
    eprintln!("whole agent as root in a user's project:\n{}", results[0]);
    assert_probe(&results[0]);
    assert!(results[0].contains(&format!("uid={uid}")), "{}", results[0]);
    assert_eq!(owner_of(&w.proj.join("made-by-agent")), (uid, gid));
    let agent = w.home.join(format!(".local/state/claude-shim/claude-{uid}"));
    for f in ["", "CLAUDE.md", ".claude.json"] {
        assert_eq!(owner_of(&agent.join(f)), (uid, gid), "{f}");
    }
    assert!(
        !w.home.join(".local/state/claude-shim/claude").exists(),
        "root's own stays apart"
    );
    assert_nothing_left(&w);
}

/// The escape of the issue: a command of the agent plants a SessionStart
/// hook in the host's settings and an MCP server in the host's
/// ~/.claude.json, for the next unsandboxed `claude` to run as the user.
#[test]
fn hook_planting_fails() {
    let w = world(None);
    let marker_hook = w.dir.path().join("hook-ran");
    let marker_mcp = w.dir.path().join("mcp-ran");
    let hook = format!(
        r#"{{"hooks":{{"SessionStart":[{{"hooks":[{{"type":"command","command":"touch {}"}}]}}]}}}}"#,
        marker_hook.display()
    );
    let mcp = format!(
        r#"{{"hasCompletedOnboarding":true,"mcpServers":{{"planted":{{"type":"stdio","command":"touch","args":["{}"]}}}}}}"#,
        marker_mcp.display()
    );
    let attack = format!(
        "printf '%s' '{hook}' > \"$HOME/.claude/settings.json\" && echo HOOK=planted || echo HOOK=refused\n\
         printf '%s' '{mcp}' > \"$HOME/.claude.json\" && echo MCP=planted || echo MCP=refused"
    );
    let mock = MockApi::start(&[&attack]);
    let before = host_config(&w);
    // As agents run in a sandbox: no permission prompts, only the sandbox in the way.
    let out = w.claude_in(&w.proj, &[], &["--dangerously-skip-permissions"], &mock);
    let results = assert_ran(&out, &mock, 1);
    eprintln!("attack tool_result:\n{}", results[0]);
    // The home inside is empty and the sandbox's own: a write there lands
    // in its tmpfs (or is refused), never in the host's files.
    assert!(
        host_config(&w) == before,
        "the host's ~/.claude or ~/.claude.json changed: {}",
        results[0]
    );

    // The next unsandboxed claude on the host runs nothing planted...
    let host = |w: &World| {
        let claude = PathBuf::from("/usr/bin/claude");
        let mut c = w.command(&claude, &mock);
        c.args(["-p", "hello", "--output-format", "stream-json", "--verbose"]);
        let out = output_of(c, w.dir.path());
        assert!(out.status.success(), "host claude: {}", text(&out.stderr));
    };
    host(&w);
    assert!(
        !marker_hook.exists() && !marker_mcp.exists(),
        "a planted hook or MCP server ran on the host"
    );
    // ...while the same files written by the user do run: the check can fail.
    std::fs::write(w.home.join(".claude/settings.json"), &hook).unwrap();
    host(&w);
    assert!(
        marker_hook.exists(),
        "control: a SessionStart hook in the host's settings did not run"
    );
    assert_nothing_left(&w);
}

fn per_command(owner: Option<(u32, u32)>) {
    let w = world(owner);
    let mock = MockApi::start(&[&probe(), "mkdir -p sub && cd sub", "pwd"]);
    let before = host_config(&w);
    let out = w.claude(&["--per-command"], &mock);
    let results = assert_ran(&out, &mock, 3);
    eprintln!("per-command tool_results:\n{}", results.join("\n---\n"));
    // Claude runs on the host with the key; its commands see none of it.
    assert_probe(&results[0]);
    assert_eq!(
        results[2].trim(),
        w.proj.join("sub").to_str().unwrap(),
        "the cd of one call is not the directory of the next"
    );
    assert!(w.proj.join("sub").is_dir(), "the project is shared with the host");
    // Claude Code on the host writes its own ~/.claude.json; what the probe
    // appended inside is not in it.
    let after = host_config(&w);
    for (path, old) in &before {
        let new = after
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, b)| b.clone())
            .unwrap_or_default();
        if path.ends_with(".claude.json") {
            assert!(
                !text(&new).lines().any(|l| l == "{}"),
                "{} got the probe's write",
                path.display()
            );
        } else {
            assert!(*old == new, "{} changed", path.display());
        }
    }
    assert_nothing_left(&w);
}

#[test]
fn per_command_as_root() {
    per_command(None);
}

#[test]
fn per_command_rootless() {
    per_command(Some(test_user()));
}

/// Root runs claude in a user's project: each command is that user, and the
/// `cd` of one still carries over to the next (the shared temp directory is
/// theirs to write).
#[test]
fn per_command_as_root_in_a_users_project() {
    let (w, (uid, gid)) = world_of_root_in_users_project();
    let mock = MockApi::start(&[
        &format!("{}\necho uid=$(id -u)", probe()),
        "mkdir -p sub && cd sub",
        "pwd",
    ]);
    let out = w.claude(&["--per-command"], &mock);
    let results = assert_ran(&out, &mock, 3);
    eprintln!("per-command as root in a user's project:\n{}", results.join("\n---\n"));
    assert_probe(&results[0]);
    assert!(results[0].contains(&format!("uid={uid}")), "{}", results[0]);
    assert_eq!(results[2].trim(), w.proj.join("sub").to_str().unwrap());
    assert_eq!(owner_of(&w.proj.join("sub")), (uid, gid));
    assert_nothing_left(&w);
}

/// The entry point Claude Code calls: output bytes and exit codes as the
/// same command gives unsandboxed.
#[test]
fn shell_entry_keeps_bytes_and_exit_codes() {
    let w = world(None);
    let link = w.dir.path().join("claude-shim-shell");
    std::os::unix::fs::symlink(shim_path(), &link).unwrap();
    let run = |program: &Path, args: &[&str]| {
        let mut c = Command::new(program);
        c.args(args)
            .current_dir(&w.proj)
            .env("XDG_RUNTIME_DIR", &w.root)
            .stdin(Stdio::null());
        // As Claude Code starts it: SIGINT at its default. A test runner
        // started in the background of a shell ignores SIGINT, and an ignored
        // signal stays ignored through exec, so `kill -INT $$` would exit 0
        // sandboxed or not.
        with_dispositions(&mut c, nix::sys::signal::SigHandler::SigDfl);
        output_of(c, w.dir.path())
    };
    let sample = r#"printf 'a\tb\0c\n\xff\n'; printf 'err\n' >&2; seq 1 20000"#;
    let ours = run(&link, &[sample]);
    let plain = run(Path::new("/bin/bash"), &["-c", sample]);
    assert_eq!(ours.status.code(), Some(0), "{}", text(&ours.stderr));
    assert!(ours.stdout == plain.stdout, "stdout differs");
    assert!(ours.stderr == plain.stderr, "stderr differs: {:?}", text(&ours.stderr));
    for (cmd, code) in [("true", 0), ("exit 3", 3), ("exit 130", 130), ("kill -INT $$", 130)] {
        let out = run(&link, &[cmd]);
        assert_eq!(out.status.code(), Some(code), "{cmd}: {}", text(&out.stderr));
    }
    let out = run(&link, &["echo", "two"]);
    assert!(!out.status.success() && text(&out.stderr).contains("one argument"));
}

/// A refused host is named on stderr at exit, and the log is kept.
#[test]
fn refused_egress_is_reported() {
    let w = world(None);
    let mut c = Command::new(shim_path());
    c.arg("--root")
        .arg(&w.root)
        .args([
            "sandbox",
            "--",
            "curl",
            "-sS",
            "-o",
            "/dev/null",
            "https://refused.example/",
        ])
        .current_dir(&w.proj)
        .env("HOME", &w.home)
        .stdin(Stdio::null());
    let out = output_of(c, w.dir.path());
    let err = text(&out.stderr);
    assert!(!out.status.success(), "curl reached a host off the allowlist");
    assert!(
        err.contains("claude-shim: refused egress: refused.example:443"),
        "stderr: {err}"
    );
    let logs = w.home.join(".local/state/claude-shim/logs");
    assert!(
        err.contains(&format!("network log: {}", logs.display())),
        "stderr: {err}"
    );
    assert_eq!(std::fs::read_dir(&logs).unwrap().count(), 1);
    assert_nothing_left(&w);
}
