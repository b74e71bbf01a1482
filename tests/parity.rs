//! runc parity at the runtime's own interface (issue 12): each behaviour runs
//! the same bundle under runc and under claude-shim and compares what a caller
//! sees. Where claude-shim is stricter, the test says why.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use claude_shim_e2e::oracle::*;
use claude_shim_e2e::*;
use serde_json::Value;

/// A private copy of the test rootfs (for specs that change it or mount over it).
fn rootfs_copy(env: &Env, name: &str) -> PathBuf {
    let dir = env.dir.path().join(name);
    let out = Command::new("cp").arg("-a").arg(rootfs()).arg(&dir).output().unwrap();
    assert!(out.status.success(), "cp: {}", text(&out.stderr));
    dir
}

#[test]
fn root_cause_of_a_rootfs_refusal_is_on_the_error_line_and_in_the_json_log() {
    let env = Env::new();
    let root = rootfs_copy(&env, "rootfs-proc-link");
    fs::remove_dir(root.join("proc")).unwrap();
    std::os::unix::fs::symlink("/tmp", root.join("proc")).unwrap();
    let bundle = env.bundle("proclink", |v| {
        v["root"]["path"] = Value::String(root.to_string_lossy().into_owned());
        set_args(v, &["true"]);
    });
    let b = in_bundle(&bundle);
    let id = unique_id("proclink");
    let cause = "must be mounted on ordinary directory";
    let line = env.fails(&run_args(&b, &id));
    assert!(line.contains(cause), "the root cause is on the line: {line}");
    let theirs = runc(&env, &run_args(&b, "runc-proclink"));
    assert!(!theirs.status.success());
    assert!(text(&theirs.stderr).contains(cause), "runc: {}", text(&theirs.stderr));

    // The same chain in the --log JSON, in logrus's shape (containerd shows it).
    let log = env.dir.path().join("log.json");
    let mut args = vec!["--log", log.to_str().unwrap(), "--log-format", "json"];
    args.extend(run_args(&b, &id));
    assert_eq!(env.run(&args).status.code(), Some(1));
    let last: Value = serde_json::from_str(fs::read_to_string(&log).unwrap().lines().last().unwrap()).unwrap();
    let keys: Vec<&String> = last.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["level", "msg", "time"], "{last}");
    assert_eq!(last["level"], "error");
    let msg = last["msg"].as_str().unwrap();
    assert!(
        msg.starts_with("failed to create container") && msg.contains(cause),
        "{msg}"
    );
    env.assert_no_leaks(&id);
}

#[test]
fn errno_of_a_failed_capability_syscall_is_on_the_error_line() {
    // Both runtimes run without CAP_SYS_MODULE in their bounding set, so the
    // spec's request for it must fail in capset(2) with EPERM.
    let env = Env::new();
    let bundle = env.bundle("capset", |v| {
        for set in ["bounding", "effective", "permitted"] {
            v["process"]["capabilities"][set]
                .as_array_mut()
                .unwrap()
                .push("CAP_SYS_MODULE".into());
        }
        set_args(v, &["true"]);
    });
    let b = in_bundle(&bundle);
    let id = unique_id("capset");
    let without = |program: &Path, root: &Path, name: &str| {
        let mut c = Command::new("setpriv");
        c.args(["--bounding-set=-sys_module", "--"])
            .arg(program)
            .arg("--root")
            .arg(root)
            .args(run_args(&b, name));
        output_of(c, env.dir.path())
    };
    let ours = without(&shim_path(), &env.root, &id);
    let theirs = without(Path::new("runc"), &env.dir.path().join("runc"), "runc-capset");
    assert_eq!(ours.status.code(), Some(1));
    assert!(!theirs.status.success());
    let (ours, theirs) = (text(&ours.stderr).to_lowercase(), text(&theirs.stderr).to_lowercase());
    assert!(theirs.contains("operation not permitted"), "runc: {theirs}");
    assert!(
        ours.contains("capset") && ours.contains("operation not permitted"),
        "the call and its errno are on the line: {ours}"
    );
    assert_eq!(ours.lines().count(), 1, "{ours}");
    env.assert_no_leaks(&id);
}

#[test]
fn tmpcopyup_tmpfs_as_podman_read_only_asks() {
    let env = Env::new();
    let bundle = env.bundle("copyup", |v| {
        v["mounts"].as_array_mut().unwrap().push(serde_json::json!({
            "destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
            "options": ["rw", "rprivate", "nosuid", "nodev", "tmpcopyup"]
        }));
        set_args(v, &["sh", "-c", "ls -a /tmp; touch /tmp/x && echo writable"]);
    });
    let b = in_bundle(&bundle);
    let id = unique_id("copyup");
    let ours = env.ok(&run_args(&b, &id));
    let theirs = runc_ok(&env, &run_args(&b, "runc-copyup"));
    assert_eq!(ours, theirs);
    assert!(ours.contains("writable"), "{ours}");
    env.assert_no_leaks(&id);

    // Over a directory that holds files (the rootfs's /var, 0755, holds
    // tmp/, 1777), the files are copied up and the tmpfs takes /var's mode.
    // One deliberate difference: runc 1.1.5 makes copied directories with
    // mkdir(mode) under the umask and never chmods them, so /var/tmp comes
    // out 1755 (runc issue 3991, fixed in later runc); claude-shim keeps 1777.
    let bundle = env.bundle("copyup-full", |v| {
        v["mounts"].as_array_mut().unwrap().push(serde_json::json!({
            "destination": "/var", "type": "tmpfs", "source": "tmpfs", "options": ["tmpcopyup"]
        }));
        set_args(
            v,
            &[
                "sh",
                "-c",
                "stat -c '%A %n' /var /var/tmp; touch /var/tmp/z && echo writable",
            ],
        );
    });
    let b = in_bundle(&bundle);
    let id = unique_id("copyup-full");
    let ours = env.ok(&run_args(&b, &id));
    let theirs = runc_ok(&env, &run_args(&b, "runc-copyup-full"));
    assert_eq!(ours, "drwxr-xr-x /var\ndrwxrwxrwt /var/tmp\nwritable\n");
    assert_eq!(theirs, "drwxr-xr-x /var\ndrwxr-xr-t /var/tmp\nwritable\n");
    env.assert_no_leaks(&id);
}

#[test]
fn a_program_named_by_path_runs_without_path_in_env() {
    // ctr run --rootfs writes no PATH into the spec's env.
    let env = Env::new();
    let bundle = env.bundle("nopath", |v| {
        v["process"]["env"] = serde_json::json!(["TERM=xterm"]);
        set_args(v, &["/bin/sh", "-c", "echo by-path"]);
    });
    let b = in_bundle(&bundle);
    let id = unique_id("nopath");
    assert_eq!(env.ok(&run_args(&b, &id)), "by-path\n");
    assert_eq!(runc_ok(&env, &run_args(&b, "runc-nopath")), "by-path\n");

    // A bare name has no PATH to be found on: both fail; claude-shim says why.
    let bundle = env.bundle("nopath-bare", |v| {
        v["process"]["env"] = serde_json::json!(["TERM=xterm"]);
        set_args(v, &["sh", "-c", "echo bare"]);
    });
    let b = in_bundle(&bundle);
    let line = env.fails(&run_args(&b, &id));
    assert!(line.contains("\"sh\"") && line.contains("PATH"), "{line}");
    assert!(!runc(&env, &run_args(&b, "runc-nopath-bare")).status.success());
    env.assert_no_leaks(&id);
}

#[test]
fn exec_cap_adds_a_capability_as_runc_does() {
    let env = Env::new();
    let bundle = env.bundle("execcap", |v| set_args(v, &["sleep", "1000"]));
    let b = in_bundle(&bundle);
    let id = unique_id("execcap");
    let mut detached = vec!["run", "--detach"];
    detached.extend(b.iter().map(String::as_str));
    env.ok(&[detached.clone(), vec![id.as_str()]].concat());
    runc_ok(&env, &[detached, vec!["runc-execcap"]].concat());
    let caps = "grep Cap /proc/self/status";
    let exec = |ours: bool, extra: &[&str]| {
        let name = if ours { id.as_str() } else { "runc-execcap" };
        let mut a = vec!["exec"];
        a.extend_from_slice(extra);
        a.extend([name, "sh", "-c", caps]);
        if ours {
            env.ok(&a)
        } else {
            runc_ok(&env, &a)
        }
    };
    let ours = exec(true, &["--cap", "CAP_NET_ADMIN", "--cap", "CAP_SYS_TIME"]);
    let theirs = exec(false, &["--cap", "CAP_NET_ADMIN", "--cap", "CAP_SYS_TIME"]);
    assert_eq!(ours, theirs);
    assert_ne!(ours, exec(true, &[]), "--cap changed the sets: {ours}");
    env.ok(&["delete", "--force", &id]);
    runc_ok(&env, &["delete", "--force", "runc-execcap"]);
    env.assert_no_leaks(&id);
}

#[test]
fn hooks_receive_the_bundle_the_caller_gave() {
    let env = Env::new();
    let script = env.dir.path().join("hook.sh");
    fs::write(&script, "#!/bin/sh\ncat > \"$1\"\n").unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    for runtime in ["claude-shim", "runc"] {
        let out = env.dir.path().join(runtime);
        fs::create_dir(&out).unwrap();
        let hook = |stage: &str| serde_json::json!({"path": script, "args": ["hook.sh", out.join(stage)]});
        let bundle = env.bundle(&format!("hooks-{runtime}"), |v| {
            set_args(v, &["true"]);
            v["hooks"] = serde_json::json!({
                "prestart": [hook("prestart")], "poststart": [hook("poststart")], "poststop": [hook("poststop")]
            });
        });
        let b = in_bundle(&bundle);
        let id = unique_id("hooks");
        if runtime == "runc" {
            runc_ok(&env, &run_args(&b, &id));
        } else {
            env.ok(&run_args(&b, &id));
            env.assert_no_leaks(&id);
        }
        for stage in ["prestart", "poststart", "poststop"] {
            let state: Value = serde_json::from_str(&fs::read_to_string(out.join(stage)).unwrap()).unwrap();
            assert_eq!(
                state["bundle"].as_str(),
                bundle.to_str(),
                "{runtime}'s {stage} hook state: {state}"
            );
            assert_eq!(state["id"].as_str(), Some(id.as_str()));
        }
    }
}

#[test]
fn disable_oom_killer_reaches_memory_oom_control() {
    let env = Env::new();
    for runtime in ["claude-shim", "runc"] {
        let id = unique_id("oom");
        let cgroup = format!("/claude-shim-e2e-{id}");
        let bundle = env.bundle(&format!("oom-{runtime}"), |v| {
            set_args(v, &["sleep", "1000"]);
            v["linux"]["cgroupsPath"] = Value::String(cgroup.clone());
            v["linux"]["resources"]["memory"] = serde_json::json!({"limit": 67108864, "disableOOMKiller": true});
        });
        let mut args = vec!["create".to_owned()];
        args.extend(in_bundle(&bundle));
        args.push(id.clone());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        if runtime == "runc" {
            runc_ok(&env, &args);
        } else {
            env.ok(&args);
        }
        let control = fs::read_to_string(format!("/sys/fs/cgroup/memory{cgroup}/memory.oom_control")).unwrap();
        assert!(
            control.lines().any(|l| l == "oom_kill_disable 1"),
            "{runtime}: {control}"
        );
        if runtime == "runc" {
            runc_ok(&env, &["delete", "--force", &id]);
        } else {
            env.ok(&["delete", "--force", &id]);
            env.assert_no_leaks(&id);
        }
    }
}

#[test]
fn no_mount_namespace_with_a_cgroup_mount_runs_and_leaves_no_mounts() {
    let env = Env::new();
    for runtime in ["claude-shim", "runc"] {
        let root = rootfs_copy(&env, &format!("rootfs-nomntns-{runtime}"));
        let bundle = env.bundle(&format!("nomntns-{runtime}"), |v| {
            v["root"]["path"] = Value::String(root.to_string_lossy().into_owned());
            let ns = v["linux"]["namespaces"].as_array_mut().unwrap();
            ns.retain(|n| n["type"] != "mount");
            // runc and libcontainer refuse masked and read-only paths without one.
            v["linux"].as_object_mut().unwrap().remove("maskedPaths");
            v["linux"].as_object_mut().unwrap().remove("readonlyPaths");
            set_args(v, &["echo", "no-mount-namespace"]);
        });
        assert!(fs::read_to_string(bundle.join("config.json"))
            .unwrap()
            .contains("/sys/fs/cgroup"));
        let b = in_bundle(&bundle);
        let id = unique_id("nomntns");
        if runtime == "runc" {
            assert_eq!(runc_ok(&env, &run_args(&b, &id)), "no-mount-namespace\n");
            // runc leaves the container's mounts in the host's namespace.
            let _ = Command::new("umount").arg("-R").arg(&root).status();
        } else {
            assert_eq!(env.ok(&run_args(&b, &id)), "no-mount-namespace\n");
            let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap();
            let left: Vec<&str> = mountinfo
                .lines()
                .filter(|l| l.contains(root.to_str().unwrap()))
                .collect();
            assert!(left.is_empty(), "claude-shim removed its mounts: {left:#?}");
            env.assert_no_leaks(&id);
        }
    }
}

#[test]
fn pid_file_is_whole_when_create_returns() {
    let env = Env::new();
    let bundle = env.bundle("pidfile", |v| set_args(v, &["sleep", "1000"]));
    let piddir = env.dir.path().join("pids");
    fs::create_dir(&piddir).unwrap();
    for runtime in ["claude-shim", "runc"] {
        let id = unique_id("pidfile");
        // A relative path is the caller's working directory's, as in runc.
        let rel = format!("pids/{runtime}.pid");
        let mut args = vec!["create".to_owned(), "--pid-file".into(), rel.clone()];
        args.extend(in_bundle(&bundle));
        args.push(id.clone());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut c = if runtime == "runc" {
            let mut c = Command::new("runc");
            c.arg("--root").arg(env.dir.path().join("runc")).args(&args);
            c
        } else {
            env.command(&args)
        };
        c.current_dir(env.dir.path());
        let out = output_of(c, env.dir.path());
        assert!(out.status.success(), "{runtime}: {}", text(&out.stderr));
        let pid = if runtime == "runc" {
            let state: Value = serde_json::from_str(&runc_ok(&env, &["state", &id])).unwrap();
            state["pid"].as_i64().unwrap()
        } else {
            env.state(&id)["pid"].as_i64().unwrap()
        };
        assert_eq!(
            fs::read_to_string(env.dir.path().join(&rel)).unwrap(),
            pid.to_string(),
            "{runtime}"
        );
        if runtime == "runc" {
            runc_ok(&env, &["delete", "--force", &id]);
        } else {
            env.ok(&["delete", "--force", &id]);
            env.assert_no_leaks(&id);
        }
    }
    let mut names: Vec<String> = fs::read_dir(&piddir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["claude-shim.pid", "runc.pid"], "no temporary file is left");

    // A pid file that cannot be written is an error, not a warning.
    let id = unique_id("pidfile-bad");
    let mut args = vec!["create", "--pid-file", "/nonexistent-parity-dir/x.pid"];
    let b = in_bundle(&bundle);
    args.extend(b.iter().map(String::as_str));
    args.push(&id);
    let line = env.fails(&args);
    assert!(line.contains("pid file"), "{line}");
    env.assert_no_leaks(&id);
}

#[test]
fn start_returns_once_the_program_runs() {
    // Stricter than runc, whose start returns while its init may still be
    // runc code: a signal sent then can be lost. claude-shim's start returns
    // once the init has executed the container's program.
    let env = Env::new();
    let bundle = env.bundle("started", |v| set_args(v, &["sleep", "1000"]));
    let b = in_bundle(&bundle);
    for _ in 0..10 {
        let id = unique_id("started");
        let mut create = vec!["create"];
        create.extend(b.iter().map(String::as_str));
        create.push(&id);
        env.ok(&create);
        let pid = env.state(&id)["pid"].as_i64().unwrap();
        env.ok(&["start", &id]);
        let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
        assert_eq!(comm.trim(), "sleep", "when start returned the init was {comm:?}");
        env.ok(&["delete", "--force", &id]);
        env.assert_no_leaks(&id);
    }
}

/// On cgroup v1 a new devices cgroup inherits its parent's list (at the
/// root: every device). runc starts each container from deny-all whatever
/// the rules say; so must claude-shim, or `"devices": []` (or no list at all)
/// opens every device node the container can reach.
#[test]
fn device_rules_start_from_deny_all_as_under_runc() {
    use std::os::unix::fs::FileTypeExt;
    let env = Env::new();
    let nodes = env.dir.path().join("nodes");
    fs::create_dir(&nodes).unwrap();
    for (name, minor) in [("kmsg", 11), ("null", 3)] {
        let path = nodes.join(name);
        let dev = nix::sys::stat::makedev(1, minor);
        let mode = nix::sys::stat::Mode::from_bits_truncate(0o666);
        nix::sys::stat::mknod(&path, nix::sys::stat::SFlag::S_IFCHR, mode, dev).unwrap();
        assert!(fs::metadata(&path).unwrap().file_type().is_char_device());
    }
    let probe =
        "for n in kmsg null; do if ( : > /nodes/$n ) 2>/dev/null; then echo $n:open; else echo $n:denied; fi; done";
    for (case, rules) in [("empty", Some(serde_json::json!([]))), ("absent", None)] {
        let mut seen = Vec::new();
        for runtime in ["claude-shim", "runc"] {
            let id = unique_id(&format!("dev-{case}"));
            let bundle = env.bundle(&format!("dev-{case}-{runtime}"), |v| {
                set_args(v, &["sh", "-c", probe]);
                v["mounts"].as_array_mut().unwrap().push(serde_json::json!({
                    "destination": "/nodes", "type": "bind", "source": nodes, "options": ["bind"]
                }));
                match &rules {
                    Some(r) => v["linux"]["resources"]["devices"] = r.clone(),
                    None => {
                        if let Some(res) = v["linux"]["resources"].as_object_mut() {
                            res.remove("devices");
                        }
                    }
                }
            });
            let b = in_bundle(&bundle);
            let args = run_args(&b, &id);
            let out = if runtime == "runc" {
                runc_ok(&env, &args)
            } else {
                let out = env.ok(&args);
                env.assert_no_leaks(&id);
                out
            };
            seen.push(out.split_whitespace().collect::<Vec<_>>().join(" "));
        }
        assert_eq!(seen[0], "kmsg:denied null:open", "claude-shim, devices {case}");
        assert_eq!(seen[0], seen[1], "devices {case}: claude-shim, then runc");
    }
}

/// uid_t -1 (4294967295) is "leave unchanged" to setuid: the process would
/// keep the runtime's root. runc refuses every id past 2147483647; so does
/// claude-shim, naming the field, in `run` and in `exec --user`.
#[test]
fn ids_past_2147483647_are_refused_as_under_runc() {
    let env = Env::new();
    for (field, value) in [("uid", 4294967295u64), ("gid", 4294967295), ("uid", 2147483648)] {
        let bundle = env.bundle(&format!("id-{field}-{value}"), |v| {
            v["process"]["user"][field] = serde_json::json!(value);
            set_args(v, &["id", "-u"]);
        });
        let b = in_bundle(&bundle);
        let id = unique_id("idrange");
        let line = env.fails(&run_args(&b, &id));
        eprintln!("claude-shim, {field} {value}: {line}");
        assert!(
            line.contains(&format!("process.user.{field}: {value} is out of range")),
            "{line}"
        );
        env.assert_no_leaks(&id);
        let theirs = runc(&env, &run_args(&b, &format!("runc-{id}")));
        eprintln!("runc, {field} {value}: {}", text(&theirs.stderr).trim());
        assert!(!theirs.status.success(), "runc ran it: {}", text(&theirs.stdout));
        assert!(
            text(&theirs.stderr).contains("must be in range"),
            "{}",
            text(&theirs.stderr)
        );
    }
    // exec --user with the same id.
    let bundle = env.bundle("idrange-exec", |v| set_args(v, &["sleep", "1000"]));
    let b = in_bundle(&bundle);
    let id = unique_id("idrange-exec");
    let mut detached = vec!["run", "--detach"];
    detached.extend(b.iter().map(String::as_str));
    env.ok(&[detached, vec![id.as_str()]].concat());
    let line = env.fails(&["exec", "--user", "4294967295", &id, "id", "-u"]);
    eprintln!("claude-shim exec --user 4294967295: {line}");
    assert!(line.contains("process.user.uid: 4294967295 is out of range"), "{line}");
    env.ok(&["delete", "--force", &id]);
    env.assert_no_leaks(&id);
}

/// `spec` writes a template whose containers hold no inheritable or ambient
/// capability, as runc's since CVE-2022-29162: each template, run by its
/// own runtime, shows the same CapInh and CapAmb.
#[test]
fn the_spec_template_passes_no_capability_on_as_runcs() {
    let env = Env::new();
    let caps = |runtime: &str| -> String {
        let dir = env.dir.path().join(format!("spec-{runtime}"));
        fs::create_dir(&dir).unwrap();
        let out = if runtime == "runc" {
            let mut c = Command::new("runc");
            c.args(["spec", "--bundle"]).arg(&dir);
            c.output().unwrap()
        } else {
            env.run(&["spec", "--bundle", dir.to_str().unwrap()])
        };
        assert!(out.status.success(), "{runtime} spec: {}", text(&out.stderr));
        let path = dir.join("config.json");
        let mut v: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        assert!(
            v["process"]["capabilities"].get("inheritable").is_none(),
            "{runtime}: {}",
            v["process"]
        );
        v["root"]["path"] = serde_json::json!(rootfs());
        v["process"]["terminal"] = serde_json::json!(false);
        set_args(&mut v, &["grep", "-E", "^Cap(Inh|Amb)", "/proc/self/status"]);
        fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
        let b = in_bundle(&dir);
        let id = unique_id(&format!("spec-{runtime}"));
        if runtime == "runc" {
            runc_ok(&env, &run_args(&b, &id))
        } else {
            env.ok(&run_args(&b, &id))
        }
    };
    let ours = caps("claude-shim");
    let theirs = caps("runc");
    eprintln!("claude-shim's template:\n{ours}runc's template:\n{theirs}");
    assert_eq!(ours, "CapInh:\t0000000000000000\nCapAmb:\t0000000000000000\n");
    assert_eq!(ours, theirs);
}
