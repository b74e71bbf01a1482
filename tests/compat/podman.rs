//! podman's flags and verbs, each under runc and under claude-shim.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use claude_shim_e2e::engines::*;

use crate::image::{files_rootfs, import_image, READ_ONLY_CHECK};
use crate::table::{seen, Table, RUNTIMES};

/// Caps and seccomp lines of /proc/self/status.
const STATUS: &str = "grep -E '^(Cap|Seccomp:|NoNewPrivs)' /proc/self/status";

#[test]
fn podman_flags_match_runc() {
    let pm = Podman::new();
    let mut t = Table::default();
    let run = |rt: &str, rest: &[&str]| seen(pm.run_container("run", rt, rest));
    let img = IMAGE;

    // One-shot runs: flags that shape the process, its files and its limits.
    let checks: &[(&str, &[&str], &[&str])] = &[
        ("run --rm", &["--rm"], &["sh", "-c", "echo hello; exit 3"]),
        (
            "--read-only",
            &["--rm", "--read-only"],
            &[
                "sh",
                "-c",
                "touch /x || echo ro; touch /tmp/y && echo tmp-rw; mount | grep -c ' /tmp '",
            ],
        ),
        (
            "--read-only --read-only-tmpfs=false",
            &["--rm", "--read-only", "--read-only-tmpfs=false"],
            &["sh", "-c", "touch /tmp/y 2>/dev/null || echo tmp-ro"],
        ),
        ("--user", &["--rm", "--user", "1000:1000"], &["id"]),
        ("--cap-add", &["--rm", "--cap-add", "NET_ADMIN"], &["sh", "-c", STATUS]),
        ("--cap-drop", &["--rm", "--cap-drop", "ALL"], &["sh", "-c", STATUS]),
        (
            "--security-opt no-new-privileges",
            &["--rm", "--security-opt", "no-new-privileges"],
            &["sh", "-c", STATUS],
        ),
        (
            "--tmpfs",
            &["--rm", "--tmpfs", "/scratch:size=1m"],
            &[
                "sh",
                "-c",
                "touch /scratch/x && mount | grep ' /scratch ' | cut -d' ' -f1-5",
            ],
        ),
        (
            "--env",
            &["--rm", "--env", "GREETING=hi there"],
            &["sh", "-c", "echo \"$GREETING\""],
        ),
        ("--workdir", &["--rm", "--workdir", "/etc"], &["pwd"]),
        (
            "--pids-limit",
            &["--rm", "--pids-limit", "77"],
            &[
                "sh",
                "-c",
                "cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max",
            ],
        ),
        (
            "--memory",
            &["--rm", "--memory", "64m"],
            &[
                "sh",
                "-c",
                "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max",
            ],
        ),
        (
            "--ulimit",
            &["--rm", "--ulimit", "nofile=1000:2000", "--ulimit", "nproc=500:1000"],
            &["sh", "-c", "ulimit -n; ulimit -Hn; ulimit -u"],
        ),
        (
            "--init",
            &["--rm", "--init"],
            &["sh", "-c", "ps -o pid,comm | sed -n 2p | tr -s ' '"],
        ),
    ];
    for (name, flags, cmd) in checks {
        t.same(name, |rt| {
            let mut rest: Vec<&str> = flags.to_vec();
            rest.push(img);
            rest.extend_from_slice(cmd);
            run(rt, &rest)
        });
    }

    // --read-only on an image whose /run, /tmp and /var/tmp hold files:
    // podman mounts a tmpfs with tmpcopyup on each.
    let files = "localhost/claude-shim-files:latest";
    import_image(&pm, &files_rootfs(pm.dir.path()), files);
    let file_checks: &[(&str, &[&str], &str)] = &[
        (
            "--read-only, files in /run /tmp /var/tmp",
            &["--rm", "--read-only"],
            READ_ONLY_CHECK,
        ),
        (
            "--read-only --read-only-tmpfs, files",
            &["--rm", "--read-only", "--read-only-tmpfs"],
            READ_ONLY_CHECK,
        ),
        (
            "--read-only --read-only-tmpfs=false, files",
            &["--rm", "--read-only", "--read-only-tmpfs=false"],
            "cat /tmp/hello; touch /tmp/new 2>/dev/null || echo tmp-ro",
        ),
        (
            "--read-only-tmpfs alone (root stays rw), files",
            &["--rm", "--read-only-tmpfs"],
            "cat /run/app.pid; touch /x && echo root-rw; mount | grep -c ' /tmp '",
        ),
        (
            "--tmpfs /tmp (tmpcopyup), files",
            &["--rm", "--tmpfs", "/tmp"],
            "ls -A /tmp; stat -c '%A %n' /tmp /tmp/sub; cat /tmp/sub/deep/f",
        ),
        (
            "--tmpfs /tmp:notmpcopyup, files",
            &["--rm", "--tmpfs", "/tmp:notmpcopyup"],
            "ls -A /tmp; echo listed",
        ),
    ];
    for (name, flags, cmd) in file_checks {
        t.same(name, |rt| {
            let mut rest: Vec<&str> = flags.to_vec();
            rest.extend([files, "sh", "-c", cmd]);
            run(rt, &rest)
        });
    }

    // --security-opt seccomp=PROFILE: a profile that denies mkdir.
    let profile = pm.dir.path().join("seccomp.json");
    std::fs::write(
        &profile,
        r#"{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir","mkdirat"],"action":"SCMP_ACT_ERRNO"}]}"#,
    )
    .unwrap();
    let opt = format!("seccomp={}", profile.display());
    t.same("--security-opt seccomp=", |rt| {
        run(
            rt,
            &[
                "--rm",
                "--security-opt",
                &opt,
                img,
                "sh",
                "-c",
                "mkdir /tmp/d || echo denied",
            ],
        )
    });

    // -v ro and rw.
    let vol = pm.dir.path().join("vol");
    std::fs::create_dir_all(&vol).unwrap();
    let rw = format!("{}:/vol:rw", vol.display());
    let ro = format!("{}:/vol:ro", vol.display());
    t.same("-v rw", |rt| {
        let r = run(
            rt,
            &[
                "--rm",
                "-v",
                &rw,
                img,
                "sh",
                "-c",
                &format!("echo {rt} > /vol/f && cat /vol/f"),
            ],
        );
        (r.0, r.1.replace(rt, "RT"))
    });
    t.same("-v ro", |rt| {
        run(
            rt,
            &[
                "--rm",
                "-v",
                &ro,
                img,
                "sh",
                "-c",
                "touch /vol/g 2>/dev/null || echo read-only",
            ],
        )
    });

    // -i: stdin reaches the process.
    t.same("-i", |rt| {
        let mut c = pm.container_command("run", rt, &["--rm", "-i", img, "sh", "-c", "cat; echo done"]);
        let mut child = c
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(b"from stdin\n").unwrap();
        seen(child.wait_with_output().unwrap())
    });

    // -it: a terminal.
    t.same("-it", |rt| {
        let conf = pm.dir.path().join("containers.conf");
        let storage = pm.dir.path().join("storage.conf");
        let flags = pm.container_flags(rt);
        let mut argv = vec!["podman", "run"];
        argv.extend(flags.iter().map(String::as_str));
        argv.extend([
            "--rm",
            "-it",
            img,
            "sh",
            "-c",
            "tty >/dev/null && echo is-a-tty; stty size >/dev/null && echo has-size",
        ]);
        at_terminal(
            &argv,
            &[("CONTAINERS_CONF", &conf), ("CONTAINERS_STORAGE_CONF", &storage)],
            pm.dir.path(),
        )
    });

    // -d, logs, exec -u/-w/-e, top, cp, export, pause/unpause, stop of a
    // TERM-ignoring process, restart, --rm after a signal, inspect.
    for rt in RUNTIMES {
        let name = format!("d-{rt}");
        let out = pm.run_container(
            "run",
            rt,
            &["-d", "--name", &name, img, "sh", "-c", "echo started; exec sleep 1000"],
        );
        assert!(out.status.success(), "{rt}: {}", text(&out.stderr));
        pm.wait_status(&name, "running");
    }
    let d = |rt: &str| format!("d-{rt}");
    t.same("-d logs", |rt| {
        wait_until(Duration::from_secs(10), "the log line", || {
            pm.ok(&["logs", &d(rt)]).contains("started").then_some(())
        });
        seen(pm.run(&["logs", &d(rt)]))
    });
    t.same("exec -u -w -e", |rt| {
        seen(pm.run(&[
            "exec",
            "-u",
            "1000:1000",
            "-w",
            "/etc",
            "-e",
            "X=1",
            &d(rt),
            "sh",
            "-c",
            "id; pwd; echo $X",
        ]))
    });
    t.same("exec exit status", |rt| {
        seen(pm.run(&["exec", &d(rt), "sh", "-c", "exit 5"]))
    });
    t.same("exec -it", |rt| {
        let conf = pm.dir.path().join("containers.conf");
        let storage = pm.dir.path().join("storage.conf");
        let name = d(rt);
        at_terminal(
            &[
                "podman",
                "exec",
                "-it",
                &name,
                "sh",
                "-c",
                "tty >/dev/null && echo is-a-tty",
            ],
            &[("CONTAINERS_CONF", &conf), ("CONTAINERS_STORAGE_CONF", &storage)],
            pm.dir.path(),
        )
    });
    t.same("top", |rt| {
        let out = pm.run(&["top", &d(rt), "args"]);
        (out.status.code(), text(&out.stdout))
    });
    t.same("cp in and out", |rt| {
        let src = pm.dir.path().join(format!("cp-{rt}"));
        std::fs::write(&src, "copied\n").unwrap();
        pm.ok(&["cp", src.to_str().unwrap(), &format!("{}:/tmp/c", d(rt))]);
        let back = pm.dir.path().join(format!("back-{rt}"));
        pm.ok(&["cp", &format!("{}:/tmp/c", d(rt)), back.to_str().unwrap()]);
        (Some(0), std::fs::read_to_string(back).unwrap())
    });
    t.same("export", |rt| {
        let tar = pm.dir.path().join(format!("export-{rt}.tar"));
        pm.ok(&["export", "-o", tar.to_str().unwrap(), &d(rt)]);
        let list = Command::new("tar").arg("-tf").arg(&tar).output().unwrap();
        let has_busybox = text(&list.stdout)
            .lines()
            .any(|l| l.trim_start_matches("./") == "bin/busybox");
        (list.status.code(), format!("busybox={has_busybox}"))
    });
    t.same("pause/unpause", |rt| {
        pm.ok(&["pause", &d(rt)]);
        let paused = pm.status(&d(rt));
        pm.ok(&["unpause", &d(rt)]);
        (Some(0), format!("{paused} {}", pm.status(&d(rt))))
    });
    t.same("stop of a TERM-ignoring process", |rt| {
        let out = pm.run(&["stop", "--time", "1", &d(rt)]);
        (
            out.status.code(),
            format!("{} {}", pm.status(&d(rt)), pm.inspect(&d(rt), "{{.State.ExitCode}}")),
        )
    });
    t.same("restart", |rt| {
        pm.ok(&["restart", "--time", "0", &d(rt)]);
        pm.wait_status(&d(rt), "running");
        let out = pm.run(&["exec", &d(rt), "true"]);
        (out.status.code(), pm.status(&d(rt)))
    });
    t.same("inspect exit code after kill", |rt| {
        pm.ok(&["kill", &d(rt)]);
        pm.wait_status(&d(rt), "exited");
        (
            Some(0),
            pm.inspect(&d(rt), "{{.State.Status}} {{.State.ExitCode}} {{.State.OOMKilled}}"),
        )
    });
    for rt in RUNTIMES {
        pm.ok(&["rm", &d(rt)]);
    }
    t.same("--rm after a signal", |rt| {
        let name = format!("sig-{rt}");
        let mut child = pm
            .container_command("run", rt, &["--rm", "--name", &name, img, "sleep", "1000"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        pm.wait_status(&name, "running");
        pm.ok(&["kill", "--signal", "KILL", &name]);
        let code = child.wait().unwrap().code();
        wait_until(Duration::from_secs(10), "the --rm removal", || {
            (!pm.run(&["container", "exists", &name]).status.success()).then_some(())
        });
        (code, "removed".into())
    });
    t.finish("podman");
    pm.finish();
}
