//! Docker with claude-shim as a registered runtime, end to end: a private
//! dockerd per test (hack/docker), `docker run --rm --runtime claude-shim`
//! and friends as a user types them. Each test ends by checking nothing is
//! left behind, then stops its dockerd.

use claude_shim_e2e::docker::{Docker, DOCKER};
use claude_shim_e2e::engines::{at_terminal, text, wait_until, IMAGE};
use std::time::Duration;

const RT: &str = "--runtime=claude-shim";

fn run(d: &Docker, flags: &[&str], cmd: &[&str]) -> std::process::Output {
    let mut args = vec!["run", "--rm", RT];
    args.extend(flags);
    args.push(IMAGE);
    args.extend(cmd);
    d.run(&args)
}

#[test]
fn run_exit_codes_terminal_detach_logs_exec_stop_kill() {
    let d = Docker::new(None);
    let out = run(&d, &[], &["echo", "hello from claude-shim"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "hello from claude-shim\n");
    assert_eq!(run(&d, &[], &["sh", "-c", "exit 3"]).status.code(), Some(3));

    // -it: a terminal for the container, its exit code through docker.
    let sock = d.socket();
    let (code, seen) = at_terminal(
        &[
            DOCKER,
            "--host",
            &sock,
            "run",
            "--rm",
            "-it",
            RT,
            IMAGE,
            "sh",
            "-c",
            "echo tty:$(tty); exit 4",
        ],
        &[("DOCKER_CONFIG", &d.dir.path().join("cli"))],
        d.dir.path(),
    );
    assert!(seen.contains("tty:/dev/pts/"), "run -it output: {seen:?}");
    assert_eq!(code, Some(4));

    // -d, logs, exec, stop (TERM reaches the trap).
    let loop_ = "echo started; trap 'exit 7' TERM; while :; do sleep 0.1; done";
    d.ok(&["run", "-d", "--name", "d1", RT, IMAGE, "sh", "-c", loop_]);
    wait_until(Duration::from_secs(15), "d1's first log line", || {
        (text(&d.run(&["logs", "d1"]).stdout) == "started\n").then_some(())
    });
    assert_eq!(d.ok(&["exec", "d1", "echo", "from-exec"]), "from-exec\n");
    assert_eq!(d.run(&["exec", "d1", "sh", "-c", "exit 5"]).status.code(), Some(5));
    d.ok(&["stop", "--time", "5", "d1"]);
    assert_eq!(d.ok(&["inspect", "--format", "{{.State.ExitCode}}", "d1"]).trim(), "7");
    d.ok(&["rm", "d1"]);

    // stop with a timeout on a process that ignores TERM: KILL after it.
    d.ok(&[
        "run",
        "-d",
        "--name",
        "d2",
        RT,
        IMAGE,
        "sh",
        "-c",
        "trap '' TERM; while :; do sleep 0.1; done",
    ]);
    d.ok(&["stop", "--time", "1", "d2"]);
    assert_eq!(
        d.ok(&["inspect", "--format", "{{.State.ExitCode}}", "d2"]).trim(),
        "137"
    );
    d.ok(&["rm", "d2"]);

    // kill: a signal the workload traps, then KILL.
    d.ok(&[
        "run",
        "-d",
        "--name",
        "d3",
        RT,
        IMAGE,
        "sh",
        "-c",
        "trap 'echo got-usr1' USR1; echo ready; while :; do sleep 0.1; done",
    ]);
    wait_until(Duration::from_secs(15), "d3 to start", || {
        text(&d.run(&["logs", "d3"]).stdout).contains("ready").then_some(())
    });
    d.ok(&["kill", "--signal", "USR1", "d3"]);
    wait_until(Duration::from_secs(15), "the USR1 trap", || {
        text(&d.run(&["logs", "d3"]).stdout).contains("got-usr1").then_some(())
    });
    d.ok(&["kill", "d3"]);
    assert_eq!(d.ok(&["wait", "d3"]).trim(), "137");
    d.ok(&["rm", "d3"]);
    d.finish();
}

#[test]
fn read_only_user_cap_drop_and_network_none() {
    let d = Docker::new(None);
    let out = run(&d, &["--read-only"], &["sh", "-c", "touch /x"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr).contains("Read-only file system"),
        "{}",
        text(&out.stderr)
    );

    let out = run(&d, &["--user", "1000:1000"], &["id"]);
    assert_eq!(
        text(&out.stdout),
        "uid=1000 gid=1000 groups=1000\n",
        "{}",
        text(&out.stderr)
    );

    let out = run(
        &d,
        &["--cap-drop", "ALL"],
        &["grep", "-E", "^Cap(Eff|Bnd):", "/proc/self/status"],
    );
    assert_eq!(
        text(&out.stdout),
        "CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\n",
        "{}",
        text(&out.stderr)
    );

    let out = run(&d, &["--network", "none"], &["sh", "-c", "ip -o link | cut -d' ' -f2"]);
    assert_eq!(text(&out.stdout), "lo:\n", "{}", text(&out.stderr));
    d.finish();
}

#[test]
fn admin_policy_tightens_and_refuses_under_docker() {
    let d = Docker::new(Some("version = 1\n"));
    let out = run(
        &d,
        &["--network", "none"],
        &[
            "sh",
            "-c",
            "grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status; unshare -Ur id",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "unshare fails: {}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "CapEff:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n",
        "docker's default capabilities are gone"
    );
    assert!(
        text(&out.stderr).contains("Operation not permitted"),
        "{}",
        text(&out.stderr)
    );

    for (flags, reason) in [
        (
            vec!["--privileged"],
            "is forbidden: the admin policy allows no added devices",
        ),
        (vec!["--pid", "host"], "the host's pid namespace is forbidden"),
    ] {
        let mut f = vec!["--network", "none"];
        f.extend(flags.iter().copied());
        let out = run(&d, &f, &["true"]);
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{flags:?} is refused");
        assert!(
            err.contains("apply admin policy ") && err.contains(reason),
            "{flags:?}: {err}"
        );
    }
    // docker keeps no record of a refused --rm container.
    let _ = d.run(&["container", "prune", "--force"]);
    d.finish();
}
