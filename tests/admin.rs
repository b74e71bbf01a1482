//! The admin policy through the real binary (standalone `run`, `create`,
//! `exec`): bundles asking for more than it allows are tightened, checked from
//! inside, or refused with the documented one-line error, leaving nothing.
//! The policy file is chosen with CLAUDE_SHIM_ADMIN_POLICY (root only), so
//! these tests never touch /etc/claude-shim.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use claude_shim_e2e::engines::{output_of, text};
use claude_shim_e2e::*;
use serde_json::{json, Value};

/// Writes an admin policy into the test's (root-owned, 0700) directory.
fn admin_policy(env: &Env, toml: &str) -> PathBuf {
    let path = env.dir.path().join("admin-policy.toml");
    std::fs::write(&path, toml).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    path
}

fn under(env: &Env, policy: &Path, args: &[&str]) -> Output {
    let mut c = env.command(args);
    c.env("CLAUDE_SHIM_ADMIN_POLICY", policy);
    output_of(c, env.dir.path())
}

/// The one error line of a refused command.
fn refused(env: &Env, policy: &Path, args: &[&str]) -> String {
    let out = under(env, policy, args);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?} should be refused: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.contains("warning:")).collect();
    assert_eq!(lines.len(), 1, "one error line: {stderr:?}");
    assert!(lines[0].starts_with("claude-shim: error: failed to "), "{}", lines[0]);
    lines[0].to_owned()
}

fn add_caps(v: &mut Value, caps: &[&str]) {
    for set in ["bounding", "effective", "permitted", "inheritable", "ambient"] {
        // The template has no inheritable or ambient set (as runc's): start one.
        let slot = &mut v["process"]["capabilities"][set];
        if slot.is_null() {
            *slot = json!([]);
        }
        let list = slot.as_array_mut().unwrap();
        for c in caps {
            list.push(json!(c));
        }
    }
}

/// runc's sample spec (`claude-shim spec`) has a network namespace; drop it.
fn drop_network_namespace(v: &mut Value) {
    v["linux"]["namespaces"]
        .as_array_mut()
        .unwrap()
        .retain(|n| n["type"] != "network");
}

/// What a process sees of its own confinement, and whether it can make a
/// user namespace (the seed's gap: `unshare -Ur` must fail with EPERM).
const PROBE: &str = "grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; \
                     unshare -Ur id 2>&1; echo unshare-exit=$?; ulimit -c; ulimit -n";

#[test]
fn cap_sys_admin_is_dropped_and_user_namespaces_fail_with_eperm() {
    let env = Env::new();
    let policy = admin_policy(&env, "version = 1\n");
    let bundle = env.bundle("caps", |v| {
        set_args(v, &["sh", "-c", PROBE]);
        add_caps(v, &["CAP_SYS_ADMIN"]);
    });
    let id = unique_id("caps");
    let out = under(&env, &policy, &["run", "--bundle", bundle.to_str().unwrap(), &id]);
    let seen = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for want in [
        "CapEff:\t0000000000000000",
        "CapBnd:\t0000000000000000",
        "NoNewPrivs:\t1",
        "Seccomp:\t2",
    ] {
        assert!(seen.contains(want), "{want} inside:\n{seen}");
    }
    assert!(
        seen.contains("Operation not permitted"),
        "unshare -Ur fails with EPERM:\n{seen}"
    );
    assert!(seen.contains("unshare-exit=1"), "{seen}");
    env.assert_no_leaks(&id);

    // The same bundle without the admin policy: a plain OCI runtime.
    let id = unique_id("caps-plain");
    let out = env.run(&["run", "--bundle", bundle.to_str().unwrap(), &id]);
    assert!(
        !text(&out.stdout).contains("CapEff:\t0000000000000000"),
        "{}",
        text(&out.stdout)
    );
    env.assert_no_leaks(&id);
}

#[test]
fn an_engine_profile_without_clone_rules_gets_the_agent_rules_too() {
    let env = Env::new();
    let policy = admin_policy(&env, "version = 1\n[identity]\ncapabilities = [\"CAP_SYS_ADMIN\"]\n");
    // Allow everything: no rule on clone, unshare or clone3.
    let bundle = env.bundle("seccomp", |v| {
        set_args(v, &["sleep", "1000"]);
        v["linux"]["seccomp"] = json!({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": []});
        add_caps(v, &["CAP_SYS_ADMIN"]);
    });
    let id = unique_id("seccomp");
    let out = under(
        &env,
        &policy,
        &["run", "--detach", "--bundle", bundle.to_str().unwrap(), &id],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    env.wait_status(&id, "running");
    // exec'd processes, even one that asks for CAP_SYS_ADMIN itself, are held
    // to the init's capabilities and to both filters.
    let process = env.dir.path().join("process.json");
    let p = json!({
        "terminal": false, "user": {"uid": 0, "gid": 0}, "cwd": "/",
        "args": ["sh", "-c", PROBE], "env": ["PATH=/bin:/usr/bin"],
        "capabilities": {"bounding": ["CAP_SYS_ADMIN", "CAP_NET_ADMIN"], "effective": ["CAP_SYS_ADMIN", "CAP_NET_ADMIN"],
                         "permitted": ["CAP_SYS_ADMIN", "CAP_NET_ADMIN"]},
    });
    std::fs::write(&process, p.to_string()).unwrap();
    let out = under(&env, &policy, &["exec", "--process", process.to_str().unwrap(), &id]);
    let seen = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        seen.contains("CapEff:\t0000000000200000"),
        "only CAP_SYS_ADMIN, the init's: {seen}"
    );
    assert!(
        seen.contains("Operation not permitted"),
        "the agent rules hold in exec:\n{seen}"
    );
    env.ok(&["delete", "--force", &id]);
    env.assert_no_leaks(&id);
}

#[test]
fn the_host_network_namespace_is_refused() {
    let env = Env::new();
    let policy = admin_policy(&env, "version = 1\n");
    // No network namespace: the host's.
    let bundle = env.bundle("hostnet", |v| {
        set_args(v, &["true"]);
        drop_network_namespace(v);
    });
    let id = unique_id("hostnet");
    let line = refused(&env, &policy, &["run", "--bundle", bundle.to_str().unwrap(), &id]);
    assert_eq!(
        line,
        format!(
            "claude-shim: error: failed to create container {id}: apply admin policy {}: the host's net namespace is forbidden (config.json asks for no net namespace of its own)",
            policy.display()
        )
    );
    env.assert_no_leaks(&id);

    // The test's own network namespace is the host's.
    let host_net = format!("/proc/{}/ns/net", std::process::id());
    let bundle = env.bundle("hostnet-path", |v| {
        set_args(v, &["true"]);
        drop_network_namespace(v);
        v["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "network", "path": host_net}));
    });
    let id = unique_id("hostnet-path");
    let line = refused(&env, &policy, &["create", "--bundle", bundle.to_str().unwrap(), &id]);
    assert!(
        line.ends_with(&format!(
            "the host's net namespace is forbidden (config.json joins {host_net})"
        )),
        "{line}"
    );
    env.assert_no_leaks(&id);
}

#[test]
fn binds_of_the_host_and_added_devices_are_refused() {
    let env = Env::new();
    let policy = admin_policy(&env, "version = 1\n");
    let cases: [(&str, Value, &str); 3] = [
        (
            "root",
            json!({"destination": "/host", "type": "bind", "source": "/", "options": ["rbind", "ro"]}),
            "bind mount of / at /host is forbidden: it is the host's root",
        ),
        (
            "run",
            json!({"destination": "/r", "type": "bind", "source": "/run", "options": ["rbind"]}),
            "bind mount of /run at /r is forbidden: it is or holds /run/claude-shim, container runtime state",
        ),
        (
            "dev",
            json!({"destination": "/d", "type": "bind", "source": "/dev", "options": ["rbind"]}),
            "bind mount of /dev at /d is forbidden: it is a device of the host",
        ),
    ];
    for (name, mount, want) in cases {
        let bundle = env.bundle(name, |v| {
            set_args(v, &["true"]);
            v["mounts"].as_array_mut().unwrap().push(mount.clone());
        });
        let id = unique_id(name);
        let line = refused(&env, &policy, &["run", "--bundle", bundle.to_str().unwrap(), &id]);
        assert!(line.ends_with(want), "{line}");
        env.assert_no_leaks(&id);
    }
    let bundle = env.bundle("device", |v| {
        set_args(v, &["true"]);
        v["linux"]["devices"] = json!([{"path": "/dev/fuse", "type": "c", "major": 10, "minor": 229}]);
    });
    let id = unique_id("device");
    let line = refused(&env, &policy, &["run", "--bundle", bundle.to_str().unwrap(), &id]);
    assert!(
        line.ends_with("device /dev/fuse is forbidden: the admin policy allows no added devices"),
        "{line}"
    );
    env.assert_no_leaks(&id);
}

#[test]
fn annotations_select_stricter_profiles_never_looser_ones() {
    let env = Env::new();
    let policy = admin_policy(&env, "version = 1\n");
    let with = |name: &str, ann: Value, args: &[&str]| {
        env.bundle(name, |v| {
            set_args(v, args);
            v["annotations"] = ann;
        })
    };
    let bundle = with("looser", json!({"run.claude-shim.network": "public"}), &["true"]);
    let id = unique_id("looser");
    let line = refused(&env, &policy, &["run", "--bundle", bundle.to_str().unwrap(), &id]);
    assert!(
        line.ends_with(
            "annotation run.claude-shim.network=\"public\" asks for network mode \"public\", more than the admin policy's \"none\""
        ),
        "{line}"
    );
    env.assert_no_leaks(&id);

    // The offline profile adds its limits (core 0, nofile 4096) on top.
    let bundle = with(
        "stricter",
        json!({"run.claude-shim.profile": "offline"}),
        &["sh", "-c", PROBE],
    );
    let id = unique_id("stricter");
    let out = under(&env, &policy, &["run", "--bundle", bundle.to_str().unwrap(), &id]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let seen = text(&out.stdout);
    let tail: Vec<&str> = seen.lines().rev().take(2).collect();
    assert_eq!(
        tail,
        ["1024", "0"],
        "core 0 of the offline profile, nofile the lower of 4096 and the spec's 1024:\n{seen}"
    );
    env.assert_no_leaks(&id);

    let bundle = with("unknown", json!({"run.claude-shim.profile": "wide-open"}), &["true"]);
    let id = unique_id("unknown");
    let line = refused(&env, &policy, &["run", "--bundle", bundle.to_str().unwrap(), &id]);
    assert!(line.contains("names no built-in profile (agent, offline)"), "{line}");
    env.assert_no_leaks(&id);
}

#[test]
fn the_admin_policy_must_be_roots_alone_and_valid() {
    let env = Env::new();
    let policy = admin_policy(&env, "version = 1\n");
    std::fs::set_permissions(&policy, std::fs::Permissions::from_mode(0o666)).unwrap();
    let bundle = env.bundle("trust", |v| {
        set_args(v, &["true"]);
    });
    let id = unique_id("trust");
    let line = refused(&env, &policy, &["run", "--bundle", bundle.to_str().unwrap(), &id]);
    assert_eq!(
        line,
        format!(
            "claude-shim: error: failed to create container {id}: use admin policy {}: it is writable by group or others (mode 666)",
            policy.display()
        )
    );
    env.assert_no_leaks(&id);

    let policy = admin_policy(&env, "version = 1\n[identity]\ncapabilities = [\"CAP_NOPE\"]\n");
    let line = refused(&env, &policy, &["run", "--bundle", bundle.to_str().unwrap(), &id]);
    assert!(
        line.contains("identity.capabilities[0]: unknown capability \"CAP_NOPE\""),
        "{line}"
    );
    let missing = env.dir.path().join("no-such-policy.toml");
    let line = refused(&env, &missing, &["run", "--bundle", bundle.to_str().unwrap(), &id]);
    assert!(
        line.contains("read admin policy"),
        "a chosen policy that is missing fails closed: {line}"
    );
    env.assert_no_leaks(&id);
}

#[test]
fn without_an_admin_policy_debug_says_plain_oci_runtime() {
    assert!(
        !Path::new("/etc/claude-shim/policy.toml").exists(),
        "this test expects no admin policy installed on the machine"
    );
    let env = Env::new();
    let bundle = env.bundle("plain", |v| set_args(v, &["true"]));
    let id = unique_id("plain");
    let out = env.run(&["--debug", "run", "--bundle", bundle.to_str().unwrap(), &id]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("no admin policy at /etc/claude-shim/policy.toml: running as a plain OCI runtime"),
        "{}",
        text(&out.stderr)
    );
    env.assert_no_leaks(&id);
}

#[test]
fn an_unprivileged_caller_cannot_choose_the_admin_policy() {
    let (uid, gid) = test_user();
    let env = Env::as_user(uid, gid);
    let bundle = env.bundle("rootless-admin", |v| set_args(v, &["true"]));
    let id = unique_id("rootless-admin");
    let missing = env.dir.path().join("no-such-policy.toml");
    let mut c = env.command(&["--debug", "run", "--bundle", bundle.to_str().unwrap(), &id]);
    c.env("CLAUDE_SHIM_ADMIN_POLICY", &missing);
    let out = output_of(c, env.dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("ignoring CLAUDE_SHIM_ADMIN_POLICY: only root may choose the admin policy"),
        "{}",
        text(&out.stderr)
    );
    env.assert_no_leaks(&id);
}
