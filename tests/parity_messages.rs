//! runc parity for error messages (issue 25): bundles both runtimes refuse,
//! where claude-shim's one line names the thing and the reason. Each runs
//! under runc and claude-shim and prints both lines.

use claude_shim_e2e::oracle::*;
use claude_shim_e2e::*;
use serde_json::Value;

/// Runs `bundle` under both; asserts both fail; returns claude-shim's line.
fn both_refuse(env: &Env, name: &str, edit: impl FnOnce(&mut Value)) -> String {
    let bundle = env.bundle(name, |v| {
        set_args(v, &["true"]);
        edit(v);
    });
    let b = in_bundle(&bundle);
    let id = unique_id(name);
    let theirs = runc(env, &run_args(&b, &format!("runc-{name}")));
    eprintln!("runc: exit {:?}, {}", theirs.status.code(), text(&theirs.stderr).trim());
    assert!(!theirs.status.success(), "runc ran {name}");
    let line = env.fails(&run_args(&b, &id));
    eprintln!("claude-shim: {line}");
    env.assert_no_leaks(&id);
    line
}

#[test]
fn an_rlimit_soft_above_hard_is_named_with_both_values() {
    let env = Env::new();
    let line = both_refuse(&env, "rlimit", |v| {
        v["process"]["rlimits"] = serde_json::json!([{"type": "RLIMIT_NOFILE", "soft": 2048, "hard": 1024}]);
    });
    assert!(
        line.contains("RLIMIT_NOFILE: the soft limit 2048 is above the hard limit 1024"),
        "{line}"
    );
}

#[test]
fn a_relative_hook_path_is_named() {
    let env = Env::new();
    let line = both_refuse(&env, "relhook", |v| {
        v["hooks"] = serde_json::json!({"poststart": [{"path": "relative/hook"}]});
    });
    assert!(
        line.contains("hooks.poststart[0].path \"relative/hook\": it must be an absolute path"),
        "{line}"
    );
}

#[test]
fn a_rootfs_that_is_the_hosts_root_is_called_that() {
    let env = Env::new();
    let line = both_refuse(&env, "slashroot", |v| {
        v["root"] = serde_json::json!({"path": "/", "readonly": true});
    });
    // It was "failed to detect cgroup setup".
    assert!(line.contains("it is the host's /"), "{line}");
}

#[test]
fn an_apparmor_profile_that_cannot_apply_is_named() {
    let env = Env::new();
    let line = both_refuse(&env, "apparmor", |v| {
        v["process"]["apparmorProfile"] = "claude-shim-no-such-profile".into();
    });
    // It was "io error: No such file or directory".
    assert!(
        line.contains("process.apparmorProfile \"claude-shim-no-such-profile\""),
        "{line}"
    );
    assert!(
        line.contains("AppArmor is not enabled on this machine") || line.contains("no such profile is loaded"),
        "{line}"
    );
}

/// Arguments that fit no execve (30 x 100 kB; the kernel takes a quarter of
/// the stack limit, 2 MB here).
fn too_many_args() -> Vec<String> {
    let mut args = vec!["echo".to_owned()];
    args.extend(std::iter::repeat_n("x".repeat(100_000), 30));
    args
}

#[test]
fn arguments_too_large_to_exec_are_named_on_one_line() {
    let env = Env::new();
    let args = too_many_args();
    let bundle = env.bundle("e2big", |v| v["process"]["args"] = serde_json::json!(args));
    let b = in_bundle(&bundle);
    let id = unique_id("e2big");
    let theirs = runc(&env, &run_args(&b, "runc-e2big"));
    eprintln!(
        "runc run: exit {:?}, {:?}",
        theirs.status.code(),
        text(&theirs.stderr).trim()
    );
    let ours = env.run(&run_args(&b, &id));
    let line = text(&ours.stderr);
    eprintln!("claude-shim run: exit {:?}, {:?}", ours.status.code(), line.trim());
    // It was exit 255 and nothing at all: the init failed after `start`.
    assert!(!ours.status.success());
    assert_eq!(
        line,
        "claude-shim: error: failed to exec echo: argument list too long\n"
    );
    assert!(text(&theirs.stderr).contains("argument list too long"));
    runc_ok(&env, &["delete", "--force", "runc-e2big"]);
    env.ok(&["delete", "--force", &id]);
    env.assert_no_leaks(&id);

    // The same arguments given to `exec`: one line, not the arguments back.
    let sleeper = env.bundle("e2big-sleep", |v| set_args(v, &["sleep", "1000"]));
    let mut detached = vec!["run", "--detach"];
    let s = in_bundle(&sleeper);
    detached.extend(s.iter().map(String::as_str));
    env.ok(&[detached.clone(), vec![id.as_str()]].concat());
    runc_ok(&env, &[detached, vec!["runc-e2big"]].concat());
    let process = env.dir.path().join("e2big-process.json");
    let mut p = serde_json::from_str::<Value>(&std::fs::read_to_string(sleeper.join("config.json")).unwrap()).unwrap()
        ["process"]
        .take();
    p["args"] = serde_json::json!(args);
    std::fs::write(&process, p.to_string()).unwrap();
    let theirs = runc(&env, &["exec", "--process", process.to_str().unwrap(), "runc-e2big"]);
    eprintln!(
        "runc exec: exit {:?}, {:?}",
        theirs.status.code(),
        text(&theirs.stderr).trim()
    );
    let line = env.fails(&["exec", "--process", process.to_str().unwrap(), &id]);
    eprintln!("claude-shim exec: {line}");
    assert!(line.ends_with(": exec echo: argument list too long"), "{line}");
    assert!(line.len() < 200, "the arguments came back: {} bytes", line.len());
    runc_ok(&env, &["delete", "--force", "runc-e2big"]);
    env.ok(&["delete", "--force", &id]);
    env.assert_no_leaks(&id);
}

#[test]
fn a_seccomp_agent_that_cannot_be_reached_is_named_with_why() {
    let env = Env::new();
    let socket = env.dir.path().join("no-such-agent.sock");
    let line = both_refuse(&env, "notify", |v| {
        v["linux"]["seccomp"] = serde_json::json!({
            "defaultAction": "SCMP_ACT_ALLOW",
            "listenerPath": socket,
            "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_NOTIFY"}]
        });
    });
    // It was "failed seccomp listener"; runc's words, which its bats suite matches.
    assert!(
        line.contains(&format!("failed to connect with seccomp agent at {socket:?}")),
        "{line}"
    );
    assert!(line.contains("No such file or directory"), "{line}");
}

#[test]
fn state_racing_delete_says_the_container_does_not_exist() {
    let env = Env::new();
    let bundle = env.bundle("staterace", |v| set_args(v, &["sleep", "1000"]));
    let b = in_bundle(&bundle);
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for round in 0..10 {
        let id = format!("{}-{round}", unique_id("staterace"));
        let mut args = vec!["run", "--detach"];
        args.extend(b.iter().map(String::as_str));
        args.push(&id);
        env.ok(&args);
        // `state` in a loop on one thread while the main one deletes: every
        // failure a user sees must say the container is gone.
        std::thread::scope(|s| {
            let reader = s.spawn(|| loop {
                let out = env.run(&["state", &id]);
                if !out.status.success() {
                    return text(&out.stderr).replace(&id, "ID");
                }
            });
            env.ok(&["delete", "--force", &id]);
            *seen.entry(reader.join().unwrap()).or_default() += 1;
        });
        env.assert_no_leaks(&id);
    }
    eprintln!("what state said once delete began: {seen:?}");
    let theirs = runc(&env, &["state", "runc-never-made"]);
    eprintln!("runc state of a missing container: {:?}", text(&theirs.stderr).trim());
    for line in seen.keys() {
        assert_eq!(
            line,
            "claude-shim: error: failed to find container ID: it does not exist\n"
        );
    }
}

/// A file with its execute bit set that the kernel cannot run (ENOEXEC) is
/// refused with "exec format error", as runc refuses it; execvp(3) would
/// have run it through /bin/sh as a script.
#[test]
fn a_file_the_kernel_cannot_run_is_not_handed_to_a_shell() {
    let env = Env::new();
    let junk = env.dir.path().join("junk");
    std::fs::write(&junk, b"\x7fELF-not-really\necho ran-as-a-script\n").unwrap();
    std::fs::set_permissions(&junk, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let bundle = env.bundle("enoexec", |v| {
        set_args(v, &["/junk"]);
        v["mounts"].as_array_mut().unwrap().push(serde_json::json!({
            "destination": "/junk", "type": "bind", "source": junk.to_str().unwrap(), "options": ["rbind", "ro"]
        }));
    });
    let b = in_bundle(&bundle);
    let id = unique_id("enoexec");
    let theirs = runc(&env, &run_args(&b, "runc-enoexec"));
    let ours = env.run(&run_args(&b, &id));
    eprintln!(
        "runc: exit {:?}, {:?}; claude-shim: exit {:?}, {:?}",
        theirs.status.code(),
        text(&theirs.stderr).trim(),
        ours.status.code(),
        text(&ours.stderr).trim()
    );
    for out in [&theirs, &ours] {
        assert!(!out.status.success());
        assert!(!text(&out.stdout).contains("ran-as-a-script"), "{}", text(&out.stdout));
        assert!(text(&out.stderr).contains("exec format error"), "{}", text(&out.stderr));
    }
    let _ = runc(&env, &["delete", "--force", "runc-enoexec"]);
    let _ = env.run(&["delete", "--force", &id]);
    env.assert_no_leaks(&id);
}
