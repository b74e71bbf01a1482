//! ctr's flags and task verbs, each under runc and under claude-shim.

use std::path::Path;
use std::process::Stdio;

use claude_shim_e2e::engines::*;
use claude_shim_e2e::output_of;

use crate::image::{files_rootfs, READ_ONLY_CHECK};
use crate::table::{seen, Table, RUNTIMES};

#[test]
fn ctr_matches_runc() {
    let cd = Containerd::new();
    let mut t = Table::default();
    let binary = |rt: &str| {
        if rt == "runc" {
            "runc".to_owned()
        } else {
            claude_shim_e2e::shim_path().to_string_lossy().into_owned()
        }
    };
    let run = |rt: &str, flags: &[&str], cmd: &[&str]| {
        let id = cd.new_id(&format!("c-{rt}"));
        seen(cd.run_container(&binary(rt), flags, &id, cmd))
    };
    let checks: &[(&str, &[&str], &[&str])] = &[
        ("run --rm", &["--rm"], &["sh", "-c", "echo hello; exit 3"]),
        (
            "--env",
            &["--rm", "--env", "GREETING=hi"],
            &["sh", "-c", "echo $GREETING"],
        ),
        // ctr 1.6 has no --user flag; exec -u is covered under podman.
        ("--cwd", &["--rm", "--cwd", "/etc"], &["pwd"]),
    ];
    for (name, flags, cmd) in checks {
        t.same(&format!("ctr {name}"), |rt| run(rt, flags, cmd));
    }
    t.same("ctr --tty", |rt| {
        let id = cd.new_id(&format!("tty-{rt}"));
        let args = cd.run_args(
            &binary(rt),
            &["--rm", "--tty"],
            &id,
            &["sh", "-c", "tty >/dev/null && echo is-a-tty"],
        );
        let mut argv = vec![
            "ctr".to_owned(),
            "--address".into(),
            cd.dir.path().join("containerd.sock").to_string_lossy().into_owned(),
        ];
        argv.extend(args);
        let refs: Vec<&str> = argv.iter().map(String::as_str).collect();
        at_terminal(&refs, &[], cd.dir.path())
    });

    // `ctr run --rm [flags] --rootfs DIR ID CMD...` under `rt`.
    let rootfs_run = |rt: &str, flags: &[&str], dir: &Path, cmd: &[&str]| {
        let id = cd.new_id(&format!("rootfs-{rt}"));
        let (binary, cgroup) = (binary(rt), format!("{}/{id}", cd.cgroup_parent));
        let mut args = vec!["run", "--rm"];
        args.extend_from_slice(flags);
        args.extend([
            "--rootfs",
            "--runc-binary",
            &binary,
            "--runc-root",
            cd.runc_root.to_str().unwrap(),
            "--cgroup",
            &cgroup,
            dir.to_str().unwrap(),
            &id,
        ]);
        args.extend_from_slice(cmd);
        let mut c = cd.ctr(&args);
        c.stdin(Stdio::null());
        seen(output_of(c, cd.dir.path()))
    };

    // --rootfs: a plain directory, and ctr writes no PATH into the env.
    let rootfs = claude_shim_e2e::rootfs();
    t.same("ctr run --rootfs (no PATH)", |rt| {
        rootfs_run(rt, &[], &rootfs, &["/bin/sh", "-c", "echo by-path; echo PATH=$PATH"])
    });

    // ctr run --read-only on a --rootfs whose /run, /tmp and /var/tmp hold
    // files, with a tmpfs asking tmpcopyup on each (as podman asks).
    // containerd's default spec already mounts an empty tmpfs on /run, so
    // under both runtimes /run's files are hidden before the copy.
    let files = files_rootfs(cd.dir.path());
    let tmpfs = |dest: &str| format!("type=tmpfs,src=tmpfs,dst={dest},options=rw:nosuid:nodev:tmpcopyup");
    let (run_m, tmp_m, var_m) = (tmpfs("/run"), tmpfs("/tmp"), tmpfs("/var/tmp"));
    t.same("ctr --rootfs --read-only --mount tmpfs tmpcopyup", |rt| {
        let flags = [
            "--read-only",
            "--mount",
            &run_m,
            "--mount",
            &tmp_m,
            "--mount",
            &var_m,
            "--env",
            "PATH=/bin:/sbin",
        ];
        rootfs_run(rt, &flags, &files, &["sh", "-c", READ_ONLY_CHECK])
    });
    t.same("ctr --read-only (snapshotter rootfs)", |rt| {
        run(
            rt,
            &["--rm", "--read-only"],
            &["sh", "-c", "touch /x 2>/dev/null || echo root-ro"],
        )
    });

    // A task: exec, pause/resume, kill --all, its exit status.
    let task_ids: Vec<String> = RUNTIMES.iter().map(|rt| cd.new_id(&format!("task-{rt}"))).collect();
    let task = |rt: &str| task_ids[RUNTIMES.iter().position(|r| *r == rt).unwrap()].clone();
    for rt in RUNTIMES {
        let id = task(rt);
        let args = cd.run_args(
            &binary(rt),
            &["-d"],
            &id,
            &["sh", "-c", "trap 'exit 7' TERM; while :; do sleep 0.1; done"],
        );
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        cd.ok(&refs);
        cd.wait_task(&id, "RUNNING");
    }
    t.same("ctr task exec", |rt| {
        seen(cd.run(&[
            "task",
            "exec",
            "--exec-id",
            "e1",
            &task(rt),
            "sh",
            "-c",
            "echo in; exit 4",
        ]))
    });
    t.same("ctr task exec --user --cwd", |rt| {
        seen(cd.run(&[
            "task",
            "exec",
            "--exec-id",
            "e2",
            "--user",
            "1000",
            "--cwd",
            "/etc",
            &task(rt),
            "sh",
            "-c",
            "id -u; pwd",
        ]))
    });
    t.same("ctr task pause/resume", |rt| {
        cd.ok(&["task", "pause", &task(rt)]);
        let paused = cd.task_status(&task(rt)).unwrap_or_default();
        cd.ok(&["task", "resume", &task(rt)]);
        (
            Some(0),
            format!("{paused} {}", cd.task_status(&task(rt)).unwrap_or_default()),
        )
    });
    t.same("ctr task kill --all, exit status", |rt| {
        cd.ok(&["task", "kill", "--all", "--signal", "TERM", &task(rt)]);
        cd.wait_task(&task(rt), "STOPPED");
        let out = cd.run(&["task", "delete", &task(rt)]);
        cd.ok(&["container", "delete", &task(rt)]);
        seen(out)
    });

    // An error reaches the user: a program that does not exist.
    t.same("ctr error reaches the user", |rt| {
        let id = cd.new_id(&format!("err-{rt}"));
        let out = cd.run_container(&binary(rt), &["--rm"], &id, &["/no/such/program"]);
        let stderr = text(&out.stderr);
        let _ = cd.run(&["container", "delete", &id]);
        (
            out.status.code(),
            format!("names the program: {}", stderr.contains("/no/such/program")),
        )
    });
    t.finish("ctr");
    cd.finish();
}
