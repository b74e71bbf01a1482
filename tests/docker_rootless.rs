//! Docker rootless, the last engine of issue 25's first item: Docker's own
//! dockerd-rootless.sh (rootlesskit, slirp4netns) as the unprivileged test
//! user, a private daemon per test (hack/docker-rootless), and the user's
//! `docker run --runtime claude-shim`. Every command runs under `--runtime
//! runc` too and the user must see the same from both; each pair is printed
//! as `runc: ... | claude-shim: ...`. The rootful dockerd of tests/docker.rs
//! is never touched: this daemon has its own socket, directories and
//! namespaces.

use std::process::Output;
use std::time::Duration;

use claude_shim_e2e::engines::{same_as_runc, text, wait_until, UserDocker, IMAGE};

const RUNTIMES: [&str; 2] = ["runc", "claude-shim"];

fn run_args<'a>(rt: &'a str, flags: &[&'a str], cmd: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["run", "--runtime", rt];
    args.extend_from_slice(flags);
    args.push(IMAGE);
    args.extend_from_slice(cmd);
    args
}

fn show(out: &Output) -> String {
    format!(
        "exit {:?} stdout {:?} stderr {:?}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    )
}

/// `docker run --rm --runtime RT FLAGS IMAGE CMD...` under each runtime,
/// the pair printed for the record.
fn under_both(d: &UserDocker, flags: &[&str], cmd: &[&str]) -> [Output; 2] {
    let outs = RUNTIMES.map(|rt| d.run(&run_args(rt, &[&["--rm"], flags].concat(), cmd)));
    eprintln!(
        "docker run --rm {} IMAGE {}\n  runc: {}\n  claude-shim: {}",
        flags.join(" "),
        cmd.join(" "),
        show(&outs[0]),
        show(&outs[1])
    );
    outs
}

/// The user's delegated cgroups (hack/delegate-cgroups) that hold a container.
fn delegated_cgroups(uid: u32) -> Vec<String> {
    let dir = format!("/sys/fs/cgroup/pids/claude-shim/user-{uid}");
    std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.path().is_dir())
                .map(|e| e.path().display().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn run_terminal_exec_and_stop_as_runc() {
    let d = UserDocker::new(None);
    let out = same_as_runc(&under_both(
        &d,
        &[],
        &["sh", "-c", "cat /proc/self/uid_map; id -u; echo ran"],
    ));
    let maps: Vec<String> = out
        .lines()
        .take(2)
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        maps,
        [format!("0 {} 1", d.uid), "1 100000 65536".into()],
        "rootlesskit's map: the user as 0, its subordinate ids from 1: {out}"
    );
    assert!(out.ends_with("0\nran\n"), "{out}");
    let outs = under_both(&d, &[], &["sh", "-c", "exit 3"]);
    same_as_runc(&outs);
    assert_eq!(outs[1].status.code(), Some(3));

    // -it: the container's terminal, owned by root and group tty (5) inside.
    let tty = RUNTIMES.map(|rt| {
        d.at_pty(&run_args(
            rt,
            &["--rm", "-it"],
            &["sh", "-c", "tty; stat -c owner=%u:%g $(tty); exit 4"],
        ))
    });
    eprintln!(
        "docker run --rm -it IMAGE sh -c 'tty; stat ...; exit 4'\n  runc: {:?}\n  claude-shim: {:?}",
        tty[0], tty[1]
    );
    assert_eq!(tty[0], tty[1], "terminal, runc vs claude-shim");
    assert_eq!(tty[1].0, Some(4));
    assert!(
        tty[1].1.contains("/dev/pts/0") && tty[1].1.contains("owner=0:5"),
        "{}",
        tty[1].1
    );

    // -d, exec (output and status), stop (TERM reaches the trap), rm.
    const LOOP: &str = "trap 'exit 7' TERM; touch /tmp/ready; while :; do sleep 0.1; done";
    let seen = RUNTIMES.map(|rt| {
        let name = format!("d-{rt}");
        d.ok(&run_args(rt, &["-d", "--name", &name], &["sh", "-c", LOOP]));
        wait_until(Duration::from_secs(15), "the loop to start", || {
            d.run(&["exec", &name, "test", "-e", "/tmp/ready"])
                .status
                .success()
                .then_some(())
        });
        let exec = d.ok(&["exec", &name, "sh", "-c", "id -u; echo from-exec"]);
        let exec_status = d.run(&["exec", &name, "sh", "-c", "exit 5"]).status.code();
        let stop = d.run(&["stop", "--time", "10", &name]).status.code();
        let code = d.ok(&["inspect", "--format", "{{.State.ExitCode}}", &name]);
        let rm = d.run(&["rm", &name]).status.code();
        format!(
            "exec {exec:?} exec-exit {exec_status:?} stop {stop:?} exit-code {} rm {rm:?}",
            code.trim()
        )
    });
    eprintln!(
        "docker run -d; exec; stop; rm\n  runc: {}\n  claude-shim: {}",
        seen[0], seen[1]
    );
    assert_eq!(seen[0], seen[1], "runc vs claude-shim");
    assert_eq!(
        seen[1],
        "exec \"0\\nfrom-exec\\n\" exec-exit Some(5) stop Some(0) exit-code 7 rm Some(0)"
    );
    d.finish();
}

#[test]
fn read_only_user_and_limits_as_runc() {
    let d = UserDocker::new(None);
    let outs = under_both(&d, &["--read-only"], &["sh", "-c", "touch /x; echo status=$?"]);
    assert_eq!(same_as_runc(&outs), "status=1\n");
    for out in &outs {
        assert!(text(&out.stderr).contains("Read-only file system"), "{}", show(out));
    }

    let out = same_as_runc(&under_both(&d, &["--user", "1000:1000"], &["id"]));
    assert_eq!(out, "uid=1000 gid=1000 groups=1000\n");

    // cgroup v1 without systemd: rootless dockerd has no cgroup driver
    // ("Cgroup Driver: none") and drops the limits before the runtime sees
    // them (no linux.resources in config.json), so both run. runc leaves the
    // container in the cgroups of the user's shell; claude-shim puts it in the
    // subtree root delegated to the user, as under rootless podman
    // (docs/commands.md).
    let info = d.ok(&["info", "--format", "{{.CgroupDriver}} {{.CgroupVersion}}"]);
    assert_eq!(info.trim(), "none 1", "written for the cgroup v1 build machine");
    let outs = under_both(
        &d,
        &["--memory", "50m", "--pids-limit", "50"],
        &["sh", "-c", "grep :pids: /proc/self/cgroup; echo ran"],
    );
    for out in &outs {
        assert_eq!(out.status.code(), Some(0), "{}", show(out));
        assert!(text(&out.stdout).ends_with("ran\n"));
    }
    let delegated = format!(":pids:/claude-shim/user-{}/", d.uid);
    assert!(!text(&outs[0].stdout).contains(&delegated), "{}", show(&outs[0]));
    assert!(text(&outs[1].stdout).contains(&delegated), "{}", show(&outs[1]));
    // docker rm returns before the shim deletes: the cgroup goes soon after.
    wait_until(
        Duration::from_secs(15),
        "the container's delegated cgroup to go",
        || delegated_cgroups(d.uid).is_empty().then_some(()),
    );
    d.finish();
}

/// The agent sandbox question: as that user, `docker run --runtime
/// claude-shim` runs, and inside it no nested user namespace can be made.
/// Docker passes its default seccomp profile (default errno; `unshare` only
/// with CAP_SYS_ADMIN, which the container lacks; `clone` only without
/// namespace flags; `clone3` ENOSYS), and claude-shim applies it as runc does.
/// With `seccomp=unconfined` both let it through: the profile is what stops it.
#[test]
fn nested_user_namespace_is_refused_under_dockers_profile() {
    let d = UserDocker::new(None);
    let probe = [
        "sh",
        "-c",
        "grep ^Seccomp: /proc/self/status; unshare -U true; echo unshare=$?",
    ];
    let outs = under_both(&d, &[], &probe);
    assert_eq!(same_as_runc(&outs), "Seccomp:\t2\nunshare=1\n");
    for out in &outs {
        assert!(text(&out.stderr).contains("Operation not permitted"), "{}", show(out));
    }
    let outs = under_both(&d, &["--security-opt", "seccomp=unconfined"], &probe);
    assert_eq!(same_as_runc(&outs), "Seccomp:\t0\nunshare=0\n");
    d.finish();
}

/// An admin policy of host root's applies under a rootless engine too: seen
/// from rootlesskit's user namespace, host root is unmapped and shows as the
/// overflow uid, which claude-shim takes as the host's root there (the file
/// and its directories are nobody else's). The policy cuts Docker's default
/// capabilities, even under `--privileged`, and keeps a seccomp filter;
/// runc reads no admin policy.
#[test]
fn admin_policy_of_host_root_applies_under_rootless_docker() {
    let d = UserDocker::new(Some("version = 1\n"));
    let outs = under_both(
        &d,
        &[],
        &["sh", "-c", "grep -E '^(CapEff|NoNewPrivs):' /proc/self/status"],
    );
    assert_eq!(outs[0].status.code(), Some(0), "{}", show(&outs[0]));
    assert_ne!(
        text(&outs[0].stdout),
        "CapEff:\t0000000000000000\nNoNewPrivs:\t1\n",
        "the control: docker's default capabilities under runc"
    );
    assert_eq!(outs[1].status.code(), Some(0), "{}", show(&outs[1]));
    assert_eq!(text(&outs[1].stdout), "CapEff:\t0000000000000000\nNoNewPrivs:\t1\n");
    // --privileged: every capability and no seccomp under runc; the policy
    // still holds under claude-shim.
    let cmd = ["sh", "-c", "grep -E '^(CapEff|Seccomp):' /proc/self/status"];
    let privileged = under_both(&d, &["--privileged"], &cmd);
    assert_eq!(privileged[0].status.code(), Some(0), "{}", show(&privileged[0]));
    assert!(
        text(&privileged[0].stdout).contains("Seccomp:\t0"),
        "{}",
        show(&privileged[0])
    );
    assert_eq!(privileged[1].status.code(), Some(0), "{}", show(&privileged[1]));
    assert_eq!(text(&privileged[1].stdout), "CapEff:\t0000000000000000\nSeccomp:\t2\n");
    // docker keeps no record of a refused --rm container.
    let _ = d.run(&["container", "prune", "--force"]);
    d.finish();
}
