//! Issue 27, item 1: the session sandbox of `claude --per-command`, end to
//! end with the real binary. A stand-in `claude` (a bash script first on
//! PATH) calls CLAUDE_CODE_SHELL_PREFIX as Claude Code does (one argument,
//! the command), signals it as Claude Code does when it interrupts or times
//! out a call, and prints what it saw; the tests read that. Nothing a call
//! starts outlives it; a signalled call ends with its processes and the
//! shell's status; a killed session fails the next call closed with one
//! line and stops the session; the session socket is out of the sandbox's
//! reach. (The real `claude` in a session: tests/claude.rs.)

use std::process::Output;

use claude_shim_e2e::claude_world::{text, World};
use claude_shim_e2e::*;

/// Runs `claude-shim claude --per-command` with a stand-in `claude` that
/// runs `script` (bash; SHIM is the runtime's binary, ROOT its state root,
/// P the prefix Claude Code would call).
fn session(w: &World, script: &str) -> Output {
    let bin = w.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let claude = bin.join("claude");
    std::fs::write(
        &claude,
        format!("#!/bin/bash\nP=\"$CLAUDE_CODE_SHELL_PREFIX\"\ncd \"$PROJ\"\n{script}\n"),
    )
    .unwrap();
    std::fs::set_permissions(&claude, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    if let Some((uid, gid)) = w.owner {
        std::os::unix::fs::chown(&bin, Some(uid), Some(gid)).unwrap();
        std::os::unix::fs::chown(&claude, Some(uid), Some(gid)).unwrap();
    }
    let mut c = command_as(w.owner, &shim_path());
    c.env_clear()
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()),
        )
        .env("HOME", &w.home)
        .env("SHIM", shim_path())
        .env("ROOT", &w.root)
        .env("PROJ", &w.proj)
        .current_dir(&w.proj);
    if w.owner.is_some() {
        c.env("XDG_RUNTIME_DIR", &w.root);
    }
    c.arg("--root").arg(&w.root).args(["claude", "--per-command"]);
    // Claude Code's prefix process has SIGINT and SIGQUIT at their default.
    // A test run started behind a non-interactive shell's `&` inherits them
    // ignored, which bash cannot undo, and the interrupted call would hang.
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut c, || {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGQUIT, libc::SIG_DFL);
            Ok(())
        });
    }
    output_of(c, w.dir.path())
}

fn lines(out: &Output) -> String {
    let s = text(&out.stdout);
    eprintln!("stdout:\n{s}\nstderr:\n{}", text(&out.stderr));
    s
}

fn assert_has(s: &str, want: &str) {
    assert!(s.lines().any(|l| l == want), "no line {want:?} in:\n{s}");
}

/// Until no process on the host runs `pattern` (the call's processes are
/// killed as it returns; a killed caller's asynchronously), at most 10 s.
const GONE: &str = r#"gone() { for i in $(seq 200); do pgrep -f "$1" >/dev/null || { echo 0; return; }; sleep 0.05; done; pgrep -fc "$1"; }"#;

fn nothing_outlives_a_call(owner: Option<(u32, u32)>) {
    let w = World::new(owner);
    // Backgrounded, detached by setsid, and double-forked with nohup: all
    // three run (the count inside is the control), none is left after.
    let out = session(
        &w,
        &format!(
            r#"{GONE}
"$P" 'sleep 1234.51 & (setsid sleep 1234.52 &); nohup sleep 1234.53 >/dev/null 2>&1 &
for i in $(seq 200); do n=$(ps -eo args | grep -c "^sleep 1234.5[123]"); [ "$n" = 3 ] && break; sleep 0.05; done; echo inside=$n'
echo rc=$?
echo host=$(pgrep -fc '^sleep 1234.5[123]')
"$P" 'echo next=$(ps -eo args | grep -c "^sleep 1234.5[123]")'"#
        ),
    );
    let s = lines(&out);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for want in ["inside=3", "rc=0", "host=0", "next=0"] {
        assert_has(&s, want);
    }
    assert!(w.left_in_state().is_empty(), "left: {:?}", w.left_in_state());
}

#[test]
fn nothing_outlives_a_call_as_root() {
    nothing_outlives_a_call(None);
}

#[test]
fn nothing_outlives_a_call_rootless() {
    nothing_outlives_a_call(Some(test_user()));
}

fn signals_end_the_call(owner: Option<(u32, u32)>) {
    let w = World::new(owner);
    // Job control on: a background job keeps SIGINT at its default, as the
    // prefix process of Claude Code has it. Each call says it started in
    // the project, which the host sees.
    let out = session(
        &w,
        &format!(
            r#"{GONE}
set -m
call() {{ rm -f started; "$P" "$1" & p=$!; until [ -s started ]; do sleep 0.02; done; kill -$2 $p; wait $p; echo "$2=$?"; }}
call 'echo x > started; exec sleep 1234.61' INT
call 'sleep 1234.62 & echo x > started; wait' TERM
call '(setsid sleep 1234.63 &); echo x > started; sleep 1234.64' KILL
rm -f started
echo host=$(gone '^sleep 1234.6[1234]')
"$P" 'echo left=$(ps -eo args | grep -c "^sleep 1234.6")'"#
        ),
    );
    let s = lines(&out);
    for want in ["INT=130", "TERM=143", "KILL=137", "host=0", "left=0"] {
        assert_has(&s, want);
    }
    assert!(w.left_in_state().is_empty(), "left: {:?}", w.left_in_state());
}

#[test]
fn signals_end_the_call_as_root() {
    signals_end_the_call(None);
}

#[test]
fn signals_end_the_call_rootless() {
    signals_end_the_call(Some(test_user()));
}

#[test]
fn a_killed_session_fails_the_next_call_closed() {
    let w = World::new(None);
    let marker = w.dir.path().join("ran-outside");
    let out = session(
        &w,
        &format!(
            r#"trap 'echo got-TERM' TERM
"$P" 'echo one'
id=$(basename "$(dirname "$CLAUDE_SHIM_SESSION")" .session)
pid=$("$SHIM" --root "$ROOT" state "$id" | sed -n 's/.*"pid": *\([0-9]*\).*/\1/p')
echo "spawner=$pid"
kill -9 "$pid"
until "$SHIM" --root "$ROOT" state "$id" | grep -q '"status": *"stopped"'; do sleep 0.02; done
"$P" 'echo two; touch {marker}' > "$HOME/out2" 2> "$HOME/err2"
echo rc2=$?
echo out2=$(cat "$HOME/out2")
echo "err2=$(wc -l < "$HOME/err2") $(cat "$HOME/err2")"
for i in $(seq 200); do sleep 0.05; done"#,
            marker = marker.display()
        ),
    );
    let s = lines(&out);
    assert_has(&s, "one");
    assert!(s.lines().any(|l| l.starts_with("spawner=") && l.len() > 8), "{s}");
    assert_has(&s, "rc2=1");
    assert_has(&s, "out2=");
    let err2 = s.lines().find(|l| l.starts_with("err2=")).unwrap();
    assert!(
        err2.starts_with("err2=1 claude-shim: ") && err2.contains("the command was not run"),
        "{err2}"
    );
    assert!(!marker.exists(), "the command ran outside the sandbox");
    // The session stops: it told claude to end.
    assert_has(&s, "got-TERM");
    assert!(
        text(&out.stderr).contains("claude-shim: the session sandbox ended; stopping claude"),
        "{}",
        text(&out.stderr)
    );
    assert!(w.left_in_state().is_empty(), "left: {:?}", w.left_in_state());
}

#[test]
fn the_session_socket_is_out_of_reach() {
    let w = World::new(None);
    let probe = w.dir.path().join("connect.py");
    std::fs::write(
        &probe,
        "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect(sys.argv[1])\n    print('CONNECTED')\nexcept OSError as e:\n    print('REFUSED', e.errno)\n",
    )
    .unwrap();
    // The project is shared: the probe is there for the call to run.
    std::fs::copy(&probe, w.proj.join("connect.py")).unwrap();
    let out = session(
        &w,
        r#"echo "host: $(python3 "$PROJ/connect.py" "$CLAUDE_SHIM_SESSION")"
"$P" "echo \"inside: \$(python3 connect.py '$CLAUDE_SHIM_SESSION')\"
for f in /proc/1/fd/*; do readlink \$f >/dev/null 2>&1 && echo FD=readable; done; echo FD=done
echo env=\${CLAUDE_SHIM_SESSION:-unset}
echo state=\$(ls -A '$ROOT/.claude-shim' 2>/dev/null | wc -l)"
echo host-state=$(ls -A "$ROOT/.claude-shim" | wc -l)"#,
    );
    let s = lines(&out);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The control: the socket is there and answers, from the host.
    assert_has(&s, "host: CONNECTED");
    assert_has(&s, "inside: REFUSED 2");
    assert!(!s.contains("FD=readable"), "{s}");
    for want in ["FD=done", "env=unset", "state=0"] {
        assert_has(&s, want);
    }
    // The control: the host sees the session's entries there.
    assert!(!s.contains("host-state=0"), "{s}");
    assert!(w.left_in_state().is_empty(), "left: {:?}", w.left_in_state());
}

/// The old per-call path still serves a `claude-shim-shell` called without
/// a session (tests/claude.rs, shell_entry_keeps_bytes_and_exit_codes); a
/// session's entry never falls back to it.
#[test]
fn a_forged_session_path_is_refused() {
    let w = World::new(None);
    let out = session(
        &w,
        r#"CLAUDE_SHIM_SESSION=/tmp/elsewhere/sock "$P" 'echo ran' 2>&1; echo rc=$?"#,
    );
    let s = lines(&out);
    assert!(!s.lines().any(|l| l == "ran"), "{s}");
    assert_has(&s, "rc=1");
    assert!(s.contains("is not a session socket"), "{s}");
}

/// A state root whose path is longer than a socket address holds (108
/// bytes; CI's checkout is deeper than a developer's) still serves calls:
/// the session socket is bound and reached through a handle on its
/// directory, never by its path.
#[test]
fn a_state_root_longer_than_a_socket_address_serves_calls() {
    let mut w = World::new(None);
    let long = w.dir.path().join("state-".to_owned() + &"d".repeat(100));
    std::fs::create_dir_all(&long).unwrap();
    w.root = long;
    let out = session(
        &w,
        r#""$P" 'echo ran in $(pwd)'; echo rc=$?; echo len=${#CLAUDE_SHIM_SESSION}"#,
    );
    let s = lines(&out);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_has(&s, &format!("ran in {}", w.proj.display()));
    assert_has(&s, "rc=0");
    // The control: the socket's path is past what sun_path holds.
    let len: usize = s.lines().find_map(|l| l.strip_prefix("len=")).unwrap().parse().unwrap();
    assert!(len > 108, "{s}");
}
