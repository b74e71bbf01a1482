//! The network helpers (proxy, pasta, watcher) over a container's life: the
//! create/start path engines drive, and a helper killed under a running container.

use std::fs;
use std::path::Path;

use claude_shim_e2e::*;
use serde_json::json;

use crate::container::{assert_all_gone, fetch, fetch_ok, helper_pid, id_of, net_bundle, wait_until, Net};
use crate::world::{sh, World};

#[test]
fn create_start_path_as_engines_drive_it() {
    let world = World::new();
    let env = Env::new();
    let net = Net {
        mode: "allowlist",
        policy: json!({"allow": ["pub.test"]}),
        host_tools: false,
    };
    let bundle = net_bundle(&env, &world, "engine", Some(&net), "sleep 1000\n");
    let id = id_of("engine");
    world.ok(&env, &["create", "--bundle", bundle.to_str().unwrap(), &id]);
    let state = env.state(&id);
    assert_eq!(state["status"], "created");
    let (proxy, exited) = helper_pid(&state, "proxy");
    assert!(!exited && proxy > 0, "{state}");
    let (watch, exited) = helper_pid(&state, "watch");
    assert!(!exited && watch > 0, "{state}");
    let log = state["annotations"]["run.claude-shim.proxy.log"].as_str().unwrap();
    assert!(Path::new(log).is_file(), "state names the proxy log {log}");
    env.ok(&["start", &id]);
    let out = fetch_ok(&env, &id, "http://pub.test/");
    assert!(out.contains("hello-pub"), "{out}");
    let denied = fetch(&env, &id, "http://wild.test/");
    assert!(!denied.status.success());
    env.ok(&["kill", &id, "KILL"]);
    env.wait_status(&id, "stopped");
    // The helpers end with the container's init, before any delete.
    wait_until("the helpers exit with the init", || {
        let s = env.state(&id);
        helper_pid(&s, "proxy").1 && helper_pid(&s, "watch").1
    });
    let events = fs::read_to_string(env.root.join(".claude-shim").join(&id).join("network.log")).unwrap();
    assert!(events.contains("the container's init exited"), "{events}");
    env.ok(&["delete", &id]);
    assert_all_gone(&env, &id);
}

#[test]
fn killing_pasta_leaves_no_egress_and_state_says_so() {
    let world = World::new();
    let env = Env::new();
    let net = Net {
        mode: "public",
        policy: json!({}),
        host_tools: false,
    };
    let bundle = net_bundle(&env, &world, "killpasta", Some(&net), "sleep 1000\n");
    let id = id_of("killpasta");
    world.ok(&env, &["run", "--detach", "--bundle", bundle.to_str().unwrap(), &id]);
    let reach = || fetch(&env, &id, "http://198.20.123.2/");
    let before = reach();
    assert!(
        String::from_utf8_lossy(&before.stdout).contains("hello-pub"),
        "reachable before"
    );
    let (pasta, _) = helper_pid(&env.state(&id), "pasta");
    sh(&["kill", "-KILL", &pasta.to_string()]);
    wait_until("state reports pasta exited", || helper_pid(&env.state(&id), "pasta").1);
    let after = reach();
    assert!(
        !after.status.success() && !String::from_utf8_lossy(&after.stdout).contains("hello-"),
        "no egress once pasta is gone: {after:?}"
    );
    let links = env.ok(&["exec", &id, "busybox", "ip", "-o", "link"]);
    assert!(!links.contains("eth0"), "the tap went with pasta: {links}");
    wait_until("the watcher logs pasta's death", || {
        fs::read_to_string(env.root.join(".claude-shim").join(&id).join("network.log"))
            .unwrap_or_default()
            .contains("pasta exited while the container runs")
    });
    // pasta's daemon is the watch's child: how it ended is known, not guessed.
    let events = fs::read_to_string(env.root.join(".claude-shim").join(&id).join("network.log")).unwrap();
    assert!(events.contains("SIGKILL"), "{events}");
    env.ok(&["delete", "--force", &id]);
    assert_all_gone(&env, &id);
}

#[test]
fn killing_the_proxy_leaves_no_egress_and_state_says_so() {
    let world = World::new();
    let env = Env::new();
    let net = Net {
        mode: "allowlist",
        policy: json!({"allow": ["pub.test"]}),
        host_tools: false,
    };
    let bundle = net_bundle(&env, &world, "killproxy", Some(&net), "sleep 1000\n");
    let id = id_of("killproxy");
    world.ok(&env, &["run", "--detach", "--bundle", bundle.to_str().unwrap(), &id]);
    let reach = || fetch(&env, &id, "http://pub.test/");
    assert!(String::from_utf8_lossy(&reach().stdout).contains("hello-pub"));
    let (proxy, _) = helper_pid(&env.state(&id), "proxy");
    sh(&["kill", "-KILL", &proxy.to_string()]);
    wait_until("state reports the proxy exited", || {
        helper_pid(&env.state(&id), "proxy").1
    });
    let after = reach();
    assert!(!after.status.success(), "no egress once the proxy is gone");
    assert!(
        String::from_utf8_lossy(&after.stderr).contains("refused"),
        "nothing listens any more: {}",
        String::from_utf8_lossy(&after.stderr)
    );
    let direct = env.run(&[
        "exec",
        &id,
        "busybox",
        "timeout",
        "10",
        "busybox",
        "nc",
        "-w",
        "3",
        "198.20.123.2",
        "80",
    ]);
    assert!(!direct.status.success(), "and no direct way either");
    wait_until("the watcher logs the proxy's death", || {
        fs::read_to_string(env.root.join(".claude-shim").join(&id).join("network.log"))
            .unwrap_or_default()
            .contains("proxy exited while the container runs")
    });
    env.ok(&["delete", "--force", &id]);
    assert_all_gone(&env, &id);
}
