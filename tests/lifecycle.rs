//! The OCI lifecycle through the real binary, as an engine drives it.

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use claude_shim_e2e::engines::wait_until;
use claude_shim_e2e::*;

const LOOP: &str =
    "trap 'echo usr1 > /tmp/usr1' USR1; trap 'exit 7' TERM; echo ready > /tmp/ready; while :; do sleep 0.05; done";

#[test]
fn create_start_state_ps_pause_exec_kill_delete() {
    let env = Env::new();
    let id = unique_id("life");
    let bundle = env.bundle("life", |v| {
        set_args(v, &["sh", "-c", LOOP]);
        with_tmp(v);
    });
    let pid_file = env.dir.path().join("init.pid");
    env.ok(&[
        "create",
        "--bundle",
        bundle.to_str().unwrap(),
        "--pid-file",
        pid_file.to_str().unwrap(),
        &id,
    ]);
    let state = env.state(&id);
    assert_eq!(state["status"], "created");
    assert_eq!(state["id"], id.as_str());
    assert_eq!(state["bundle"], bundle.to_str().unwrap());
    let pid = state["pid"].as_i64().unwrap();
    assert!(pid > 0);
    assert_eq!(
        std::fs::read_to_string(&pid_file).unwrap().trim(),
        pid.to_string(),
        "pid file holds the init pid"
    );

    env.ok(&["start", &id]);
    assert_eq!(env.status(&id), "running");
    let ps: Vec<i64> = serde_json::from_str(&env.ok(&["ps", "--format", "json", &id])).unwrap();
    assert!(ps.contains(&pid), "ps {ps:?} lists the init {pid}");
    let table = env.ok(&["ps", &id]);
    assert!(table.lines().next().unwrap().contains("PID"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.split_whitespace().nth(1) == Some(&pid.to_string())),
        "{table}"
    );

    env.ok(&["pause", &id]);
    assert_eq!(env.status(&id), "paused");
    env.ok(&["resume", &id]);
    assert_eq!(env.status(&id), "running");

    // exec: plain, detached with a pid file.
    let out = env.ok(&["exec", &id, "cat", "/tmp/ready"]);
    assert_eq!(out.trim(), "ready");
    let out = env.run(&["exec", &id, "sh", "-c", "exit 5"]);
    assert_eq!(out.status.code(), Some(5), "exec returns the process's exit status");
    let exec_pid = env.dir.path().join("exec.pid");
    env.ok(&[
        "exec",
        "--detach",
        "--pid-file",
        exec_pid.to_str().unwrap(),
        &id,
        "sh",
        "-c",
        "echo detached > /tmp/detached",
    ]);
    assert!(
        std::fs::read_to_string(&exec_pid)
            .unwrap()
            .trim()
            .parse::<i32>()
            .unwrap()
            > 0
    );
    wait_until(Duration::from_secs(10), "the detached exec's file", || {
        (env.run(&["exec", &id, "cat", "/tmp/detached"]).stdout == b"detached\n").then_some(())
    });

    // kill by name, then by number.
    env.ok(&["kill", &id, "USR1"]);
    wait_until(Duration::from_secs(10), "the USR1 trap", || {
        (env.run(&["exec", &id, "cat", "/tmp/usr1"]).stdout == b"usr1\n").then_some(())
    });
    env.ok(&["kill", &id, "15"]);
    env.wait_status(&id, "stopped");
    assert_eq!(env.state(&id)["pid"], 0);
    env.ok(&["delete", &id]);
    env.fails(&["state", &id]);
    env.assert_no_leaks(&id);
}

#[test]
fn kill_and_force_delete_a_created_container() {
    let env = Env::new();
    let bundle = env.bundle("created", |v| set_args(v, &["sleep", "1000"]));
    let id = unique_id("created-kill");
    env.ok(&["create", "--bundle", bundle.to_str().unwrap(), &id]);
    env.ok(&["kill", &id, "TERM"]);
    env.wait_status(&id, "stopped");
    env.ok(&["delete", &id]);
    env.assert_no_leaks(&id);

    let id = unique_id("created-delete");
    env.ok(&["create", "--bundle", bundle.to_str().unwrap(), &id]);
    env.ok(&["delete", "--force", &id]);
    env.assert_no_leaks(&id);
}

#[test]
fn kill_all_and_force_delete_running() {
    let env = Env::new();
    let bundle = env.bundle("all", |v| set_args(v, &["sh", "-c", "sleep 1000 & sleep 1000"]));
    let id = unique_id("killall");
    env.ok(&["run", "--detach", "--bundle", bundle.to_str().unwrap(), &id]);
    env.wait_status(&id, "running");
    env.ok(&["kill", "--all", &id, "KILL"]);
    env.wait_status(&id, "stopped");
    env.ok(&["delete", &id]);
    env.assert_no_leaks(&id);

    let id = unique_id("forcerun");
    env.ok(&["run", "--detach", "--bundle", bundle.to_str().unwrap(), &id]);
    let out = env.run(&["delete", &id]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "delete refuses a running container without --force"
    );
    env.ok(&["delete", "--force", &id]);
    env.assert_no_leaks(&id);
}

#[test]
fn run_returns_the_exit_status() {
    let env = Env::new();
    for (code, args) in [(0, vec!["true"]), (3, vec!["sh", "-c", "exit 3"])] {
        let bundle = env.bundle(&format!("exit{code}"), |v| set_args(v, &args));
        let id = unique_id(&format!("exit{code}"));
        let out = env.run(&["run", "--bundle", bundle.to_str().unwrap(), &id]);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        env.assert_no_leaks(&id);
    }
    // SIGKILL from outside: 128 + 9.
    let bundle = env.bundle("exit137", |v| set_args(v, &["sleep", "1000"]));
    let id = unique_id("exit137");
    let mut child = env
        .command(&["run", "--bundle", bundle.to_str().unwrap(), &id])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    env.wait_status(&id, "running");
    env.ok(&["kill", &id, "KILL"]);
    assert_eq!(child.wait().unwrap().code(), Some(137));
    env.assert_no_leaks(&id);
}

#[test]
fn standalone_run_of_a_bundle_path() {
    let env = Env::new();
    let bundle = env.bundle("standalone", |v| set_args(v, &["sh", "-c", "echo standalone; exit 4"]));
    let path = format!("{}/", bundle.display());
    let out = env.run(&["run", &path]);
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "standalone");
    let left: Vec<_> = std::fs::read_dir(&env.root)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        left,
        vec![std::ffi::OsString::from(".claude-shim")],
        "the generated container is deleted"
    );
    assert_eq!(std::fs::read_dir(env.root.join(".claude-shim")).unwrap().count(), 0);
}

#[test]
fn stdio_passes_through() {
    let env = Env::new();
    let bundle = env.bundle("stdio", |v| {
        set_args(v, &["sh", "-c", "read line; echo \"out:$line\"; echo err:$line >&2"])
    });
    let id = unique_id("stdio");
    let mut child = env
        .command(&["run", "--bundle", bundle.to_str().unwrap(), &id])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out:hello\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "err:hello\n");
    env.assert_no_leaks(&id);
}

#[test]
fn terminal_through_a_console_socket() {
    let env = Env::new();
    let console = ConsoleServer::new(env.dir.path());
    let bundle = env.bundle("tty", |v| {
        set_args(v, &["sh", "-c", "echo tty:$(tty); sleep 1000"]);
        v["process"]["terminal"] = serde_json::Value::Bool(true);
    });
    let id = unique_id("tty");
    let sock = console.path.to_str().unwrap().to_owned();
    let creator = std::thread::spawn({
        let args: Vec<String> = [
            "create",
            "--bundle",
            bundle.to_str().unwrap(),
            "--console-socket",
            &sock,
            &id,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let cmd_env = env.command(&[]).get_args().map(|a| a.to_owned()).collect::<Vec<_>>();
        move || {
            let mut c = std::process::Command::new(shim_path());
            c.args(cmd_env).args(args);
            c.stdout(Stdio::null()).stderr(Stdio::piped()).stdin(Stdio::null());
            c.output().unwrap()
        }
    });
    let mut master = console.receive();
    let out = creator.join().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    env.ok(&["start", &id]);
    let seen = read_until(&mut master, "tty:/dev/pts/", Duration::from_secs(5));
    assert!(seen.contains("tty:/dev/pts/"), "init's terminal: {seen:?}");

    // exec -t through a second console socket.
    let console2 = ConsoleServer::new(env.dir.path());
    env.ok(&[
        "exec",
        "--tty",
        "--detach",
        "--console-socket",
        console2.path.to_str().unwrap(),
        &id,
        "sh",
        "-c",
        "echo exec-tty:$(tty); sleep 1",
    ]);
    let mut master2 = console2.receive();
    let seen = read_until(&mut master2, "exec-tty:/dev/pts/", Duration::from_secs(5));
    assert!(seen.contains("exec-tty:/dev/pts/"), "exec's terminal: {seen:?}");
    env.ok(&["delete", "--force", &id]);
    env.assert_no_leaks(&id);
}

#[test]
fn json_log_lines_have_runc_shape() {
    let env = Env::new();
    for spelling in [vec!["--log-format=json"], vec!["--log-format", "json"]] {
        let log = env.dir.path().join(format!("log-{}.json", spelling.len()));
        let id = unique_id("jsonlog");
        let missing = env.dir.path().join("no-such-bundle");
        let mut args = vec!["--log", log.to_str().unwrap()];
        args.extend(spelling.iter().copied());
        args.extend(["create", "--bundle", missing.to_str().unwrap(), &id]);
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(1));
        let text = std::fs::read_to_string(&log).unwrap();
        let last = text.lines().last().unwrap();
        let v: serde_json::Value = serde_json::from_str(last).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["level", "msg", "time"]);
        assert_eq!(v["level"], "error");
        assert!(v["msg"].as_str().unwrap().contains("no-such-bundle"), "{last}");
        assert!(v["time"].as_str().unwrap().ends_with('Z'));
        // and the same error, once, on stderr
        assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-bundle"));
        env.assert_no_leaks(&id);
    }
}

#[test]
fn features_and_spec_print_valid_oci_json() {
    let env = Env::new();
    let f: serde_json::Value = serde_json::from_str(&env.ok(&["features"])).unwrap();
    assert_eq!(f["ociVersionMin"], "1.0.0");
    assert_eq!(f["linux"]["seccomp"]["enabled"], true);
    for rootless in [false, true] {
        let dir = env.dir.path().join(format!("spec-{rootless}"));
        std::fs::create_dir(&dir).unwrap();
        let mut args = vec!["spec", "--bundle", dir.to_str().unwrap()];
        if rootless {
            args.push("--rootless");
        }
        env.ok(&args);
        let spec: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
        assert!(spec["ociVersion"].as_str().unwrap().starts_with("1."));
        assert_eq!(spec["process"]["args"][0], "sh");
        let has_userns = spec["linux"]["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["type"] == "user");
        assert_eq!(has_userns, rootless);
        env.fails(&args); // config.json exists now
    }
}

#[test]
fn version_and_help() {
    let env = Env::new();
    assert!(env.ok(&["--version"]).starts_with("claude-shim version "));
    let help = env.ok(&["--help"]);
    for verb in [
        "create", "start", "state", "kill", "delete", "run", "exec", "ps", "list", "pause", "resume", "update",
        "events", "features", "spec",
    ] {
        assert!(help.contains(verb), "--help lists {verb}");
    }
}

/// libcontainer 0.7 builds an exec'd process's spec without the container's
/// seccomp profile; claude-shim re-applies it. A process started by `exec`
/// must be as filtered as the init.
#[test]
fn exec_inherits_the_seccomp_profile() {
    let env = Env::new();
    let bundle = env.bundle("seccomp-exec", |v| {
        set_args(v, &["sleep", "1000"]);
        with_tmp(v);
        v["linux"]["seccomp"] = serde_json::json!({
            "defaultAction": "SCMP_ACT_ALLOW",
            "architectures": ["SCMP_ARCH_X86_64"],
            "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]
        });
    });
    let id = unique_id("seccomp-exec");
    env.ok(&["run", "-d", "--bundle", bundle.to_str().unwrap(), &id]);
    let status = env.ok(&["exec", &id, "grep", "-E", "^(Seccomp|NoNewPrivs):", "/proc/self/status"]);
    assert!(status.contains("Seccomp:\t2"), "exec'd process is filtered: {status}");
    let out = env.run(&["exec", &id, "mkdir", "/tmp/denied"]);
    assert_ne!(out.status.code(), Some(0), "mkdir is denied in an exec'd process");
    assert!(String::from_utf8_lossy(&out.stderr).contains("Operation not permitted"));
    env.ok(&["delete", "--force", &id]);
    env.assert_no_leaks(&id);
}

/// An exec'd process joins the container's user namespace (libcontainer 0.7
/// leaves it out): as root it must not run with the host's credentials.
#[test]
fn exec_joins_the_user_namespace() {
    let env = Env::new();
    let bundle = env.bundle("userns-exec", |v| {
        set_args(v, &["sleep", "1000"]);
        v["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"type": "user"}));
        v["linux"]["uidMappings"] = serde_json::json!([{"containerID": 0, "hostID": 100000, "size": 65536}]);
        v["linux"]["gidMappings"] = serde_json::json!([{"containerID": 0, "hostID": 100000, "size": 65536}]);
        // a rootfs owned by host root shows as nobody inside; it stays readable
    });
    let id = unique_id("userns-exec");
    env.ok(&["run", "-d", "--bundle", bundle.to_str().unwrap(), &id]);
    let init_ns = std::fs::read_link(format!("/proc/{}/ns/user", env.state(&id)["pid"])).unwrap();
    let map = env.ok(&["exec", &id, "cat", "/proc/self/uid_map"]);
    assert_eq!(
        map.split_whitespace().collect::<Vec<_>>(),
        ["0", "100000", "65536"],
        "exec'd process sees the container's map"
    );
    let exec_ns = env.ok(&["exec", &id, "readlink", "/proc/self/ns/user"]);
    assert_eq!(exec_ns.trim(), init_ns.to_string_lossy());
    env.ok(&["delete", "--force", &id]);
    env.assert_no_leaks(&id);
}

/// Without CAP_SYS_RESOURCE (this machine's bounding set lacks it) a hard
/// limit cannot be raised: requested limits above it are clamped, with a warning.
#[test]
fn rlimits_above_the_hard_limit_are_clamped() {
    let env = Env::new();
    let (_, hard) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
    let bundle = env.bundle("rlimit", |v| {
        set_args(v, &["sh", "-c", "ulimit -H -n; ulimit -S -n"]);
        v["process"]["rlimits"] =
            serde_json::json!([{"type": "RLIMIT_NOFILE", "hard": 1_048_576u64 * 64, "soft": 1_048_576u64 * 64}]);
    });
    let id = unique_id("rlimit");
    let out = env.run(&["run", "--bundle", bundle.to_str().unwrap(), &id]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let caps = std::fs::read_to_string("/proc/self/status").unwrap();
    let bounding = caps.lines().find(|l| l.starts_with("CapBnd:")).unwrap();
    let bnd = u64::from_str_radix(bounding.trim_start_matches("CapBnd:").trim(), 16).unwrap();
    if bnd & (1 << 24) == 0 {
        assert_eq!(
            stdout.lines().collect::<Vec<_>>(),
            [hard.to_string(), hard.to_string()],
            "clamped to {hard}"
        );
        assert!(
            stderr.contains("RLIMIT_NOFILE") && stderr.contains("clamped"),
            "{stderr}"
        );
    } else {
        // With the capability the limit is applied as asked.
        assert_eq!(stdout.lines().next(), Some((1_048_576u64 * 64).to_string().as_str()));
    }
    env.assert_no_leaks(&id);
}

/// CVE-2019-5736: while a container's init is still runtime code (created,
/// not started), its executable is not the binary on disk but a copy that
/// cannot be written: as root, the binary in a read-only overlay mount
/// attached nowhere (EROFS); as a user, a sealed in-memory copy that is also
/// the text of a running process (ETXTBSY).
#[test]
fn init_runs_from_a_sealed_copy_of_the_runtime() {
    use std::io::Write as _;
    let (uid, gid) = test_user();
    for env in [Env::new(), Env::as_user(uid, gid)] {
        let bundle = env.bundle("sealed", |v| set_args(v, &["true"]));
        let id = unique_id("sealed");
        env.ok(&["create", "--bundle", bundle.to_str().unwrap(), &id]);
        let pid = env.state(&id)["pid"].as_i64().unwrap();
        let exe_link = format!("/proc/{pid}/exe");
        let exe = std::fs::read_link(&exe_link).unwrap();
        let (want_errno, how) = if env.as_user.is_none() {
            let fs = nix::sys::statfs::statfs(exe_link.as_str()).unwrap();
            assert_eq!(
                fs.filesystem_type(),
                nix::sys::statfs::OVERLAYFS_SUPER_MAGIC,
                "{}",
                exe.display()
            );
            let vfs = nix::sys::statvfs::statvfs(exe_link.as_str()).unwrap();
            assert!(vfs.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY));
            (libc::EROFS, "read-only overlay")
        } else {
            assert!(
                exe.to_string_lossy().starts_with("/memfd:"),
                "init's executable is {}",
                exe.display()
            );
            // The sealed file is also the text of a running process.
            (libc::ETXTBSY, "sealed memfd")
        };
        assert_ne!(exe, std::fs::canonicalize(shim_path()).unwrap(), "{how}");
        let before = std::fs::read(shim_path()).unwrap();
        let write = std::fs::OpenOptions::new()
            .write(true)
            .open(&exe_link)
            .and_then(|mut f| f.write_all(b"\x7fELF overwritten"));
        let err = write.expect_err("writing through /proc/<pid>/exe must fail");
        assert_eq!(err.raw_os_error(), Some(want_errno), "{how}: {err}");
        assert_eq!(
            std::fs::read(shim_path()).unwrap(),
            before,
            "the binary on disk is unchanged"
        );
        env.ok(&["delete", "--force", &id]);
        env.assert_no_leaks(&id);
    }
}
