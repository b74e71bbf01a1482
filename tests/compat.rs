//! Engine compatibility (issue 12): the flags users reach for in podman and
//! ctr, each run under runc and under claude-shim on the same image, with the
//! same observable result (exit code and output). A difference fails the test
//! unless the check says why claude-shim is stricter. Each test prints every
//! check with both runtimes' results.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use claude_shim_e2e::engines::*;
use claude_shim_e2e::output_of;

const RUNTIMES: [&str; 2] = ["runc", "claude-shim"];

/// What a user sees of one command: its exit code and its output.
type Seen = (Option<i32>, String);

fn seen(out: std::process::Output) -> Seen {
    (out.status.code(), text(&out.stdout))
}

/// The checks of one test: each runs under both runtimes; the table of
/// check / runc / claude-shim is printed at the end (`--nocapture` shows it
/// for a passing run too), then every difference fails the test.
#[derive(Default)]
struct Table {
    rows: Vec<(String, Seen, Seen)>,
}

impl Table {
    /// Runs `check` under runc and then claude-shim (a runtime's name in the
    /// output, as in a container name, reads "RT").
    fn same(&mut self, name: &str, mut check: impl FnMut(&str) -> Seen) {
        let (code, out) = check("runc");
        let theirs = (code, out.replace("runc", "RT"));
        let (code, out) = check("claude-shim");
        let ours = (code, out.replace("claude-shim", "RT"));
        self.rows.push((name.to_owned(), theirs, ours));
    }

    fn finish(self, title: &str) {
        let cell = |s: &Seen| {
            let out = s.1.trim_end().replace('\n', " | ");
            format!("exit {} {out:?}", s.0.map_or("signal".into(), |c| c.to_string()))
        };
        println!("\n{title}: check / runc / claude-shim");
        for (name, theirs, ours) in &self.rows {
            let verdict = if theirs == ours { "same" } else { "DIFFERENT" };
            println!(
                "{name:<44} | runc {} | claude-shim {} | {verdict}",
                cell(theirs),
                cell(ours)
            );
        }
        let differ: Vec<&str> = self
            .rows
            .iter()
            .filter(|(_, theirs, ours)| theirs != ours)
            .map(|(name, ..)| name.as_str())
            .collect();
        assert!(differ.is_empty(), "claude-shim differs from runc in: {differ:?}");
    }
}

/// Caps and seccomp lines of /proc/self/status.
const STATUS: &str = "grep -E '^(Cap|Seccomp:|NoNewPrivs)' /proc/self/status";

/// What a user of `--read-only` checks on the image from `files_rootfs`: the
/// image's files in /run, /tmp and /var/tmp (contents, modes, owners, a
/// symlink), those tmpfs writable, the root read-only.
const READ_ONLY_CHECK: &str = "cat /run/app.pid /tmp/hello /tmp/sub/deep/f /var/tmp/vt; \
    stat -c '%A %u:%g %n' /run /run/app.pid /run/lock /tmp /tmp/hello /tmp/sub /tmp/sub/deep /var/tmp; \
    readlink /tmp/link; touch /tmp/new /run/new /var/tmp/new && echo tmpfs-rw; \
    touch /x 2>/dev/null || echo root-ro";

/// A copy of the test rootfs whose /run, /tmp and /var/tmp hold files, as a
/// real image's do (pid files, lock directories, a user's private directory).
fn files_rootfs(dir: &Path) -> PathBuf {
    let root = dir.join("files-rootfs");
    let out = Command::new("cp")
        .arg("-a")
        .arg(claude_shim_e2e::rootfs())
        .arg(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "cp: {}", text(&out.stderr));
    let script = "set -e; cd \"$1\"; mkdir -p run/lock tmp/sub/deep; echo 4242 > run/app.pid; \
        chown 1000:1000 run/app.pid; chmod 0640 run/app.pid; echo hello > tmp/hello; chmod 0600 tmp/hello; \
        ln -s hello tmp/link; echo deep > tmp/sub/deep/f; chown 1000:1000 tmp/sub; chmod 0700 tmp/sub; \
        echo vt > var/tmp/vt";
    let out = Command::new("sh")
        .args(["-c", script, "sh"])
        .arg(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "files rootfs: {}", text(&out.stderr));
    root
}

/// Imports `rootfs` into the test's podman as `tag`, as hack/podman imports
/// the test image (under its lock, removing the blob cache that
/// containers/image writes to /var/lib/containers whatever the storage root).
fn import_image(pm: &Podman, rootfs: &Path, tag: &str) {
    let tar = pm.dir.path().join("files-rootfs.tar");
    let out = Command::new("tar")
        .arg("-C")
        .arg(rootfs)
        .arg("--numeric-owner")
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .output()
        .unwrap();
    assert!(out.status.success(), "tar: {}", text(&out.stderr));
    let script = "c=/var/lib/containers/cache; had=0; [ -e $c/blob-info-cache-v1.boltdb ] && had=1; \
        hadvar=0; [ -e /var/lib/containers ] && hadvar=1; \
        podman import -q --change 'ENV=PATH=/usr/sbin:/usr/bin:/sbin:/bin' \"$1\" \"$2\" >/dev/null; s=$?; \
        if [ $had = 0 ]; then rm -f $c/blob-info-cache-v1.boltdb; rmdir $c 2>/dev/null; \
        [ $hadvar = 1 ] || rmdir /var/lib/containers 2>/dev/null; fi; exit $s";
    let hack_podman = claude_shim_e2e::workspace().join("hack/podman");
    let mut c = Command::new("flock");
    c.arg(&hack_podman)
        .args(["sh", "-c", script, "sh"])
        .arg(&tar)
        .arg(tag)
        .env("CONTAINERS_CONF", pm.dir.path().join("containers.conf"))
        .env("CONTAINERS_STORAGE_CONF", pm.dir.path().join("storage.conf"));
    let out = output_of(c, pm.dir.path());
    assert!(out.status.success(), "podman import: {}", text(&out.stderr));
    std::fs::remove_file(&tar).unwrap();
}

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
