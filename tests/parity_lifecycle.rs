//! runc parity for the lifecycle's hangs and holes (issue 25): `--no-pivot`
//! beside a second host procfs or sysfs, no /proc with additionalGids, a
//! frozen cgroup at create, a pause that cannot record itself, and a
//! container frozen while its state says running. Each runs the same bundle
//! or command under runc and claude-shim and prints both; where claude-shim
//! differs on purpose, the test says why (docs/commands.md too).
//!
//! Scratch only: every cgroup frozen here is one the test made (or its own
//! container's), every mount is in a private mount namespace of its own.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use claude_shim_e2e::oracle::*;
use claude_shim_e2e::*;
use serde_json::Value;

fn unified() -> bool {
    Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
}

/// The freezer file of cgroup `rel` and its frozen and thawed words.
fn freezer_of(rel: &str) -> (PathBuf, &'static str, &'static str) {
    let rel = rel.trim_start_matches('/');
    if unified() {
        (Path::new("/sys/fs/cgroup").join(rel).join("cgroup.freeze"), "1", "0")
    } else {
        (
            Path::new("/sys/fs/cgroup/freezer").join(rel).join("freezer.state"),
            "FROZEN",
            "THAWED",
        )
    }
}

fn freeze(rel: &str, frozen: bool) {
    let (file, on, off) = freezer_of(rel);
    fs::write(&file, if frozen { on } else { off }).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
}

/// The cgroup (freezer hierarchy on v1) of a process.
fn cgroup_of(pid: i64) -> String {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    text.lines()
        .find_map(|l| {
            let mut p = l.splitn(3, ':');
            let (_, ctl, path) = (p.next()?, p.next()?, p.next()?);
            let wanted = if unified() {
                ctl.is_empty()
            } else {
                ctl.split(',').any(|c| c == "freezer")
            };
            wanted.then(|| path.to_owned())
        })
        .unwrap()
}

/// A scratch cgroup parent of the test's own, in the freezer hierarchy (v1)
/// or the unified one; at the end everything below it is thawed and removed
/// in every hierarchy (create makes the container's path in each).
struct ScratchCgroup(String);

impl ScratchCgroup {
    fn new(name: &str) -> Self {
        let rel = format!("claude-shim-e2e-{}", unique_id(&format!("cg-{name}")));
        let (file, _, _) = freezer_of(&rel);
        fs::create_dir(file.parent().unwrap()).unwrap();
        Self(rel)
    }

    fn mkdir(&self, child: &str) -> String {
        let rel = format!("{}/{child}", self.0);
        let (file, _, _) = freezer_of(&rel);
        fs::create_dir(file.parent().unwrap()).unwrap();
        rel
    }
}

impl Drop for ScratchCgroup {
    fn drop(&mut self) {
        for h in fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
            for top in [h.path().join(&self.0), Path::new("/sys/fs/cgroup").join(&self.0)] {
                remove_tree(&top);
            }
        }
    }
}

/// Thaws and removes a scratch cgroup tree, children first.
fn remove_tree(dir: &Path) {
    if !dir.is_dir() {
        return;
    }
    for state in ["freezer.state", "cgroup.freeze"] {
        let _ = fs::write(dir.join(state), if state == "freezer.state" { "THAWED" } else { "0" });
    }
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            remove_tree(&e.path());
        }
    }
    // A process killed in it (a hung create's init) leaves a moment later.
    let deadline = Instant::now() + Duration::from_secs(5);
    while fs::remove_dir(dir).is_err() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// claude-shim failing with one line, under a generous limit: the hang this
/// guards against never returned (exit 137 is the limit's SIGKILL).
fn fails_without_hanging(env: &Env, args: &[&str]) -> String {
    let mut c = Command::new("timeout");
    c.args(["--signal=KILL", "120"])
        .arg(shim_path())
        .arg("--root")
        .arg(&env.root)
        .args(args);
    let out = output_of(c, env.dir.path());
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "claude-shim {args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    err.trim().to_owned()
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The nested-namespace probe of the --no-pivot hole: a user, mount, network
/// and pid namespace of the process's own, where the kernel lets a fresh
/// procfs or sysfs be mounted only if a full one is visible in the mount
/// namespace (mount_too_revealing).
const PROBE: &str = "mkdir -p /tmp/p /tmp/s; unshare -r -m -n -p -f sh -c \
    'mount -t proc proc /tmp/p 2>/dev/null && echo procfs-mounted || echo procfs-refused; \
     mount -t sysfs sysfs /tmp/s 2>/dev/null && echo sysfs-mounted || echo sysfs-refused'";

/// runc unmounts or covers every full procfs and sysfs before its MS_MOVE;
/// claude-shim hid only the ones at /proc and /sys, so a host with a second
/// procfs let a --no-pivot container mount a fresh, unmasked one.
#[test]
fn no_pivot_hides_every_host_procfs_and_sysfs_as_runc() {
    let env = Env::new();
    let host = env.dir.path().join("host");
    for d in ["proc2", "sys2"] {
        fs::create_dir_all(host.join(d)).unwrap();
    }
    let caps = serde_json::json!(["CAP_SYS_ADMIN", "CAP_SETFCAP"]);
    let bundle = |name: &str, masked: bool| {
        env.bundle(name, |v| {
            with_tmp(v);
            for set in ["bounding", "effective", "permitted"] {
                v["process"]["capabilities"][set] = caps.clone();
            }
            if !masked {
                // The control: the container's own procfs and sysfs whole.
                v["linux"].as_object_mut().unwrap().remove("maskedPaths");
                v["linux"].as_object_mut().unwrap().remove("readonlyPaths");
            }
            set_args(v, &["sh", "-c", PROBE]);
        })
    };
    // Both runtimes in a private mount namespace holding the second mounts.
    let in_host_ns = |runtime: &str, args: Vec<&str>| -> String {
        let mut c = Command::new("unshare");
        c.args(["-m", "--propagation", "private", "sh", "-c"])
            .arg("mount -t proc proc \"$1/proc2\" && mount -t sysfs sysfs \"$1/sys2\" && shift && exec \"$@\"")
            .arg("sh")
            .arg(&host);
        if runtime == "runc" {
            c.arg("runc").arg("--root").arg(env.dir.path().join("runc"));
        } else {
            c.arg(shim_path()).arg("--root").arg(&env.root);
        }
        c.args(args);
        let out = output_of(c, env.dir.path());
        assert!(out.status.success(), "{runtime}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    for (masked, want) in [
        (true, "procfs-refused\nsysfs-refused\n"),
        // The control, that the probe can succeed: with nothing masked the
        // container's own procfs is whole (its sysfs is read-only, so the
        // fresh rw one stays refused under both).
        (false, "procfs-mounted\nsysfs-refused\n"),
    ] {
        let b = in_bundle(&bundle(if masked { "nopivot" } else { "nopivot-control" }, masked));
        for runtime in ["claude-shim", "runc"] {
            let id = unique_id("nopivot");
            let mut args = vec!["run", "--no-pivot"];
            args.extend(b.iter().map(String::as_str));
            args.push(&id);
            let out = in_host_ns(runtime, args);
            eprintln!("{runtime}, --no-pivot, masked paths {masked}: {out:?}");
            assert_eq!(out, want, "{runtime}, masked paths {masked}");
            if runtime == "claude-shim" {
                env.assert_no_leaks(&id);
            }
        }
    }
    let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mounts.contains(host.to_str().unwrap()),
        "the second mounts stayed private"
    );
}

/// No procfs at /proc and additionalGids: the init panicked in pathrs
/// looking for /proc/thread-self after the root changed (five lines, found by
/// the fuzzer). claude-shim reads /proc/self/setgroups before and runs, as it
/// runs without /proc and no additionalGids. Differs on purpose: runc needs
/// /proc to close inherited descriptors ("open /proc/self/fd") and fails
/// either way; claude-shim closes them with close_range(2).
#[test]
fn additional_gids_without_proc_run_without_a_panic() {
    let env = Env::new();
    let bundle = env.bundle("noproc-gids", |v| {
        v["mounts"]
            .as_array_mut()
            .unwrap()
            .retain(|m| m["destination"] != "/proc");
        v["linux"].as_object_mut().unwrap().remove("maskedPaths");
        v["linux"].as_object_mut().unwrap().remove("readonlyPaths");
        v["process"]["user"]["additionalGids"] = serde_json::json!([5, 6]);
        set_args(v, &["id"]);
    });
    let b = in_bundle(&bundle);
    let id = unique_id("noproc-gids");
    let out = env.run(&run_args(&b, &id));
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    eprintln!("claude-shim: {stdout:?} {stderr:?}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout, "uid=0(root) gid=0(root) groups=5(tty),6\n");
    env.assert_no_leaks(&id);
    let theirs = runc(&env, &run_args(&b, "runc-noproc-gids"));
    eprintln!("runc: {:?}", text(&theirs.stderr));
    assert!(!theirs.status.success());
    assert!(
        text(&theirs.stderr).contains("/proc/self/fd"),
        "{}",
        text(&theirs.stderr)
    );
}

/// A cgroup frozen before create: the init stopped as it joined and create
/// never returned. runc refuses its own cgroup frozen; claude-shim does too,
/// and also a new cgroup below a frozen parent, where runc 1.1.5 still hangs
/// (its check reads the cgroup before making it): the runc half of that case
/// shows its init sitting frozen, then thaws it.
#[test]
fn a_frozen_cgroup_is_refused_at_create() {
    let env = Env::new();
    let scratch = ScratchCgroup::new("frozen");
    for runtime in ["claude-shim", "runc"] {
        let own = scratch.mkdir(&format!("own-{runtime}"));
        freeze(&own, true);
        let bundle = env.bundle(&format!("frozen-{runtime}"), |v| {
            set_args(v, &["true"]);
            v["linux"]["cgroupsPath"] = Value::String(format!("/{own}"));
        });
        let id = unique_id("frozen");
        let mut args = vec!["create"];
        let b = in_bundle(&bundle);
        args.extend(b.iter().map(String::as_str));
        args.push(&id);
        if runtime == "runc" {
            let out = runc(&env, &args);
            eprintln!("runc, its cgroup frozen: {:?}", text(&out.stderr));
            assert!(!out.status.success());
            assert!(text(&out.stderr).contains("container's cgroup unexpectedly frozen"));
        } else {
            let line = fails_without_hanging(&env, &args);
            eprintln!("claude-shim, its cgroup frozen: {line}");
            assert!(line.contains("is frozen") && line.contains("thaw it first"), "{line}");
            env.assert_no_leaks(&id);
        }
    }

    let parent = scratch.mkdir("parent");
    freeze(&parent, true);
    let bundle = env.bundle("frozen-parent", |v| {
        set_args(v, &["true"]);
        v["linux"]["cgroupsPath"] = Value::String(format!("/{parent}/c"));
    });
    let b = in_bundle(&bundle);
    let id = unique_id("frozen-parent");
    let mut args = vec!["create"];
    args.extend(b.iter().map(String::as_str));
    args.push(&id);
    let line = fails_without_hanging(&env, &args);
    eprintln!("claude-shim, a parent frozen: {line}");
    assert!(line.contains("is frozen") && line.contains("parent"), "{line}");
    env.assert_no_leaks(&id);

    let mut runc_create = Command::new("runc");
    runc_create
        .arg("--root")
        .arg(env.dir.path().join("runc"))
        .args(&args[..args.len() - 1])
        .arg("runc-frozen-parent")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = runc_create.spawn().unwrap();
    let (file, _, _) = freezer_of(&format!("{parent}/c"));
    let procs = file.with_file_name("cgroup.procs");
    wait_until("runc's init joins the frozen cgroup", || {
        fs::read_to_string(&procs).is_ok_and(|p| !p.trim().is_empty())
    });
    assert!(child.try_wait().unwrap().is_none(), "runc create returned");
    eprintln!("runc, a parent frozen: create has not returned, its init is in the frozen cgroup; thawing");
    freeze(&parent, false);
    child.wait().unwrap();
    let _ = runc(&env, &["delete", "--force", "runc-frozen-parent"]);
}

/// `sleep` detached under each runtime (claude-shim's id first); whatever a
/// failed assertion left is thawed and deleted when it goes.
struct Sleepers<'a> {
    env: &'a Env,
    ids: [String; 2],
}

impl Drop for Sleepers<'_> {
    fn drop(&mut self) {
        let env = self.env;
        for d in [
            env.root.join(&self.ids[0]),
            env.dir.path().join("runc").join(&self.ids[1]),
        ] {
            if d.exists() {
                let _ = Command::new("chattr").arg("-i").arg(d).stderr(Stdio::null()).status();
            }
        }
        for (r, id) in self.ids.iter().enumerate() {
            let out = if r == 0 {
                env.run(&["state", id])
            } else {
                runc(env, &["state", id])
            };
            if let Some(pid) = serde_json::from_slice::<Value>(&out.stdout)
                .ok()
                .and_then(|v| v["pid"].as_i64())
            {
                if pid > 0 && Path::new(&format!("/proc/{pid}")).exists() {
                    let (file, _, thawed) = freezer_of(&cgroup_of(pid));
                    let _ = fs::write(file, thawed);
                }
            }
        }
        let _ = env.run(&["delete", "--force", &self.ids[0]]);
        let _ = runc(env, &["delete", "--force", &self.ids[1]]);
    }
}

fn two_sleepers<'a>(env: &'a Env, name: &str) -> Sleepers<'a> {
    let bundle = env.bundle(name, |v| set_args(v, &["sleep", "1000"]));
    let b = in_bundle(&bundle);
    let ids = [unique_id(name), format!("runc-{}", unique_id(name))];
    let mut detached = vec!["run", "--detach"];
    detached.extend(b.iter().map(String::as_str));
    env.ok(&[detached.clone(), vec![ids[0].as_str()]].concat());
    runc_ok(env, &[detached, vec![ids[1].as_str()]].concat());
    Sleepers { env, ids }
}

fn status(env: &Env, runtime: usize, id: &str) -> String {
    let out = if runtime == 0 {
        env.ok(&["state", id])
    } else {
        runc_ok(env, &["state", id])
    };
    serde_json::from_str::<Value>(&out).unwrap()["status"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// A pause whose state write fails (here the container's state directory is
/// immutable, chattr +i): libcontainer froze the cgroup, then failed, and the
/// state said running while nothing ran. Differs on purpose: runc keeps no
/// paused status on disk, so its pause writes nothing and succeeds;
/// claude-shim records the status (libcontainer's state.json), and a pause it
/// cannot record is undone: one line, thawed, running as its state says.
#[test]
fn a_pause_that_cannot_record_itself_thaws_what_it_froze() {
    let env = Env::new();
    let sleepers = two_sleepers(&env, "pause-ro");
    let ids = &sleepers.ids;
    let dirs = [env.root.join(&ids[0]), env.dir.path().join("runc").join(&ids[1])];
    let chattr = |flag: &str, dir: &Path| {
        let out = Command::new("chattr").arg(flag).arg(dir).output().unwrap();
        assert!(
            out.status.success(),
            "chattr {flag} {}: {}",
            dir.display(),
            text(&out.stderr)
        );
    };
    for d in &dirs {
        chattr("+i", d);
    }
    let line = env.fails(&["pause", &ids[0]]);
    let theirs = runc(&env, &["pause", &ids[1]]);
    eprintln!("claude-shim pause: {line}");
    eprintln!("runc pause: exit {:?} {:?}", theirs.status.code(), text(&theirs.stderr));
    let after = [status(&env, 0, &ids[0]), status(&env, 1, &ids[1])];
    eprintln!("state after: claude-shim {}, runc {}", after[0], after[1]);
    for d in &dirs {
        chattr("-i", d);
    }
    assert!(line.contains("were thawed and it is running"), "{line}");
    let pid = env.state(&ids[0])["pid"].as_i64().unwrap();
    let (file, _, thawed) = freezer_of(&cgroup_of(pid));
    assert_eq!(fs::read_to_string(file).unwrap().trim(), thawed);
    assert_eq!(after, ["running", "paused"]);
    assert!(theirs.status.success());
    env.ok(&["delete", "--force", &ids[0]]);
    runc_ok(&env, &["delete", "--force", &ids[1]]);
    env.assert_no_leaks(&ids[0]);
}

/// A container frozen while its state says running (a pause that failed
/// before this fix, or anyone's write to the freezer): `resume` refused,
/// `kill` did nothing, `delete --force` spun 26 s and dropped the state,
/// leaving the process and its cgroups. runc reads paused off the freezer;
/// so does claude-shim now, and every verb after matches runc's.
#[test]
fn a_container_frozen_behind_its_state_is_paused_and_recovers_as_under_runc() {
    let env = Env::new();
    let sleepers = two_sleepers(&env, "frozen-behind");
    let ids = &sleepers.ids;
    let cgroups: Vec<String> = ids
        .iter()
        .enumerate()
        .map(|(r, id)| {
            let out = if r == 0 {
                env.ok(&["state", id])
            } else {
                runc_ok(&env, &["state", id])
            };
            cgroup_of(serde_json::from_str::<Value>(&out).unwrap()["pid"].as_i64().unwrap())
        })
        .collect();
    let verb = |r: usize, args: &[&str]| -> String {
        let out = if r == 0 { env.run(args) } else { runc(&env, args) };
        format!("exit {:?} {}", out.status.code(), text(&out.stderr).trim())
    };
    for (r, id) in ids.iter().enumerate() {
        let runtime = ["claude-shim", "runc"][r];
        freeze(&cgroups[r], true);
        let paused = status(&env, r, id);
        let resume = verb(r, &["resume", id]);
        let resumed = status(&env, r, id);
        freeze(&cgroups[r], true);
        let kill = verb(r, &["kill", id, "KILL"]);
        wait_until(&format!("{runtime}'s {id} stops"), || status(&env, r, id) == "stopped");
        eprintln!(
            "{runtime}: frozen -> {paused}; resume: {resume} -> {resumed}; frozen again, kill KILL: {kill} -> stopped"
        );
        assert_eq!((paused.as_str(), resumed.as_str()), ("paused", "running"), "{runtime}");
        assert!(
            resume.starts_with("exit Some(0)") && kill.starts_with("exit Some(0)"),
            "{runtime}"
        );
        let _ = verb(r, &["delete", id]);
    }
    env.assert_no_leaks(&ids[0]);

    // delete --force of a frozen one: everything goes, state and processes.
    let sleepers = two_sleepers(&env, "frozen-delete");
    let ids = &sleepers.ids;
    for (r, id) in ids.iter().enumerate() {
        let out = if r == 0 {
            env.ok(&["state", id])
        } else {
            runc_ok(&env, &["state", id])
        };
        let pid = serde_json::from_str::<Value>(&out).unwrap()["pid"].as_i64().unwrap();
        freeze(&cgroup_of(pid), true);
        let delete = verb(r, &["delete", "--force", id]);
        eprintln!("{}: frozen, delete --force: {delete}", ["claude-shim", "runc"][r]);
        assert!(delete.starts_with("exit Some(0)"), "{delete}");
        // Reaped by whoever adopted it, a moment after it died.
        wait_until(&format!("pid {pid} is gone after delete --force"), || {
            fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| s.contains(") Z "))
        });
    }
    env.assert_no_leaks(&ids[0]);
}
