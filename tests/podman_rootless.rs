//! Rootless podman, as most developers run it (issue 25): the unprivileged
//! test user's own podman runs `podman run --runtime claude-shim` exactly as
//! the issue wrote it, the runtime registered in the user's containers.conf.
//! podman runs the runtime as uid 0 in its own user namespace, with
//! $XDG_RUNTIME_DIR and no --root. Every command runs under runc too, and
//! the user must see the same from both, except where claude-shim says why.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use claude_shim_e2e::engines::*;
use claude_shim_e2e::{assert_gone, processes_of};

const RUNTIMES: [&str; 2] = ["runc", "claude-shim"];

/// `run --runtime RT --network none FLAGS IMAGE CMD...`, podman's arguments.
fn run_args<'a>(rt: &'a str, flags: &[&'a str], cmd: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["run", "--runtime", rt, "--network", "none"];
    args.extend_from_slice(flags);
    args.push(USER_IMAGE);
    args.extend_from_slice(cmd);
    args
}

/// `podman run --rm --runtime RT --network none FLAGS IMAGE CMD...` under
/// each runtime; both outputs are printed, for the record.
fn under_both(pm: &UserPodman, flags: &[&str], cmd: &[&str]) -> [Output; 2] {
    RUNTIMES.map(|rt| {
        let args = run_args(rt, &[&["--rm"], flags].concat(), cmd);
        let out = pm.run(&args);
        eprintln!(
            "podman {}\n  {rt}: exit {:?}\n  stdout: {:?}\n  stderr: {:?}",
            args.join(" "),
            out.status.code(),
            text(&out.stdout),
            text(&out.stderr)
        );
        out
    })
}

/// Nothing of any container is left: not in podman, not in the runtime's
/// state under $XDG_RUNTIME_DIR (nor under /run), no cgroup, mount or process.
fn finish(pm: UserPodman) {
    let listed = pm.ok(&["ps", "-a", "--format", "{{.ID}} {{.Names}}"]);
    assert!(listed.trim().is_empty(), "podman ps -a lists:\n{listed}");
    let dir = pm.dir.path().to_string_lossy().into_owned();
    wait_until(
        Duration::from_secs(20),
        "conmon and podman's exit commands to end",
        || processes_mentioning(&dir).is_empty().then_some(()),
    );
    let ids = pm.container_ids();
    assert!(!ids.is_empty(), "the event log names no container");
    for id in &ids {
        assert_gone(&pm.xdg().join("claude-shim"), id);
        assert!(!Path::new(DEFAULT_ROOT).join(id).exists(), "state of {id} under /run");
        assert!(processes_of(id).is_empty(), "processes of {id} are left");
    }
}

#[test]
fn run_exec_and_stop_as_written_in_the_issue() {
    let pm = UserPodman::new();
    let out = same_as_runc(&under_both(&pm, &[], &["sh", "-c", "id -u; echo ran"]));
    assert_eq!(out, "0\nran\n", "root of podman's user namespace inside");
    let out = under_both(&pm, &[], &["sh", "-c", "exit 3"]);
    same_as_runc(&out);
    assert_eq!(out[1].status.code(), Some(3));

    const LOOP: &str = "trap 'echo got-term; exit 0' TERM; echo ready > /tmp/ready; while :; do sleep 0.1; done";
    for rt in RUNTIMES {
        let name = format!("d-{rt}");
        pm.ok(&run_args(rt, &["-d", "--name", &name], &["sh", "-c", LOOP]));
        wait_until(Duration::from_secs(10), "the loop to start", || {
            pm.run(&["exec", &name, "cat", "/tmp/ready"])
                .status
                .success()
                .then_some(())
        });
        let id = pm.inspect_id(&name);
        if rt == "claude-shim" {
            // runc's layout: the state where podman's XDG_RUNTIME_DIR says.
            let state = pm.xdg().join("claude-shim").join(&id).join("state.json");
            assert!(state.is_file(), "{} is missing", state.display());
        }
        assert_eq!(pm.run(&["exec", &name, "sh", "-c", "exit 5"]).status.code(), Some(5));
        let ps = pm.ok(&["exec", &name, "ps", "-o", "pid,args"]);
        assert!(ps.lines().any(|l| l.trim_start().starts_with("1 ")), "{rt}: {ps}");
        pm.ok(&["stop", "--time", "10", &name]);
        assert_eq!(
            pm.ok(&["inspect", "--format", "{{.State.ExitCode}}", &name]).trim(),
            "0"
        );
        assert!(
            pm.ok(&["logs", &name]).contains("got-term"),
            "{rt}: TERM reached the trap"
        );
        pm.ok(&["rm", &name]);
    }
    finish(pm);
}

#[test]
fn interactive_at_a_terminal() {
    let pm = UserPodman::new();
    for rt in RUNTIMES {
        let (code, seen) = pm.at_pty(&run_args(rt, &["--rm", "-it"], &["sh", "-c", "tty; echo in-tty"]));
        eprintln!("podman run --rm -it under {rt}: exit {code:?}, terminal {seen:?}");
        assert_eq!(code, Some(0), "{rt}: {seen}");
        assert!(seen.contains("/dev/pts/0") && seen.contains("in-tty"), "{rt}: {seen}");
    }
    finish(pm);
}

#[test]
fn limits_as_runc_takes_them() {
    let pm = UserPodman::new();
    let cmd = [
        "sh",
        "-c",
        "grep pids /proc/self/cgroup; cat /sys/fs/cgroup/pids.max 2>/dev/null; echo ran",
    ];
    let outs = under_both(&pm, &["--pids-limit", "50", "--memory", "64m"], &cmd);
    for (rt, out) in RUNTIMES.iter().zip(&outs) {
        assert_eq!(out.status.code(), Some(0), "{rt}: {}", text(&out.stderr));
        assert!(text(&out.stdout).ends_with("ran\n"));
    }
    if Path::new("/sys/fs/cgroup/pids").is_dir() {
        // cgroup v1, cgroupfs: podman itself drops the limits and says so,
        // for either runtime; runc then runs the container in podman's
        // cgroup, claude-shim in the subtree delegated to the user.
        const DROPPED: &str = "Resource limits are not supported and ignored on cgroups V1 rootless systems";
        for (rt, out) in RUNTIMES.iter().zip(&outs) {
            assert!(text(&out.stderr).contains(DROPPED), "{rt}: {}", text(&out.stderr));
        }
        let delegated = format!(":/claude-shim/user-{}/", pm.uid);
        assert!(!text(&outs[0].stdout).contains(&delegated));
        assert!(text(&outs[1].stdout).contains(&delegated), "{}", text(&outs[1].stdout));
    } else {
        panic!("written for the cgroup v1 build machine; hack/vm-lane covers cgroup v2 with systemd");
    }
    finish(pm);
}

#[test]
fn keep_id_and_read_only() {
    let pm = UserPodman::new();
    let (uid, gid) = (pm.uid, pm.gid);
    let out = same_as_runc(&under_both(
        &pm,
        &["--userns=keep-id"],
        &["sh", "-c", "id -u; id -g; id -G; touch /tmp/f && stat -c %u:%g /tmp/f"],
    ));
    assert_eq!(
        out,
        format!("{uid}\n{gid}\n{gid}\n{uid}:{gid}\n"),
        "the user's own ids and group inside"
    );

    let out = same_as_runc(&under_both(
        &pm,
        &["--read-only"],
        &["sh", "-c", "touch /x 2>&1; touch /tmp/y && echo tmp-writable"],
    ));
    assert!(
        out.contains("Read-only file system") && out.contains("tmp-writable"),
        "{out}"
    );
    finish(pm);
}
