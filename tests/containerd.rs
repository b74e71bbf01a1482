//! containerd's runc v2 shim with claude-shim as its runtime binary, end to
//! end: a private containerd per test (hack/containerd), `ctr` as the user,
//! runc as the baseline where the two must agree. Each test ends by checking
//! nothing is left behind, then stops its containerd.

use std::process::Stdio;
use std::time::Duration;

use claude_shim_e2e::engines::*;
use claude_shim_e2e::{assert_gone, set_args, shim_path, Env};

/// The bare name: the shim finds it on containerd's PATH (hack/containerd puts
/// it there), as it would find runc.
const RT: &str = "claude-shim";

const LOOP: &str = "trap 'echo got-usr1 > /tmp/usr1' USR1; trap 'exit 7' TERM; \
                    echo ready > /tmp/ready; while :; do sleep 0.1; done";

fn wait_ready(cd: &Containerd, id: &str) {
    wait_until(Duration::from_secs(10), &format!("{id} to start its loop"), || {
        cd.run(&["task", "exec", "--exec-id", "ready", id, "cat", "/tmp/ready"])
            .status
            .success()
            .then_some(())
    });
}

fn delete_container(cd: &Containerd, id: &str) {
    cd.ok(&["container", "delete", id]);
}

#[test]
fn run_foreground_rm_and_exit_codes() {
    let cd = Containerd::new();
    let id = cd.new_id("fg");
    let out = cd.run_container(RT, &["--rm"], &id, &["echo", "hello from claude-shim"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "hello from claude-shim\n");

    let id = cd.new_id("fg3");
    let out = cd.run_container(RT, &["--rm"], &id, &["sh", "-c", "exit 3"]);
    assert_eq!(out.status.code(), Some(3), "ctr run returns the task's status");

    // The path form of --runc-binary works as well as the bare name.
    let id = cd.new_id("path");
    let shim = shim_path();
    let out = cd.run_container(shim.to_str().unwrap(), &["--rm"], &id, &["sh", "-c", "echo by-path"]);
    assert_eq!(text(&out.stdout), "by-path\n", "{}", text(&out.stderr));

    // SIGKILL from `ctr task kill`: the foreground run reports 128 + 9.
    let id = cd.new_id("fg137");
    let args = cd.run_args(RT, &["--rm"], &id, &["sleep", "1000"]);
    let mut run = cd
        .ctr(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    cd.wait_task(&id, "RUNNING");
    cd.ok(&["task", "kill", "--signal", "KILL", &id]);
    assert_eq!(run.wait().unwrap().code(), Some(137));
    cd.finish();
}

#[test]
fn detached_exec_ps_pause_resume_kill_delete() {
    let cd = Containerd::new();
    let id = cd.new_id("d");
    let out = cd.run_container(RT, &["--detach"], &id, &["sh", "-c", LOOP]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    wait_ready(&cd, &id);
    assert_eq!(cd.task_status(&id).as_deref(), Some("RUNNING"));

    // The init is the shim's child: no monitor process in between.
    let pid = cd.task_pid(&id);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let ppid = stat.rsplit(')').next().unwrap().split_whitespace().nth(1).unwrap();
    let parent = std::fs::read_to_string(format!("/proc/{ppid}/comm")).unwrap();
    assert_eq!(parent.trim(), "containerd-shim", "the parent of the init {pid}");

    // task exec: output, exit status, and a detached exec listed by task ps
    // (ctr leaves a detached process's FIFOs behind: keep them in the test's
    // directory rather than /run/containerd/fifo).
    let fifo_dir = cd.dir.path().join("fifo").to_string_lossy().into_owned();
    let out = cd.ok(&["task", "exec", "--exec-id", "e1", &id, "cat", "/tmp/ready"]);
    assert_eq!(out, "ready\n");
    let out = cd.run(&["task", "exec", "--exec-id", "e2", &id, "sh", "-c", "exit 5"]);
    assert_eq!(out.status.code(), Some(5));
    cd.ok(&[
        "task",
        "exec",
        "--detach",
        "--fifo-dir",
        &fifo_dir,
        "--exec-id",
        "e3",
        &id,
        "sleep",
        "1000",
    ]);
    let ps = wait_until(Duration::from_secs(5), "the detached exec in task ps", || {
        let ps = cd.ok(&["task", "ps", &id]);
        ps.contains("ExecID:e3").then_some(ps)
    });
    assert!(ps.contains(&pid.to_string()), "task ps lists the init {pid}:\n{ps}");

    cd.ok(&["task", "pause", &id]);
    assert_eq!(cd.task_status(&id).as_deref(), Some("PAUSED"));
    cd.ok(&["task", "resume", &id]);
    assert_eq!(cd.task_status(&id).as_deref(), Some("RUNNING"));

    cd.ok(&["task", "kill", "--signal", "USR1", &id]);
    wait_until(Duration::from_secs(5), "the USR1 trap", || {
        cd.run(&["task", "exec", "--exec-id", "e4", &id, "cat", "/tmp/usr1"])
            .status
            .success()
            .then_some(())
    });
    // SIGTERM (ctr's default) reaches the trap, which exits 7.
    cd.ok(&["task", "kill", &id]);
    cd.wait_task(&id, "STOPPED");
    let out = cd.run(&["task", "delete", &id]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("exit code 7"),
        "task delete reports the exit status: {}",
        text(&out.stderr)
    );
    delete_container(&cd, &id);
    cd.finish();
}

#[test]
fn terminals_for_run_and_exec() {
    let cd = Containerd::new();
    let sock = cd.dir.path().join("containerd.sock");
    let id = cd.new_id("tty");
    let mut argv: Vec<String> = vec!["ctr".into(), "--address".into(), sock.to_string_lossy().into_owned()];
    argv.extend(cd.run_args(RT, &["--rm", "--tty"], &id, &["sh", "-c", "echo tty:$(tty); exit 4"]));
    let refs: Vec<&str> = argv.iter().map(String::as_str).collect();
    let (code, seen) = at_terminal(&refs, &[], cd.dir.path());
    assert!(seen.contains("tty:/dev/pts/"), "run -t output: {seen:?}");
    assert_eq!(code, Some(4));

    let id = cd.new_id("ttyexec");
    let out = cd.run_container(RT, &["--detach"], &id, &["sleep", "1000"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    cd.wait_task(&id, "RUNNING");
    let sock = sock.to_string_lossy().into_owned();
    let (code, seen) = at_terminal(
        &[
            "ctr",
            "--address",
            &sock,
            "task",
            "exec",
            "--tty",
            "--exec-id",
            "t1",
            &id,
            "sh",
            "-c",
            "echo exec-tty:$(tty); exit 6",
        ],
        &[],
        cd.dir.path(),
    );
    assert!(seen.contains("exec-tty:/dev/pts/"), "exec -t output: {seen:?}");
    assert_eq!(code, Some(6));
    cd.ok(&["task", "delete", "--force", &id]);
    delete_container(&cd, &id);
    cd.finish();
}

#[test]
fn delete_and_force_delete_in_every_state() {
    let cd = Containerd::new();
    // Running: plain delete is refused, --force kills and deletes.
    let id = cd.new_id("running");
    assert!(cd
        .run_container(RT, &["--detach"], &id, &["sleep", "1000"])
        .status
        .success());
    cd.wait_task(&id, "RUNNING");
    let out = cd.run(&["task", "delete", &id]);
    assert!(!out.status.success(), "deleting a running task needs --force");
    cd.ok(&["task", "delete", "--force", &id]);
    assert_eq!(cd.task_status(&id), None);
    delete_container(&cd, &id);

    // Paused: the same, and the frozen init still dies.
    let id = cd.new_id("paused");
    assert!(cd
        .run_container(RT, &["--detach"], &id, &["sleep", "1000"])
        .status
        .success());
    cd.wait_task(&id, "RUNNING");
    cd.ok(&["task", "pause", &id]);
    assert!(!cd.run(&["task", "delete", &id]).status.success());
    cd.ok(&["task", "delete", "--force", &id]);
    assert_eq!(cd.task_status(&id), None);
    delete_container(&cd, &id);

    // Stopped: plain delete.
    let id = cd.new_id("stopped");
    assert!(cd.run_container(RT, &["--detach"], &id, &["true"]).status.success());
    cd.wait_task(&id, "STOPPED");
    cd.ok(&["task", "delete", &id]);
    delete_container(&cd, &id);

    // kill --all reaches every process, not only the init.
    let id = cd.new_id("killall");
    let out = cd.run_container(RT, &["--detach"], &id, &["sh", "-c", "sleep 1000 & sleep 1000"]);
    assert!(out.status.success());
    cd.wait_task(&id, "RUNNING");
    cd.ok(&["task", "kill", "--all", "--signal", "KILL", &id]);
    cd.wait_task(&id, "STOPPED");
    cd.ok(&["task", "delete", &id]);
    delete_container(&cd, &id);
    cd.finish();
}

/// ctr cannot stop between create and start, so the created state is driven
/// exactly as the runc v2 shim drives it (containerd 1.6, when a task is
/// killed or deleted before it starts, as the CRI does for a pod removed
/// early): `--root R --log <bundle>/log.json --log-format json VERB`, cwd the
/// bundle.
#[test]
fn created_task_is_killed_and_deleted_as_the_shim_asks() {
    let env = Env::new();
    let bundle = env.bundle("created", |v| set_args(v, &["sleep", "1000"]));
    let log = bundle.join("log.json");
    let shim_call = |args: &[&str]| {
        let mut c = std::process::Command::new(shim_path());
        c.arg("--root")
            .arg(&env.root)
            .arg("--log")
            .arg(&log)
            .args(["--log-format", "json"])
            .args(args)
            .current_dir(&bundle);
        let out = output_of(c, env.dir.path());
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    };
    let pid_file = bundle.join("init.pid");
    let b = bundle.to_str().unwrap();
    for (n, ending) in [(0, "kill"), (1, "kill-all"), (2, "delete-force")] {
        let id = format!("created-{n}-{}", std::process::id());
        shim_call(&["create", "--bundle", b, "--pid-file", pid_file.to_str().unwrap(), &id]);
        assert_eq!(env.status(&id), "created");
        match ending {
            "kill" => shim_call(&["kill", &id, "9"]),
            "kill-all" => shim_call(&["kill", "--all", &id, "9"]),
            _ => {}
        }
        if ending != "delete-force" {
            env.wait_status(&id, "stopped");
            shim_call(&["delete", &id]);
        } else {
            shim_call(&["delete", "--force", &id]);
        }
        assert_gone(&env.root, &id);
    }
    // A failure is a runc-shaped error line in the log, which containerd shows.
    let out = output_of(
        {
            let mut c = std::process::Command::new(shim_path());
            c.arg("--root")
                .arg(&env.root)
                .arg("--log")
                .arg(&log)
                .args(["--log-format", "json", "kill", "no-such-task", "9"])
                .current_dir(&bundle);
            c
        },
        env.dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    let last = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .to_owned();
    let v: serde_json::Value = serde_json::from_str(&last).unwrap();
    assert_eq!(v["level"], "error");
    assert!(v["msg"].as_str().unwrap().contains("no-such-task"), "{last}");
}

#[test]
fn runtime_errors_reach_ctr() {
    let cd = Containerd::new();
    let id = cd.new_id("missing");
    let out = cd.run_container(RT, &["--rm"], &id, &["/no/such/program"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("OCI runtime create failed") && err.contains(&format!("create container {id}")),
        "ctr shows claude-shim's message: {err}"
    );
    assert!(err.contains("/no/such/program"), "{err}");
    // ctr keeps the container record of a failed run, as with runc.
    let _ = cd.run(&["container", "delete", &id]);
    cd.finish();
}

#[test]
fn ordinary_workloads_match_runc() {
    let cd = Containerd::new();
    let mut seen = Vec::new();
    for binary in ["runc", RT] {
        let id = cd.new_id(binary);
        let out = cd.run_container(binary, &["--rm"], &id, &["sh", "-c", WORKLOAD]);
        assert_eq!(out.status.code(), Some(0), "{binary}: {}", text(&out.stderr));
        seen.push(text(&out.stdout).replace(&id, "ID"));
    }
    assert_workload_matches(&seen[0], &seen[1]);
    cd.finish();
}

#[test]
fn admin_policy_tightens_and_refuses_under_containerd() {
    let cd = Containerd::with_admin_policy("version = 1\n");
    let id = cd.new_id("adm");
    let out = cd.run_container(
        RT,
        &["--rm"],
        &id,
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
        "ctr asks for no seccomp profile; the admin policy's applies"
    );
    assert!(
        text(&out.stdout).contains("Operation not permitted") || text(&out.stderr).contains("Operation not permitted"),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );

    // Ordinary workloads: a detached task, exec, kill, delete.
    let id = cd.new_id("adm-d");
    assert!(cd
        .run_container(RT, &["--detach"], &id, &["sh", "-c", LOOP])
        .status
        .success());
    wait_ready(&cd, &id);
    let out = cd.run(&[
        "task",
        "exec",
        "--exec-id",
        "x",
        &id,
        "sh",
        "-c",
        "cat /tmp/ready; unshare -Ur id",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).starts_with("ready\n"), "{}", text(&out.stdout));
    cd.ok(&["task", "kill", &id]);
    cd.wait_task(&id, "STOPPED");
    cd.ok(&["task", "delete", &id]);
    delete_container(&cd, &id);

    // Refusals reach ctr's message (runc-shaped JSON log lines).
    let policy = cd.dir.path().join("admin-policy.toml");
    for (flags, reason) in [
        (vec!["--net-host"], "the host's net namespace is forbidden"),
        (
            vec!["--privileged"],
            "is forbidden: the admin policy allows no added devices",
        ),
        (
            vec!["--mount", "type=bind,src=/run,dst=/r,options=rbind"],
            "bind mount of /run at /r is forbidden: it is or holds /run/claude-shim, container runtime state",
        ),
    ] {
        let id = cd.new_id("adm-refused");
        let mut f = vec!["--rm"];
        f.extend(flags.iter().copied());
        let out = cd.run_container(RT, &f, &id, &["true"]);
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{flags:?} is refused");
        assert!(
            err.contains("OCI runtime create failed: failed to create container ")
                && err.contains(&format!("apply admin policy {}: ", policy.display()))
                && err.contains(reason),
            "{flags:?}: {err}"
        );
        let _ = cd.run(&["container", "delete", &id]);
    }
    cd.finish();
}
