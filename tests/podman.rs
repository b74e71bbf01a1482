//! podman --runtime claude-shim, end to end: a private podman per test
//! (hack/podman), the real binary under conmon, and what a user sees (podman's
//! output, exit codes and states), with runc as the baseline where the two
//! must agree. Each test ends by checking nothing is left behind.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use claude_shim_e2e::engines::*;
use claude_shim_e2e::shim_path;

const RT: &str = "claude-shim";

/// A shell loop that reports signals and leaves a marker once it runs.
const LOOP: &str = "trap 'echo got-usr1' USR1; trap 'echo got-term; exit 0' TERM; \
                    echo started; echo ready > /tmp/ready; while :; do sleep 0.1; done";

/// `podman ARGS` at a terminal.
fn at_pty(pm: &Podman, podman_args: &[&str]) -> (Option<i32>, String) {
    let mut argv = vec!["podman"];
    argv.extend_from_slice(podman_args);
    let conf = pm.dir.path().join("containers.conf");
    let storage = pm.dir.path().join("storage.conf");
    at_terminal(
        &argv,
        &[("CONTAINERS_CONF", &conf), ("CONTAINERS_STORAGE_CONF", &storage)],
        pm.dir.path(),
    )
}

fn detached(pm: &Podman, name: &str, cmd: &[&str]) {
    let mut rest = vec!["-d", "--name", name, IMAGE];
    rest.extend_from_slice(cmd);
    let out = pm.run_container("run", RT, &rest);
    assert!(
        out.status.success(),
        "podman run -d {name}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

fn wait_ready(pm: &Podman, name: &str) {
    wait_until(Duration::from_secs(10), &format!("{name} to start its loop"), || {
        pm.run(&["exec", name, "cat", "/tmp/ready"])
            .status
            .success()
            .then_some(())
    });
}

#[test]
fn run_rm_and_exit_codes() {
    let pm = Podman::new();
    let out = pm.run_container("run", RT, &["--rm", IMAGE, "echo", "hello from claude-shim"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "hello from claude-shim\n");

    let out = pm.run_container("run", RT, &["--rm", IMAGE, "sh", "-c", "exit 3"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));

    // Without --rm the container stays, exited, with its logs.
    let out = pm.run_container(
        "run",
        RT,
        &["--name", "kept", IMAGE, "sh", "-c", "echo kept-output; exit 3"],
    );
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(pm.status("kept"), "exited");
    assert_eq!(pm.inspect("kept", "{{.State.ExitCode}}"), "3");
    assert_eq!(pm.ok(&["logs", "kept"]), "kept-output\n");
    pm.ok(&["rm", "kept"]);

    // SIGKILL from `podman kill`: the foreground run reports 128 + 9.
    let mut run = pm
        .container_command("run", RT, &["--rm", "--name", "killed", IMAGE, "sleep", "1000"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    pm.wait_status("killed", "running");
    pm.ok(&["kill", "killed"]);
    assert_eq!(run.wait().unwrap().code(), Some(137));
    pm.finish();
}

#[test]
fn detached_logs_exec_top_and_stop_with_term() {
    let pm = Podman::new();
    detached(&pm, "d", &["sh", "-c", LOOP]);
    wait_ready(&pm, "d");
    assert_eq!(pm.status("d"), "running");
    assert!(pm.ok(&["logs", "d"]).contains("started"));

    // exec: output, exit status, same pid namespace, same confinement as init.
    assert_eq!(pm.ok(&["exec", "d", "cat", "/tmp/ready"]), "ready\n");
    let out = pm.run(&["exec", "d", "sh", "-c", "exit 5"]);
    assert_eq!(out.status.code(), Some(5), "exec returns the process's status");
    let ps = pm.ok(&["exec", "d", "ps", "-o", "pid,args"]);
    assert!(
        ps.lines()
            .any(|l| l.trim_start().starts_with("1 ") && l.contains("sh -c")),
        "exec sees the container's init as pid 1:\n{ps}"
    );
    let status_of = |pid: &str| {
        let s = pm.ok(&["exec", "d", "cat", &format!("/proc/{pid}/status")]);
        s.lines()
            .filter(|l| l.starts_with("Cap") || l.starts_with("Seccomp:") || l.starts_with("NoNewPrivs"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let init = status_of("1");
    assert!(init.iter().any(|l| l == "Seccomp:\t2"), "init is filtered: {init:?}");
    // libcontainer 0.7 starts exec'd processes without the container's seccomp
    // profile; claude-shim loads it again after the capabilities are dropped,
    // which the kernel allows only with no_new_privs (runc leaves it 0 here).
    let nnp =
        |lines: Vec<String>| -> Vec<String> { lines.into_iter().filter(|l| !l.starts_with("NoNewPrivs")).collect() };
    let exec = status_of("self");
    assert!(exec.iter().any(|l| l == "NoNewPrivs:\t1"), "{exec:?}");
    assert_eq!(
        nnp(exec),
        nnp(init),
        "an exec'd process has the init's capabilities and filter"
    );
    let out = pm.run(&["exec", "d", "/no/such/program"]);
    assert_ne!(out.status.code(), Some(0), "exec of a missing program fails");

    let top = pm.ok(&["top", "d"]);
    assert!(top.lines().next().unwrap().contains("PID"), "{top}");
    assert!(top.contains("while :"), "top lists the init:\n{top}");

    // stop: SIGTERM reaches the trap, which exits 0, well before the timeout.
    let t = Instant::now();
    pm.ok(&["stop", "--time", "10", "d"]);
    assert!(
        t.elapsed() < Duration::from_secs(8),
        "TERM stopped it: {:?}",
        t.elapsed()
    );
    assert_eq!(pm.status("d"), "exited");
    assert_eq!(pm.inspect("d", "{{.State.ExitCode}}"), "0");
    assert!(pm.ok(&["logs", "d"]).contains("got-term"));
    pm.ok(&["rm", "d"]);
    pm.finish();
}

#[test]
fn stop_times_out_to_kill_then_start_and_restart() {
    let pm = Podman::new();
    // sleep as pid 1 ignores SIGTERM: stop must fall back to SIGKILL.
    detached(&pm, "s", &["sleep", "1000"]);
    pm.wait_status("s", "running");
    let t = Instant::now();
    let out = pm.run(&["stop", "--time", "1", "s"]);
    let took = t.elapsed();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("resorting to SIGKILL"),
        "podman says it killed: {}",
        text(&out.stderr)
    );
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(8),
        "{took:?}"
    );
    assert_eq!(pm.inspect("s", "{{.State.ExitCode}}"), "137");

    // A stopped container starts again, and restart gives it a new init.
    pm.ok(&["start", "s"]);
    pm.wait_status("s", "running");
    let before = pm.inspect("s", "{{.State.Pid}}");
    pm.ok(&["restart", "--time", "0", "s"]);
    pm.wait_status("s", "running");
    let after = pm.inspect("s", "{{.State.Pid}}");
    assert_ne!(before, after, "restart runs a new init");
    pm.ok(&["rm", "--force", "--time", "0", "s"]);
    pm.finish();
}

#[test]
fn kill_signals_and_force_removal_in_every_state() {
    let pm = Podman::new();
    detached(&pm, "k", &["sh", "-c", LOOP]);
    wait_ready(&pm, "k");
    pm.ok(&["kill", "--signal", "USR1", "k"]);
    wait_until(Duration::from_secs(5), "the USR1 trap", || {
        pm.ok(&["logs", "k"]).contains("got-usr1").then_some(())
    });
    assert_eq!(pm.status("k"), "running", "USR1 does not end it");
    pm.ok(&["kill", "k"]);
    pm.wait_status("k", "exited");
    assert_eq!(pm.inspect("k", "{{.State.ExitCode}}"), "137");
    pm.ok(&["rm", "k"]);

    // rm -f of a running container.
    detached(&pm, "r", &["sleep", "1000"]);
    pm.wait_status("r", "running");
    pm.ok(&["rm", "--force", "--time", "0", "r"]);

    // A created container: start works, and so does rm -f before start.
    let out = pm.run_container("create", RT, &["--name", "c1", IMAGE, "sleep", "1000"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(pm.status("c1"), "created");
    pm.ok(&["start", "c1"]);
    pm.wait_status("c1", "running");
    pm.ok(&["rm", "--force", "--time", "0", "c1"]);
    // podman init has the runtime create it: claude-shim holds it "created".
    let out = pm.run_container("create", RT, &["--name", "c2", IMAGE, "true"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    pm.ok(&["init", "c2"]);
    let id = pm.inspect("c2", "{{.Id}}");
    let state = Command::new(shim_path())
        .args(["--root", DEFAULT_ROOT, "state", &id])
        .output()
        .unwrap();
    let state: serde_json::Value = serde_json::from_slice(&state.stdout).unwrap();
    assert_eq!(state["status"], "created", "{state}");
    pm.ok(&["rm", "--force", "c2"]);
    let out = pm.run(&["inspect", "c2"]);
    assert!(!out.status.success(), "c2 is gone");
    pm.finish();
}

#[test]
fn pause_and_unpause_freeze_the_container() {
    let pm = Podman::new();
    detached(
        &pm,
        "p",
        &[
            "sh",
            "-c",
            "i=0; echo ready > /tmp/ready; while :; do i=$((i+1)); echo $i > /tmp/n; sleep 0.05; done",
        ],
    );
    wait_ready(&pm, "p");
    pm.ok(&["pause", "p"]);
    assert_eq!(pm.status("p"), "paused");
    let n =
        |pm: &Podman| std::fs::read_to_string(format!("{}/tmp/n", pm.inspect("p", "{{.GraphDriver.Data.MergedDir}}")));
    let frozen = n(&pm).unwrap();
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(n(&pm).unwrap(), frozen, "a paused container does not run");
    let out = pm.run(&["exec", "p", "true"]);
    assert!(!out.status.success(), "exec into a paused container is refused");
    pm.ok(&["unpause", "p"]);
    assert_eq!(pm.status("p"), "running");
    wait_until(Duration::from_secs(5), "the loop to run again", || {
        (n(&pm).unwrap() != frozen).then_some(())
    });
    pm.ok(&["rm", "--force", "--time", "0", "p"]);
    pm.finish();
}

#[test]
fn interactive_stdin_and_terminals() {
    let pm = Podman::new();
    // -i: stdin reaches the container.
    let mut child = pm
        .container_command("run", RT, &["--rm", "-i", IMAGE, "sh", "-c", "read x; echo got:$x"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "got:hello\n");

    // -it: the process gets a pty and its output reaches the user's terminal.
    let mut args: Vec<String> = vec!["run".into()];
    args.extend(pm.container_flags(RT));
    args.extend(
        ["--rm", "-it", IMAGE, "sh", "-c", "echo tty:$(tty); exit 4"]
            .iter()
            .map(|s| s.to_string()),
    );
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, seen) = at_pty(&pm, &refs);
    assert!(seen.contains("tty:/dev/pts/"), "run -it output: {seen:?}");
    assert_eq!(code, Some(4), "run -it returns the exit status");

    // exec -i and exec -it into a running container.
    detached(&pm, "e", &["sleep", "1000"]);
    pm.wait_status("e", "running");
    let mut child = pm
        .command(&["exec", "-i", "e", "sh", "-c", "read x; echo exec-got:$x"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"there\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(text(&out.stdout), "exec-got:there\n", "{}", text(&out.stderr));
    let (code, seen) = at_pty(&pm, &["exec", "-it", "e", "sh", "-c", "echo exec-tty:$(tty); exit 6"]);
    assert!(seen.contains("exec-tty:/dev/pts/"), "exec -it output: {seen:?}");
    assert_eq!(code, Some(6));
    pm.ok(&["rm", "--force", "--time", "0", "e"]);
    pm.finish();
}

#[test]
fn network_none_and_ordinary_workloads_match_runc() {
    let pm = Podman::new();
    let mut seen = Vec::new();
    for runtime in ["runc", RT] {
        let out = pm.run_container(
            "run",
            runtime,
            &["--rm", "--hostname", "agent", IMAGE, "sh", "-c", WORKLOAD],
        );
        assert_eq!(out.status.code(), Some(0), "{runtime}: {}", text(&out.stderr));
        seen.push(text(&out.stdout));
    }
    assert_eq!(
        seen[1].matches(": <").count(),
        1,
        "--network=none: lo only:\n{}",
        seen[1]
    );
    assert_workload_matches(&seen[0], &seen[1]);
    pm.finish();
}

#[test]
fn annotations_reach_the_runtime() {
    let pm = Podman::new();
    let out = pm.run_container(
        "run",
        RT,
        &[
            "-d",
            "--name",
            "a",
            "--annotation",
            "run.claude-shim.test=from-podman",
            IMAGE,
            "sleep",
            "1000",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let id = pm.inspect("a", "{{.Id}}");
    let state = Command::new(shim_path())
        .args(["--root", DEFAULT_ROOT, "state", &id])
        .output()
        .unwrap();
    assert!(state.status.success(), "{}", text(&state.stderr));
    let state: serde_json::Value = serde_json::from_slice(&state.stdout).unwrap();
    assert_eq!(state["status"], "running");
    assert_eq!(state["annotations"]["run.claude-shim.test"], "from-podman", "{state}");
    pm.ok(&["rm", "--force", "--time", "0", "a"]);
    pm.finish();
}

#[test]
fn admin_policy_tightens_and_refuses_under_podman() {
    let pm = Podman::with_admin_policy("version = 1\n");
    // Done when: unshare -Ur fails from inside with EPERM, whatever podman asked.
    let out = pm.run_container(
        "run",
        RT,
        &[
            "--rm",
            "--cap-add",
            "SYS_ADMIN",
            IMAGE,
            "sh",
            "-c",
            "grep -E '^(CapEff|NoNewPrivs):' /proc/self/status; unshare -Ur id",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "unshare fails: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "CapEff:\t0000000000000000\nNoNewPrivs:\t1\n");
    assert!(
        text(&out.stderr).contains("unshare(0x10000000): Operation not permitted"),
        "{}",
        text(&out.stderr)
    );

    // Ordinary workloads: shell, logs, exec (held to the same rules), stop.
    detached(&pm, "w", &["sh", "-c", LOOP]);
    wait_ready(&pm, "w");
    assert!(pm.ok(&["logs", "w"]).contains("started"));
    assert_eq!(pm.ok(&["exec", "w", "cat", "/tmp/ready"]), "ready\n");
    let out = pm.run(&[
        "exec",
        "--privileged",
        "w",
        "sh",
        "-c",
        "grep CapEff /proc/self/status; unshare -Ur id",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        "CapEff:\t0000000000000000\n",
        "exec --privileged gets nothing"
    );
    pm.ok(&["stop", "w"]);
    assert_eq!(pm.inspect("w", "{{.State.ExitCode}}"), "0");
    assert!(pm.ok(&["logs", "w"]).contains("got-term"));
    pm.ok(&["rm", "w"]);

    // What it cannot tighten, it refuses; podman shows the runtime's message.
    let policy = pm.dir.path().join("admin-policy.toml");
    for (flags, reason) in [
        (
            vec!["--network=host"],
            "the host's net namespace is forbidden (config.json asks for no net namespace of its own)",
        ),
        (vec!["--pid=host"], "the host's pid namespace is forbidden"),
        (vec!["--privileged"], "is forbidden: the admin policy allows no added devices"),
        (vec!["-v", "/:/host"], "bind mount of / at /host is forbidden: it is the host's root"),
        (
            vec!["--annotation", "run.claude-shim.network=public"],
            "annotation run.claude-shim.network=\"public\" asks for network mode \"public\", more than the admin policy's \"none\"",
        ),
    ] {
        let mut rest = vec!["--rm"];
        rest.extend(flags.iter().copied());
        rest.extend([IMAGE, "true"]);
        let out = pm.run_container("run", RT, &rest);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(126), "{flags:?}: {err}");
        assert!(
            // podman prefixes the runtime's name to the msg of its JSON log line.
            err.contains("Error: OCI runtime error: claude-shim: failed to create container ")
                && err.contains(&format!("apply admin policy {}: ", policy.display()))
                && err.contains(reason),
            "{flags:?}: {err}"
        );
    }
    pm.finish();
}
