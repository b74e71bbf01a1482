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
