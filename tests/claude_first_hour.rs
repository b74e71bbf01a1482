//! A Claude Code user's first hour under `claude-shim claude` (issue 26,
//! item 3), each with the real `claude` CLI and the real binary: settings
//! that turn Claude Code's own sandbox on, a relative `--root` with
//! `--per-command`, a project the user cannot write, claude-shim run inside
//! its own sandbox, an upstream that does not answer, refusals watched
//! while the sandbox runs and read after it ended, and the messages of a
//! project at `/` and of ssh refused by the policy.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use claude_shim_e2e::claude_world::{tail, text, World};
use claude_shim_e2e::mock_api::MockApi;
use claude_shim_e2e::*;

fn enable_own_sandbox(w: &World) {
    std::fs::write(
        w.home.join(".claude/settings.json"),
        r#"{"theme": "host", "sandbox": {"enabled": true, "failIfUnavailable": false}}"#,
    )
    .unwrap();
}

/// With `sandbox.enabled: true` in the user's settings, the Bash tool runs
/// (it failed with `bwrap: Creating new namespace failed`), and the user is
/// told once that Claude Code's own sandbox is off; in both modes.
#[test]
fn claude_codes_own_sandbox_is_off_under_claude_shim() {
    for mode in [&[][..], &["--per-command"][..]] {
        let w = World::new(None);
        enable_own_sandbox(&w);
        let mock = MockApi::start(&["echo BASH-RAN-$((6*7))"]);
        let out = w.claude(mode, &mock);
        let results = mock.tool_results();
        let err = text(&out.stderr);
        assert!(
            out.status.success() && results.first().is_some_and(|r| r.contains("BASH-RAN-42")),
            "{mode:?}: exit {:?}, tool_results {results:?}\nstderr: {err}\nstdout: {}",
            out.status,
            tail(&out.stdout)
        );
        assert!(!results[0].contains("bwrap"), "{results:?}");
        let notice = format!(
            "claude-shim: Claude Code's own sandbox (sandbox.enabled in {}) is off for this session",
            w.home.join(".claude/settings.json").display()
        );
        assert_eq!(err.matches(&notice).count(), 1, "{mode:?}: stderr: {err}");
    }
    // Control: the same settings forced back on by the user's own
    // `--settings` (the last one wins) fail as they did before: inside the
    // whole agent bwrap cannot make its namespaces; per command, bwrap
    // wraps claude-shim-shell, whose filter (no AF_UNIX) keeps it from the
    // session's socket, so the call fails closed.
    for (mode, why) in [
        (&[][..], "bwrap: Creating new namespace failed"),
        (&["--per-command"][..], "the command was not run"),
    ] {
        let w = World::new(None);
        enable_own_sandbox(&w);
        let mock = MockApi::start(&["echo BASH-RAN-$((6*7))"]);
        let out = w.claude_in(&w.proj, mode, &["--settings", r#"{"sandbox":{"enabled":true}}"#], &mock);
        let results = mock.tool_results();
        assert!(
            results
                .first()
                .is_some_and(|r| !r.contains("BASH-RAN-42") && r.contains(why)),
            "control {mode:?}: {results:?}\nstderr: {}",
            text(&out.stderr)
        );
    }
}

/// `--root` given as a relative path reaches the per-command sandboxes:
/// each call's state is made under it, none under the default root.
#[test]
fn per_command_sandboxes_use_a_relative_root() {
    let w = World::new(Some(test_user()));
    let alt = w.dir.path().join("alt");
    std::fs::create_dir(&alt).unwrap();
    let (uid, gid) = test_user();
    std::os::unix::fs::chown(&alt, Some(uid), Some(gid)).unwrap();
    let mock = MockApi::start(&["echo CALL-RAN"]);
    let mut c = w.command(&shim_path(), &mock);
    // From the project, `../alt` is the directory above; the default root
    // would be $XDG_RUNTIME_DIR/claude-shim.
    c.args(["--root", "../alt", "claude", "--per-command", "--"])
        .args(["-p", "run the test command", "--allowedTools", "Bash"])
        .args(["--output-format", "stream-json", "--verbose"]);
    let out = output_of(c, w.dir.path());
    let results = mock.tool_results();
    assert!(
        out.status.success() && results.first().is_some_and(|r| r.contains("CALL-RAN")),
        "exit {:?}, tool_results {results:?}\nstderr: {}",
        out.status,
        text(&out.stderr)
    );
    let default = w.root.join("claude-shim");
    assert!(!default.exists(), "a call used the default root {}", default.display());
    let made: Vec<String> = std::fs::read_dir(alt.join(".claude-shim"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        made.iter().any(|n| is_kept_cache(n)),
        "no call's state under --root: {made:?}"
    );
}

/// A project the user cannot write: one line naming the project and what to
/// do, and no warning about a bundle that was never written.
#[test]
fn a_project_the_user_cannot_write_is_named() {
    let w = World::new(Some(test_user()));
    let ro = w.dir.path().join("readonly-project");
    std::fs::create_dir(&ro).unwrap(); // root's, 0755: the test user cannot write it
    let mock = MockApi::start(&[]);
    for verb in [&["sandbox", "--", "true"][..], &["claude", "--", "-p", "hi"][..]] {
        let mut c = w.command(&shim_path(), &mock);
        c.current_dir(&ro).arg("--root").arg(&w.root).args(verb);
        let out = output_of(c, w.dir.path());
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{verb:?} ran in a project it cannot write");
        assert_eq!(err.lines().count(), 1, "{verb:?}: one line, got: {err}");
        assert!(
            err.contains(&format!("failed to use {} as the project", ro.display()))
                && err.contains("claude-shim-test cannot write it")
                && err.contains("run from a project you can write"),
            "{verb:?}: {err}"
        );
        assert!(!err.contains("remove bundle"), "{verb:?}: {err}");
    }
}

/// claude-shim started inside a sandbox says so for every verb that
/// creates containers (it said `failed to detect cgroup setup`).
#[test]
fn claude_shim_inside_its_sandbox_says_nested() {
    let w = World::new(None);
    let mock = MockApi::start(&[]);
    let shim = shim_path();
    // The sandbox runs the host's binary by its path: not one a sandbox
    // replaces with its own directory (a clone under /tmp or /var/tmp).
    if let Some(why) = hidden_in_a_sandbox(&shim) {
        panic!("{why}");
    }
    for inner in [
        "sandbox -- true",
        "claude -- -p hi",
        "claude --per-command -- -p hi",
        "verify",
        "run --bundle /nonexistent x",
        "create --bundle /nonexistent x",
    ] {
        let mut c = w.command(&shim, &mock);
        c.arg("--root").arg(&w.root).args(["sandbox", "--", "sh", "-c"]);
        c.arg(format!("{} {inner}", shell_word(&shim)));
        let out = output_of(c, w.dir.path());
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{inner}: ran nested");
        assert!(
            err.contains("claude-shim cannot run inside a claude-shim sandbox (nested sandbox"),
            "{inner}: {err}"
        );
        assert!(!err.contains("cgroup"), "{inner}: {err}");
    }
}

/// Nothing listens at ANTHROPIC_BASE_URL: `claude -p` ends (it retried a
/// 502 silently for minutes) with the gateway's message, and the user's
/// terminal gets one line naming the upstream and the cause.
#[test]
fn a_dead_upstream_ends_claude_with_its_name() {
    let w = World::new(None);
    let mock = MockApi::start(&[]);
    // A port nobody listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let upstream = format!("127.0.0.1:{port}");
    let mut c = w.command(&shim_path(), &mock);
    c.env("ANTHROPIC_BASE_URL", format!("http://{upstream}"))
        .arg("--root")
        .arg(&w.root)
        .args(["claude", "--", "-p", "hello"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    // Generous: a hang (minutes of retries) fails the test, the time does not.
    let limit = Instant::now() + Duration::from_secs(150);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("claude -p kept waiting for an upstream that does not answer");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = child.wait_with_output().unwrap();
    let (stdout, err) = (text(&out.stdout), text(&out.stderr));
    let line = format!("claude-shim: API gateway: the upstream {upstream} did not answer: connect {upstream}:");
    assert_eq!(err.matches(&line).count(), 1, "stderr: {err}\nstdout: {stdout}");
    assert!(err.contains("Connection refused"), "{err}");
    assert!(stdout.contains("claude-shim gateway: the upstream"), "stdout: {stdout}");
    assert!(mock.seen().is_empty());
}

/// `denials --follow` shows a refused host while the sandbox still runs,
/// and ends when it ends.
#[test]
fn denials_follow_shows_refusals_while_the_sandbox_runs() {
    let w = World::new(None);
    let stop = w.proj.join("stop");
    let mut sb = Command::new(shim_path());
    sb.arg("--root")
        .arg(&w.root)
        .args(["sandbox", "--", "sh", "-c"])
        // Ends on its own after 120 s if the test never says stop.
        .arg("curl -sS -o /dev/null https://refused.example/; n=0; while [ ! -e stop ] && [ $n -lt 1200 ]; do n=$((n+1)); sleep 0.1; done")
        .current_dir(&w.proj)
        .env("HOME", &w.home)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // Ended by its pid if the test fails while it runs.
    let mut sandbox = Background::shim(sb.spawn().unwrap(), &shim_path(), &w.root);
    // The sandbox's proxy log appears once it is set up: follow it then.
    let ours = w.root.join(".claude-shim");
    let has_log = || {
        std::fs::read_dir(&ours)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.path().join("proxy.log").is_file())
    };
    let start = Instant::now();
    while !has_log() {
        assert!(start.elapsed() < Duration::from_secs(60), "the sandbox did not start");
        assert!(sandbox.try_wait().is_none(), "the sandbox ended early");
        std::thread::sleep(Duration::from_millis(100));
    }
    // From the project: its running sandbox.
    let mut follow = Background::new(
        Command::new(shim_path())
            .arg("--root")
            .arg(&w.root)
            .args(["denials", "--follow"])
            .current_dir(&w.proj)
            .env("HOME", &w.home)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(follow.child().stdout.take().unwrap()).lines();
    let want = "claude-shim: refused egress: refused.example:443";
    let mut seen = Vec::new();
    for l in lines.by_ref() {
        let l = l.unwrap();
        seen.push(l.clone());
        if l.starts_with(want) {
            break;
        }
    }
    assert!(seen.iter().any(|l| l.starts_with(want)), "follow printed: {seen:?}");
    // Seen while the sandbox still waits for the stop file.
    assert!(sandbox.try_wait().is_none(), "the sandbox ended before the line");
    std::fs::write(&stop, "").unwrap();
    // curl's refusal is the script's business; the sandbox ends when told to.
    sandbox.wait(Duration::from_secs(60));
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    assert!(follow.wait(Duration::from_secs(30)).success(), "follow: {rest:?}");
    assert!(!rest.iter().any(|l| l.starts_with(want)), "printed twice: {rest:?}");
    assert!(
        seen.iter()
            .any(|l| l.starts_with(want) && l.contains("; to allow it: claude-shim --root ")),
        "offered no command: {seen:?}"
    );
    // After the run, from its kept network log (it failed with `no running sandbox`).
    let after = Command::new(shim_path())
        .arg("--root")
        .arg(&w.root)
        .arg("denials")
        .current_dir(&w.proj)
        .env("HOME", &w.home)
        .output()
        .unwrap();
    let out = text(&after.stdout);
    assert!(after.status.success(), "{}{out}", text(&after.stderr));
    assert!(out.contains("(ended; from its kept network log)"), "{out}");
    assert!(out.contains(&format!("{want} (not on the allowlist)\n")), "{out}");
}

/// `claude --per-command` from `/` names `/`, not the state directory
/// below it (it said `the state directory ... lies in the project /`).
#[test]
fn a_project_at_the_root_is_named() {
    let w = World::new(None);
    let mock = MockApi::start(&[]);
    let mut c = w.command(&shim_path(), &mock);
    c.current_dir("/")
        .arg("--root")
        .arg(&w.root)
        .args(["claude", "--per-command", "--", "-p", "hi"]);
    let out = output_of(c, w.dir.path());
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(
        err.trim(),
        "claude-shim: error: failed to run claude from a project directory: / is the whole host, which the sandbox would make writable"
    );
}

/// ssh refused by the policy reads as one sentence after "failed to" (it
/// read `failed to the sandbox's network policy refuses ...`).
#[test]
fn ssh_refused_by_the_policy_reads_as_a_sentence() {
    let w = World::new(None);
    let mock = MockApi::start(&[]);
    let mut c = w.command(&shim_path(), &mock);
    c.arg("--root").arg(&w.root).args([
        "sandbox",
        "--",
        "/dev/.claude-shim-connect",
        "__connect",
        "refused.example",
        "22",
    ]);
    let out = output_of(c, w.dir.path());
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(
            "claude-shim: error: failed to reach refused.example:22: the sandbox's network policy refuses it \
             (allow it as refused.example:22, or *:22 for every allowed host; from the host, while this sandbox \
             runs: claude-shim allow refused.example:22)"
        ),
        "{err}"
    );
}
