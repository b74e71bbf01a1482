//! As an unprivileged user: a container in a user namespace, run, exec'd and
//! deleted, with its cgroup under the user's delegated subtree.

use std::time::Duration;

use claude_shim_e2e::engines::wait_until;
use claude_shim_e2e::*;

#[test]
fn run_and_delete_as_an_unprivileged_user() {
    let (uid, gid) = test_user();
    let env = Env::as_user(uid, gid);
    let bundle = env.bundle("rootless", |v| {
        set_args(
            v,
            &[
                "sh",
                "-c",
                "id -u; cat /proc/self/uid_map; grep CapEff /proc/self/status; exit 6",
            ],
        );
    });
    let id = unique_id("rootless");
    let out = env.run(&["run", "--bundle", bundle.to_str().unwrap(), &id]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(6),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("0"), "root inside the user namespace: {stdout}");
    let map: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        map,
        ["0", &uid.to_string(), "1"],
        "the caller is mapped to root: {stdout}"
    );
    env.assert_no_leaks(&id);
}

#[test]
fn lifecycle_as_an_unprivileged_user() {
    let (uid, gid) = test_user();
    let env = Env::as_user(uid, gid);
    let bundle = env.bundle("rootless-life", |v| set_args(v, &["sleep", "1000"]));
    let id = unique_id("rootless-life");
    env.ok(&["create", "--bundle", bundle.to_str().unwrap(), &id]);
    assert_eq!(env.status(&id), "created");
    env.ok(&["start", &id]);
    assert_eq!(env.status(&id), "running");
    let cgroup = format!("/sys/fs/cgroup/pids/claude-shim/user-{uid}/{id}");
    assert!(
        std::path::Path::new(&cgroup).is_dir(),
        "the container's cgroup {cgroup} is in the delegated subtree"
    );
    assert_eq!(env.ok(&["exec", &id, "id", "-u"]).trim(), "0");
    env.ok(&["kill", &id, "KILL"]);
    env.wait_status(&id, "stopped");
    env.ok(&["delete", &id]);
    // The killed init's /proc entry lasts until its parent (the host's init) reaps it.
    wait_until(Duration::from_secs(5), "the container's processes to be reaped", || {
        processes_of(&id).is_empty().then_some(())
    });
    env.assert_no_leaks(&id);
}

#[test]
fn refused_without_a_delegated_cgroup() {
    // nobody has no delegated subtree: a clear refusal, not a silent loss of limits.
    let env = Env::as_user(65534, 65534);
    let bundle = env.bundle("nodelegation", |v| set_args(v, &["true"]));
    let id = unique_id("nodelegation");
    let line = env.fails(&["run", "--bundle", bundle.to_str().unwrap(), &id]);
    assert!(line.contains("delegated cgroup") && line.contains("65534"), "{line}");
    env.assert_no_leaks(&id);
}
