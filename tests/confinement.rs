//! Nothing outside the container is touched: its cgroupsPath is cleaned and
//! confined, and `kill --all` and `delete --force` signal only its own
//! processes. Every cgroup here is a scratch one named after the test; the
//! process put into a container's cgroup from outside is this test's own.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use claude_shim_e2e::engines::wait_until;
use claude_shim_e2e::*;
use serde_json::Value;

/// A process of the test's own, outside every container.
struct Outsider(Child);

impl Outsider {
    fn start() -> Self {
        Self(Command::new("sleep").arg("1000").spawn().unwrap())
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }

    fn alive(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }

    /// Puts it into `cgroup` (a cgroupsPath) in every v1 hierarchy, as a
    /// hostile or careless neighbour could.
    fn join(&self, cgroup: &str) {
        let mut joined = 0;
        for h in hierarchies() {
            let procs = h.join(cgroup.trim_start_matches('/')).join("cgroup.procs");
            // A cpuset cgroup made without cpus takes no process; the others do.
            if procs.exists() && fs::write(&procs, self.pid().to_string()).is_ok() {
                joined += 1;
            }
        }
        assert!(joined > 0, "cgroup {cgroup} took the process in no hierarchy");
    }
}

impl Drop for Outsider {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The hierarchies a container is placed in: the v1 ones and a hybrid host's
/// cgroup2 mount beside them (or the unified root), from /proc/self/mountinfo.
fn hierarchies() -> Vec<PathBuf> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mut out: Vec<PathBuf> = mountinfo
        .lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let fs_type = post.split_whitespace().next()?;
            let mount_point = pre.split_whitespace().nth(4)?;
            let ours = mount_point.starts_with("/sys/fs/cgroup/") && !mount_point.ends_with("systemd");
            (matches!(fs_type, "cgroup" | "cgroup2") && ours).then(|| PathBuf::from(mount_point))
        })
        .collect();
    if out.is_empty() {
        out.push(PathBuf::from("/sys/fs/cgroup"));
    }
    out.sort();
    out.dedup();
    out
}

/// Removes a scratch cgroup tree (children first) in every hierarchy.
fn remove_scratch(top: &str) {
    for h in hierarchies() {
        let root = h.join(top.trim_start_matches('/'));
        let mut dirs = Vec::new();
        let mut stack = vec![root];
        while let Some(d) = stack.pop() {
            if !d.is_dir() {
                continue;
            }
            for e in fs::read_dir(&d).unwrap().flatten() {
                if e.file_type().unwrap().is_dir() {
                    stack.push(e.path());
                }
            }
            dirs.push(d);
        }
        for d in dirs.iter().rev() {
            let _ = fs::remove_dir(d);
        }
    }
}

fn exists_anywhere(cgroup: &str) -> bool {
    hierarchies()
        .iter()
        .any(|h| h.join(cgroup.trim_start_matches('/')).exists())
}

fn sleeper(env: &Env, name: &str, cgroups_path: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
    env.bundle(name, |v| {
        set_args(v, &["sleep", "1000"]);
        v["linux"]["cgroupsPath"] = Value::from(cgroups_path);
        edit(v);
    })
}

#[test]
fn a_cgroup_root_is_refused_naming_the_path() {
    let env = Env::new();
    for path in ["//", "/", "/..", "/a/../..", "."] {
        let id = unique_id("cgroot");
        // (each id is fresh, so each bundle directory is too)
        let bundle = sleeper(&env, &id, path, |_| {});
        let line = env.fails(&["create", "--bundle", bundle.to_str().unwrap(), &id]);
        assert!(
            line.contains(&format!("{path:?}")) && line.contains("cgroup root"),
            "{line}"
        );
        env.assert_no_leaks(&id);
    }
}

#[test]
fn a_climbing_path_is_cleaned_and_stays_in_cgroupfs() {
    let env = Env::new();
    let id = unique_id("cgclimb");
    let name = format!("debris-relcg-{id}");
    let raw = format!("/../../../{name}");
    let bundle = sleeper(&env, &id, &raw, |_| {});
    env.ok(&["create", "--bundle", bundle.to_str().unwrap(), &id]);
    let outside = [
        PathBuf::from("/").join(&name),
        PathBuf::from("/sys").join(&name),
        PathBuf::from("/sys/fs").join(&name),
        PathBuf::from("/sys/fs/cgroup").join(&name),
    ];
    for p in &outside {
        assert!(!p.exists(), "{} was created outside cgroupfs", p.display());
    }
    assert!(
        Path::new("/sys/fs/cgroup/pids").join(&name).is_dir() || Path::new("/sys/fs/cgroup").join(&name).is_dir(),
        "the cleaned cgroup /{name} is where the container is"
    );
    env.ok(&["delete", "--force", &id]);
    assert!(!exists_anywhere(&name), "delete removes the cgroup create made");
    env.assert_no_leaks(&id);
}

#[test]
fn a_path_outside_the_configured_parent_is_refused() {
    let env = Env::new();
    let id = unique_id("cgparent");
    let parent = format!("/debris-parent-{id}");
    for (n, raw) in [
        format!("{parent}/../escape-{id}"),
        parent.clone(),
        format!("/other-{id}/c"),
    ]
    .into_iter()
    .enumerate()
    {
        let bundle = sleeper(&env, &format!("{id}-{n}"), &raw, |_| {});
        let mut cmd = env.command(&["create", "--bundle", bundle.to_str().unwrap(), &id]);
        cmd.env("CLAUDE_SHIM_CGROUP_PARENT", &parent);
        let out = output_of(cmd, env.dir.path());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{raw}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains(&format!("{raw:?}")) && stderr.contains("not below"),
            "{stderr}"
        );
        env.assert_no_leaks(&id);
    }
    let bundle = sleeper(&env, &format!("{id}-ok"), &format!("{parent}/{id}"), |_| {});
    let mut cmd = env.command(&["create", "--bundle", bundle.to_str().unwrap(), &id]);
    cmd.env("CLAUDE_SHIM_CGROUP_PARENT", &parent);
    assert!(output_of(cmd, env.dir.path()).status.success());
    env.ok(&["delete", "--force", &id]);
    remove_scratch(&parent);
    env.assert_no_leaks(&id);
}

#[test]
fn a_cgroup_that_holds_processes_is_refused() {
    let env = Env::new();
    let id = unique_id("cgbusy");
    let cgroup = format!("/debris-busy-{id}");
    for h in hierarchies() {
        fs::create_dir_all(h.join(cgroup.trim_start_matches('/'))).unwrap();
    }
    let mut outsider = Outsider::start();
    outsider.join(&cgroup);
    let bundle = sleeper(&env, &id, &cgroup, |_| {});
    let line = env.fails(&["create", "--bundle", bundle.to_str().unwrap(), &id]);
    assert!(line.contains("already holds"), "{line}");
    assert!(outsider.alive());
    drop(outsider);
    remove_scratch(&cgroup);
    env.assert_no_leaks(&id);
}

/// The reproducer of the report: a process put into the container's cgroup
/// from outside (not in its pid namespace) survives `kill --all` and
/// `delete --force`; the container's own processes do not.
#[test]
fn an_outsider_in_the_cgroup_survives_kill_all_and_delete_force() {
    let env = Env::new();
    let id = unique_id("outsider");
    let cgroup = format!("/debris-outsider-{id}/c");
    let bundle = sleeper(&env, &id, &cgroup, |_| {});
    env.ok(&["create", "--bundle", bundle.to_str().unwrap(), &id]);
    env.ok(&["start", &id]);
    let init = env.state(&id)["pid"].as_i64().unwrap() as i32;
    let mut outsider = Outsider::start();
    outsider.join(&cgroup);
    env.ok(&["kill", "--all", &id, "KILL"]);
    wait_until(Duration::from_secs(10), "the init to end", || {
        (env.status(&id) == "stopped").then_some(())
    });
    let state = fs::read_to_string(format!("/proc/{init}/stat")).unwrap_or_default();
    assert!(state.is_empty() || state.contains(") Z"), "the init is gone: {state}");
    assert!(
        outsider.alive(),
        "kill --all signalled a process that is not the container's"
    );
    let out = env.run(&["delete", "--force", &id]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("not the container's") && stderr.contains(&outsider.pid().to_string()),
        "the cgroup left behind is named with the process in it: {stderr}"
    );
    assert!(
        outsider.alive(),
        "delete --force signalled a process that is not the container's"
    );
    assert!(
        exists_anywhere(&cgroup),
        "the cgroup still holds the outsider, so it stays"
    );
    drop(outsider);
    remove_scratch(&format!("/debris-outsider-{id}"));
    env.assert_no_leaks(&id);
}

/// Without a pid namespace and in a cgroup create did not make, the
/// container's own processes cannot be told from others but for its init:
/// only the init is signalled.
#[test]
fn without_pid_namespace_or_own_cgroup_only_the_init_is_signalled() {
    let env = Env::new();
    let id = unique_id("nopidns");
    let cgroup = format!("/debris-nopidns-{id}");
    for h in hierarchies() {
        fs::create_dir_all(h.join(cgroup.trim_start_matches('/'))).unwrap();
    }
    let bundle = sleeper(&env, &id, &cgroup, |v| {
        let ns = v["linux"]["namespaces"].as_array_mut().unwrap();
        ns.retain(|n| n["type"] != "pid");
    });
    env.ok(&["create", "--bundle", bundle.to_str().unwrap(), &id]);
    env.ok(&["start", &id]);
    let mut outsider = Outsider::start();
    outsider.join(&cgroup);
    env.ok(&["kill", "--all", &id, "TERM"]);
    env.ok(&["kill", "--all", &id, "KILL"]);
    env.wait_status(&id, "stopped");
    assert!(
        outsider.alive(),
        "kill --all signalled a process that is not the container's"
    );
    env.ok(&["delete", "--force", &id]);
    assert!(outsider.alive());
    assert!(exists_anywhere(&cgroup), "a cgroup create did not make is not removed");
    drop(outsider);
    remove_scratch(&cgroup);
    env.assert_no_leaks(&id);
}

/// With a pid namespace, `kill --all` with a catchable signal reaches every
/// process in it, not only the init.
#[test]
fn kill_all_reaches_every_process_of_the_pid_namespace() {
    let env = Env::new();
    let id = unique_id("killall");
    let cgroup = format!("/debris-killall-{id}");
    let bundle = env.bundle(&id, |v| {
        set_args(
            v,
            &["sh", "-c", "sleep 1000 & sleep 1000 & echo ready > /tmp/ready; wait"],
        );
        with_tmp(v);
        v["linux"]["cgroupsPath"] = Value::from(cgroup.as_str());
    });
    env.ok(&["create", "--bundle", bundle.to_str().unwrap(), &id]);
    env.ok(&["start", &id]);
    wait_until(Duration::from_secs(10), "the container to be ready", || {
        env.run(&["exec", &id, "cat", "/tmp/ready"])
            .status
            .success()
            .then_some(())
    });
    let before: Vec<i64> = serde_json::from_str(&env.ok(&["ps", "--format", "json", &id])).unwrap();
    assert!(before.len() >= 3, "{before:?}");
    env.ok(&["kill", "--all", &id, "TERM"]);
    wait_until(Duration::from_secs(10), "every process to take SIGTERM", || {
        before
            .iter()
            .all(|p| !Path::new(&format!("/proc/{p}/ns")).exists())
            .then_some(())
    });
    env.ok(&["delete", "--force", &id]);
    assert!(!exists_anywhere(&cgroup));
    env.assert_no_leaks(&id);
    remove_scratch(&cgroup);
}
