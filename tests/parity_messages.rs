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
