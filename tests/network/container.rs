//! The containers the tests run in the world: a bundle in a network mode,
//! requests from inside, the helpers as state reports them, and the check that
//! nothing of a container is left.

use std::fs;
use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

use claude_shim_e2e::*;
use serde_json::{json, Value};

use crate::probes::PROBE_FN;
use crate::world::World;

pub(crate) struct Net<'a> {
    pub(crate) mode: &'a str,
    pub(crate) policy: Value,
    pub(crate) host_tools: bool,
}

/// A bundle running `script` (after PROBE_FN) in network mode `net`.
pub(crate) fn net_bundle(env: &Env, world: &World, name: &str, net: Option<&Net<'_>>, script: &str) -> PathBuf {
    let resolv = world.dir.path().join("resolv.conf");
    let script = format!("{PROBE_FN}{script}");
    env.bundle(name, |v| {
        set_args(v, &["sh", "-c", &script]);
        with_tmp(v);
        let ns = v["linux"]["namespaces"].as_array_mut().unwrap();
        if !ns.iter().any(|n| n["type"] == "network") {
            ns.push(json!({"type": "network"}));
        }
        let mounts = v["mounts"].as_array_mut().unwrap();
        mounts.push(
            json!({"destination": "/etc/resolv.conf", "type": "bind", "source": resolv, "options": ["bind", "ro"]}),
        );
        if net.is_some_and(|n| n.host_tools) {
            // curl, nft and ip of the host, run through its loader: the busybox rootfs has no libc.
            mounts.push(json!({"destination": "/usr", "type": "bind", "source": "/usr", "options": ["rbind", "ro"]}));
        }
        if let Some(net) = net {
            v["annotations"] = json!({
                "run.claude-shim.network": net.mode,
                "run.claude-shim.network.policy": net.policy.to_string(),
            });
        }
    })
}

/// Deletes a kept container even when the test fails half-way.
pub(crate) struct ForceDelete<'a>(pub(crate) &'a Env, pub(crate) String);

impl Drop for ForceDelete<'_> {
    fn drop(&mut self) {
        let _ = self.0.run(&["delete", "--force", &self.1]);
    }
}

pub(crate) fn id_of(prefix: &str) -> String {
    unique_id(prefix)
}

/// Pids of processes (pasta, helpers) whose command line names the container.
fn helper_processes(id: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        if e.file_name().to_string_lossy().parse::<u32>().is_err() {
            continue;
        }
        let cmd = fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if (cmd.contains("__network") || cmd.contains("pasta")) && cmd.contains(id) {
            out.push(format!("{} {cmd}", e.file_name().to_string_lossy()));
        }
    }
    out
}

/// `wget URL` inside a running container.
pub(crate) fn fetch(env: &Env, id: &str, url: &str) -> Output {
    env.run(&[
        "exec", id, "busybox", "timeout", "10", "busybox", "wget", "-q", "-O", "-", url,
    ])
}

pub(crate) fn fetch_ok(env: &Env, id: &str, url: &str) -> String {
    let out = fetch(env, id, url);
    assert!(
        out.status.success(),
        "wget {url} in {id}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) fn assert_all_gone(env: &Env, id: &str) {
    env.assert_no_leaks(id);
    let left = helper_processes(id);
    assert!(left.is_empty(), "helpers of {id} left running: {left:?}");
}

/// The pid a state's helpers annotation gives `name`, and whether it is marked exited.
pub(crate) fn helper_pid(state: &Value, name: &str) -> (i32, bool) {
    let text = state["annotations"]["run.claude-shim.helpers"]
        .as_str()
        .unwrap_or_else(|| panic!("no helpers in state {state}"));
    let entry = text
        .split(',')
        .find_map(|e| e.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in helpers {text:?}"));
    let exited = entry.ends_with("(exited)");
    (entry.trim_end_matches("(exited)").parse().unwrap(), exited)
}

pub(crate) fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) fn proxy_log(env: &Env, id: &str) -> Vec<Value> {
    let path = env.root.join(".claude-shim").join(id).join("proxy.log");
    fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("log line {l:?}: {e}")))
        .collect()
}
