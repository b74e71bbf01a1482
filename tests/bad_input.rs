//! Bad input: each case is one error line naming the thing, exit status 1, no
//! panic, and nothing left behind.

use std::time::Duration;

use claude_shim_e2e::*;

fn write_config(dir: &std::path::Path, text: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("config.json"), text).unwrap();
}

#[test]
fn malformed_config_json() {
    let env = Env::new();
    let dir = env.dir.path().join("malformed");
    write_config(&dir, "{\"ociVersion\": \"1.0.2\", \"process\": ");
    let id = unique_id("malformed");
    let line = env.fails(&["create", "--bundle", dir.to_str().unwrap(), &id]);
    assert!(line.contains("config.json"), "{line}");
    env.assert_no_leaks(&id);
}

#[test]
fn wrong_oci_version() {
    let env = Env::new();
    let bundle = env.bundle("v2", |v| v["ociVersion"] = serde_json::json!("2.0.0"));
    let id = unique_id("v2");
    let line = env.fails(&["create", "--bundle", bundle.to_str().unwrap(), &id]);
    assert!(line.contains("2.0.0"), "{line}");
    env.assert_no_leaks(&id);
}

#[test]
fn missing_rootfs() {
    let env = Env::new();
    let bundle = env.bundle("norootfs", |v| v["root"]["path"] = serde_json::json!("does-not-exist"));
    let id = unique_id("norootfs");
    let line = env.fails(&["create", "--bundle", bundle.to_str().unwrap(), &id]);
    assert!(line.contains("does-not-exist"), "{line}");
    env.assert_no_leaks(&id);
}

#[test]
fn mount_destination_through_a_symlink_out_of_the_rootfs() {
    let env = Env::new();
    // A private rootfs holding a symlink that climbs out of it.
    let rootfs = env.dir.path().join("evil-rootfs");
    std::fs::create_dir_all(rootfs.join("bin")).unwrap();
    std::fs::copy(rootfs_path().join("bin/busybox"), rootfs.join("bin/busybox")).unwrap();
    std::os::unix::fs::symlink("busybox", rootfs.join("bin/sh")).unwrap();
    std::os::unix::fs::symlink("../../../../../../../tmp", rootfs.join("escape")).unwrap();
    let bundle = env.bundle("escape", |v| {
        v["root"] = serde_json::json!({"path": rootfs, "readonly": false});
        v["mounts"].as_array_mut().unwrap().push(serde_json::json!({
            "destination": "/escape/claude-shim-pwned", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid"]
        }));
    });
    let id = unique_id("escape");
    let line = env.fails(&["create", "--bundle", bundle.to_str().unwrap(), &id]);
    assert!(
        line.contains("/escape/claude-shim-pwned") && line.contains("outside the rootfs"),
        "{line}"
    );
    assert!(!std::path::Path::new("/tmp/claude-shim-pwned").exists());
    env.assert_no_leaks(&id);
}

fn rootfs_path() -> std::path::PathBuf {
    rootfs()
}

#[test]
fn duplicate_id() {
    let env = Env::new();
    let bundle = env.bundle("dup", |v| set_args(v, &["sleep", "1000"]));
    let id = unique_id("dup");
    env.ok(&["create", "--bundle", bundle.to_str().unwrap(), &id]);
    let line = env.fails(&["create", "--bundle", bundle.to_str().unwrap(), &id]);
    assert!(line.contains(&id) && line.contains("already exists"), "{line}");
    assert_eq!(env.status(&id), "created", "the first container is untouched");
    env.ok(&["delete", "--force", &id]);
    env.assert_no_leaks(&id);
}

#[test]
fn unknown_id_for_every_verb() {
    let env = Env::new();
    let id = unique_id("ghost");
    let verbs: Vec<Vec<&str>> = vec![
        vec!["start", &id],
        vec!["state", &id],
        vec!["kill", &id, "KILL"],
        vec!["delete", &id],
        vec!["exec", &id, "true"],
        vec!["ps", &id],
        vec!["pause", &id],
        vec!["resume", &id],
        vec!["update", "--pids-limit", "10", &id],
    ];
    for args in verbs {
        let line = env.fails(&args);
        assert!(
            line.contains(&id) && line.contains("does not exist"),
            "{args:?}: {line}"
        );
    }
    // runc: delete --force of an unknown id succeeds
    env.ok(&["delete", "--force", &id]);
    env.assert_no_leaks(&id);
}

#[test]
fn invalid_ids() {
    let env = Env::new();
    let bundle = env.bundle("badid", |v| set_args(v, &["true"]));
    for id in ["../x", "", "a/b", ".."] {
        for args in [
            vec!["create", "--bundle", bundle.to_str().unwrap(), id],
            vec!["state", id],
        ] {
            let line = env.fails(&args).to_lowercase();
            assert!(
                line.contains("container id") || line.contains("container_id"),
                "{id:?}: {line}"
            );
        }
    }
    assert!(!env.dir.path().join("x").exists());
    let left: Vec<_> = std::fs::read_dir(env.root.join(".claude-shim"))
        .map(|d| d.count())
        .into_iter()
        .collect();
    assert!(left.iter().all(|n| *n == 0), "no state left: {left:?}");
}

#[test]
fn unknown_signal() {
    let env = Env::new();
    let bundle = env.bundle("sig", |v| set_args(v, &["sleep", "1000"]));
    let id = unique_id("sig");
    env.ok(&["run", "-d", "--bundle", bundle.to_str().unwrap(), &id]);
    for sig in ["SIGNOPE", "99", "-1"] {
        let line = env.fails(&["kill", &id, sig]);
        assert!(line.contains(sig), "{line}");
    }
    assert_eq!(env.status(&id), "running");
    env.ok(&["delete", "--force", &id]);
    env.assert_no_leaks(&id);
}

#[test]
fn exec_into_a_stopped_container() {
    let env = Env::new();
    let bundle = env.bundle("stopped", |v| set_args(v, &["true"]));
    let id = unique_id("stopped");
    env.ok(&["run", "-d", "--bundle", bundle.to_str().unwrap(), &id]);
    env.wait_status(&id, "stopped");
    let line = env.fails(&["exec", &id, "true"]);
    assert!(line.contains(&id) && line.contains("stopped"), "{line}");
    env.ok(&["delete", &id]);
    env.assert_no_leaks(&id);
}

#[test]
fn missing_executable() {
    let env = Env::new();
    let bundle = env.bundle("noexe", |v| set_args(v, &["/no/such/binary"]));
    let id = unique_id("noexe");
    let line = env.fails(&["create", "--bundle", bundle.to_str().unwrap(), &id]);
    assert!(line.contains("/no/such/binary"), "{line}");
    env.assert_no_leaks(&id);
}

/// A runtime SIGKILLed in the middle of create leaves a half-created
/// container; `delete --force` removes all of it, and the id is usable again.
#[test]
fn killed_mid_create() {
    let env = Env::new();
    let marker = env.dir.path().join("in-hook");
    let bundle = env.bundle("midcreate", |v| {
        set_args(v, &["sleep", "1000"]);
        v["hooks"] = serde_json::json!({
            "createRuntime": [{"path": "/bin/sh", "args": ["sh", "-c", format!("echo $$ > {}.tmp; mv {0}.tmp {0}; exec sleep 30", marker.display())]}]
        });
    });
    let id = unique_id("midcreate");
    let mut child = env
        .command(&["create", "--bundle", bundle.to_str().unwrap(), &id])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for_file(&marker);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
    kill_hook(&marker);
    std::thread::sleep(Duration::from_millis(100));
    assert!(env.root.join(&id).exists(), "the killed create left its state");
    env.ok(&["delete", "--force", &id]);
    env.assert_no_leaks(&id);

    // and a later create of the same id, after another kill, cleans up by itself
    let _ = std::fs::remove_file(&marker);
    let mut child = env
        .command(&["create", "--bundle", bundle.to_str().unwrap(), &id])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for_file(&marker);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
    kill_hook(&marker);
    let plain = env.bundle("midcreate-plain", |v| set_args(v, &["true"]));
    let out = env.run(&["run", "--bundle", plain.to_str().unwrap(), &id]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    env.assert_no_leaks(&id);
}

/// The hook was started by the runtime we killed, outside the container: end it, by its pid.
fn kill_hook(marker: &std::path::Path) {
    let pid: i32 = std::fs::read_to_string(marker).unwrap().trim().parse().unwrap();
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
}

/// A state directory without state.json (a create killed before it wrote any)
/// must block neither `delete --force` nor a new `create` of the id.
#[test]
fn state_directory_without_state_json() {
    let env = Env::new();
    let id = unique_id("nostate");
    std::fs::create_dir_all(env.root.join(&id)).unwrap();
    env.ok(&["delete", "--force", &id]);
    env.assert_no_leaks(&id);

    std::fs::create_dir_all(env.root.join(&id)).unwrap();
    let bundle = env.bundle("nostate", |v| set_args(v, &["true"]));
    let out = env.run(&["run", "--bundle", bundle.to_str().unwrap(), &id]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    env.assert_no_leaks(&id);
}

#[test]
fn systemd_cgroup_is_refused_without_systemd() {
    let env = Env::new();
    let line = env.fails(&["--systemd-cgroup", "state", "x"]);
    assert!(line.contains("systemd"), "{line}");
}

/// `claude-shim ARGS` under a watchdog: a hang is a failure, not a stuck CI.
fn fails_within(env: &Env, args: &[&str], secs: u32) -> String {
    let mut c = std::process::Command::new("timeout");
    c.args(["-s", "KILL", &secs.to_string()])
        .arg(shim_path())
        .arg("--root")
        .arg(&env.root)
        .args(args);
    let out = output_of(c, env.dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_ne!(
        out.status.code(),
        None,
        "claude-shim {args:?} hung (killed after {secs} s)"
    );
    assert_eq!(out.status.code(), Some(1), "claude-shim {args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.contains("warning:")).collect();
    assert_eq!(lines.len(), 1, "one error line: {stderr:?}");
    lines[0].to_owned()
}

/// A workspace of its own (sandbox and bundle need a working directory).
fn workdir(env: &Env) -> std::path::PathBuf {
    let w = env.dir.path().join("work");
    std::fs::create_dir_all(&w).unwrap();
    w
}

fn sandbox_fails(env: &Env, policy_text: &str, script: &str) -> String {
    let policy = env.dir.path().join("policy.toml");
    std::fs::write(&policy, policy_text).unwrap();
    let w = workdir(env);
    fails_within(
        env,
        &[
            "sandbox",
            "--policy",
            policy.to_str().unwrap(),
            "--workdir",
            w.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            script,
        ],
        60,
    )
}

/// issue 11: a NUL byte in an env value panicked the container's init.
#[test]
fn nul_byte_in_an_env_value() {
    let env = Env::new();
    let bundle = env.bundle("nulenv", |v| {
        set_args(v, &["true"]);
        v["process"]["env"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!("EVIL=a\u{0}b"));
    });
    let id = unique_id("nulenv");
    let line = env.fails(&["create", "--bundle", bundle.to_str().unwrap(), &id]);
    assert!(line.contains("process.env[") && line.contains("NUL byte"), "{line}");
    env.assert_no_leaks(&id);

    // The same in an exec's process file.
    let bundle = env.bundle("nulexec", |v| set_args(v, &["sleep", "1000"]));
    let id = unique_id("nulexec");
    env.ok(&["run", "-d", "--bundle", bundle.to_str().unwrap(), &id]);
    let process = env.dir.path().join("process.json");
    std::fs::write(
        &process,
        serde_json::to_vec(&serde_json::json!({
            "cwd": "/", "args": ["true"], "env": ["PATH=/bin", "EVIL=a\u{0}b"], "user": {"uid": 0, "gid": 0}
        }))
        .unwrap(),
    )
    .unwrap();
    let line = env.fails(&["exec", "--process", process.to_str().unwrap(), &id]);
    assert!(line.contains("process.env[1] holds a NUL byte"), "{line}");
    assert_eq!(env.status(&id), "running");
    env.ok(&["delete", "--force", &id]);
    env.assert_no_leaks(&id);
}

/// issue 11: `[environment] set` with a NUL byte.
#[test]
fn nul_byte_in_a_policy_env_value() {
    let env = Env::new();
    let line = sandbox_fails(
        &env,
        "version = 1\n[environment]\nset = { EVIL = \"a\\u0000b\" }\n",
        "true",
    );
    assert!(
        line.contains("environment.set.EVIL") && line.contains("NUL byte"),
        "{line}"
    );
}

/// issue 11: `seccomp.profile = "/dev/zero"` hung while memory grew; a policy
/// or a config.json that is a device or a FIFO is refused at once.
#[test]
fn input_files_must_be_regular_files() {
    let env = Env::new();
    let line = sandbox_fails(&env, "version = 1\n[seccomp]\nprofile = \"/dev/zero\"\n", "true");
    assert!(
        line.contains("seccomp.profile") && line.contains("/dev/zero") && line.contains("not a regular file"),
        "{line}"
    );
    let w = workdir(&env);
    let line = fails_within(
        &env,
        &[
            "sandbox",
            "--policy",
            "/dev/zero",
            "--workdir",
            w.to_str().unwrap(),
            "--",
            "true",
        ],
        60,
    );
    assert!(
        line.contains("/dev/zero") && line.contains("not a regular file"),
        "{line}"
    );

    let bundle = env.dir.path().join("fifo-bundle");
    std::fs::create_dir_all(&bundle).unwrap();
    nix::unistd::mkfifo(
        &bundle.join("config.json"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let id = unique_id("fifo");
    let line = fails_within(&env, &["create", "--bundle", bundle.to_str().unwrap(), &id], 60);
    assert!(
        line.contains("config.json") && line.contains("not a regular file"),
        "{line}"
    );
    env.assert_no_leaks(&id);
}

/// issue 11: a `writable` entry that is a symlink to `/` got past the "/ is
/// refused" check, and the sandbox wrote /x on the host.
#[test]
fn writable_symlink_to_the_root_is_refused() {
    let env = Env::new();
    let link = env.dir.path().join("rootlink");
    std::os::unix::fs::symlink("/", &link).unwrap();
    let marker = format!("/claude-shim-input-{}", std::process::id());
    let line = sandbox_fails(
        &env,
        &format!("version = 1\n[filesystem]\nwritable = [{:?}]\n", link.to_str().unwrap()),
        &format!("touch {marker}"),
    );
    assert!(
        line.contains("filesystem.writable[0]") && line.contains("resolves to /") && line.contains("cannot be bound"),
        "{line}"
    );
    assert!(
        !std::path::Path::new(&marker).exists(),
        "{marker} was written on the host"
    );
}

/// issue 11: a poststop hook that cannot run made `delete` fail; the OCI
/// spec says warn and continue.
#[test]
fn failing_poststop_hook_warns_and_deletes() {
    let env = Env::new();
    let bundle = env.bundle("poststop", |v| {
        set_args(v, &["true"]);
        v["hooks"] = serde_json::json!({"poststop": [{"path": "/no/such/poststop-hook"}, {"path": "/bin/false"}]});
    });
    let id = unique_id("poststop");
    env.ok(&["run", "-d", "--bundle", bundle.to_str().unwrap(), &id]);
    env.wait_status(&id, "stopped");
    let out = env.run(&["delete", &id]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "the delete goes on: {stderr}");
    env.assert_no_leaks(&id);
}

/// issue 11: duplicate namespaces were accepted.
#[test]
fn duplicate_namespaces_are_refused() {
    let env = Env::new();
    let bundle = env.bundle("dupns", |v| {
        set_args(v, &["true"]);
        v["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"type": "pid"}));
    });
    let id = unique_id("dupns");
    let line = env.fails(&["create", "--bundle", bundle.to_str().unwrap(), &id]);
    assert!(
        line.contains("linux.namespaces[") && line.contains("pid namespace is listed twice"),
        "{line}"
    );
    env.assert_no_leaks(&id);
}
