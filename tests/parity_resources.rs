//! runc parity for bundles at the edges (issue 25): `resources.unified` on
//! cgroup v1, `exec --cgroup`, a rootfs without a /dev mount run twice, a
//! capability name the runtime does not know, the cgroup2 hierarchy of a
//! hybrid host, and the mode of a tmpfs over an image's directory. Each runs
//! the same bundle under runc and claude-shim and prints what both did.

use std::fs;
use std::path::PathBuf;
use std::process::Command;

use claude_shim_e2e::oracle::*;
use claude_shim_e2e::*;
use serde_json::Value;

fn unified_only() -> bool {
    std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
}

fn show(who: &str, out: &std::process::Output) {
    eprintln!(
        "{who}: exit {:?}, stdout {:?}, stderr {:?}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    );
}

#[test]
fn resources_unified_is_refused_on_cgroup_v1_as_runc_refuses_it() {
    let env = Env::new();
    let bundle = env.bundle("unified", |v| {
        v["linux"]["resources"]["unified"] = serde_json::json!({"pids.max": "100"});
        set_args(v, &["true"]);
    });
    let b = in_bundle(&bundle);
    let id = unique_id("unified");
    let ours = env.run(&run_args(&b, &id));
    let theirs = runc(&env, &run_args(&b, "runc-unified"));
    show("claude-shim", &ours);
    show("runc", &theirs);
    if unified_only() {
        assert!(ours.status.success() && theirs.status.success());
    } else {
        // libcgroups' v1 manager skipped the files without a word.
        let line = env.fails(&run_args(&b, &id));
        assert!(line.contains("linux.resources.unified sets pids.max"), "{line}");
        assert!(!theirs.status.success());
        assert!(text(&theirs.stderr).contains("cannot use unified on cgroup v1"));
    }
    env.assert_no_leaks(&id);
}

/// The directories of a process's cgroup below each hierarchy's root, as
/// /proc/PID/cgroup names them (never a hierarchy's root itself).
fn cgroup_dirs(pid: i64) -> Vec<PathBuf> {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    text.lines()
        .filter_map(|l| {
            let mut p = l.splitn(3, ':');
            let (_, ctls, path) = (p.next()?, p.next()?, p.next()?);
            if path == "/" {
                return None;
            }
            let mount = match ctls {
                "" if unified_only() => String::new(),
                "" => "unified".to_owned(),
                named if named.starts_with("name=") => named.trim_start_matches("name=").to_owned(),
                ctls => ctls.split(',').next().unwrap().to_owned(),
            };
            Some(
                PathBuf::from("/sys/fs/cgroup")
                    .join(mount)
                    .join(path.trim_start_matches('/')),
            )
        })
        .collect()
}

#[test]
fn exec_cgroup_joins_an_existing_sub_cgroup_and_refuses_a_missing_one() {
    let env = Env::new();
    let bundle = env.bundle("execcg", |v| set_args(v, &["sleep", "1000"]));
    let b = in_bundle(&bundle);
    let id = unique_id("execcg");
    let mut detached = vec!["run", "--detach"];
    detached.extend(b.iter().map(String::as_str));
    env.ok(&[detached.clone(), vec![id.as_str()]].concat());
    runc_ok(&env, &[detached, vec!["runc-execcg"]].concat());

    // A sub-cgroup that does not exist: both refuse (runc would not make it).
    let ours = env.run(&["exec", "--cgroup", "missing", &id, "true"]);
    let theirs = runc(&env, &["exec", "--cgroup", "missing", "runc-execcg", "true"]);
    show("claude-shim", &ours);
    show("runc", &theirs);
    assert_eq!(ours.status.code(), Some(255));
    assert_eq!(theirs.status.code(), Some(255));
    let line = env.fails(&["exec", "--cgroup", "missing", &id, "true"]);
    assert!(line.contains("missing") && line.contains("does not exist"), "{line}");

    // One made in every hierarchy of each container: both put the process there.
    let mut seen = vec![];
    for (name, state) in [
        (id.as_str(), env.state(&id)),
        ("runc-execcg", {
            serde_json::from_str::<Value>(&runc_ok(&env, &["state", "runc-execcg"])).unwrap()
        }),
    ] {
        for dir in cgroup_dirs(state["pid"].as_i64().unwrap()) {
            fs::create_dir(dir.join("sub")).unwrap();
            // A v1 cpuset cgroup takes no process before it has cpus and mems.
            for file in ["cpuset.cpus", "cpuset.mems"] {
                if let Ok(v) = fs::read_to_string(dir.join(file)) {
                    fs::write(dir.join("sub").join(file), v.trim()).unwrap();
                }
            }
        }
        let cmd = [
            "exec",
            "--cgroup",
            "sub",
            name,
            "sh",
            "-c",
            "grep -c '/sub$' /proc/self/cgroup",
        ];
        seen.push(if name == id { env.ok(&cmd) } else { runc_ok(&env, &cmd) });
    }
    eprintln!(
        "hierarchies holding the exec'd process in sub: claude-shim {:?}, runc {:?}",
        seen[0], seen[1]
    );
    assert_ne!(seen[0].trim(), "0");
    // delete removes the sub-cgroup with the container's own, as runc does.
    env.ok(&["delete", "--force", &id]);
    runc_ok(&env, &["delete", "--force", "runc-execcg"]);
    env.assert_no_leaks(&id);
}

#[test]
fn a_rootfs_without_a_dev_mount_runs_twice() {
    let env = Env::new();
    let mut seen = vec![];
    for runtime in ["claude-shim", "runc"] {
        // Each runtime on a writable copy of its own: the /dev nodes and
        // links land in the rootfs, and the second run finds them there.
        let root = env.dir.path().join(format!("rootfs-{runtime}"));
        let out = Command::new("cp").arg("-a").arg(rootfs()).arg(&root).output().unwrap();
        assert!(out.status.success(), "cp: {}", text(&out.stderr));
        let bundle = env.bundle(&format!("nodev-{runtime}"), |v| {
            v["root"] = serde_json::json!({"path": root, "readonly": false});
            let mounts = v["mounts"].as_array_mut().unwrap();
            mounts.retain(|m| !m["destination"].as_str().unwrap().starts_with("/dev"));
            set_args(v, &["sh", "-c", "ls /dev; echo > /dev/null && echo written"]);
        });
        let b = in_bundle(&bundle);
        for round in 0..2 {
            let id = format!("{}-{round}", unique_id("nodev"));
            let out = if runtime == "runc" {
                runc_ok(&env, &run_args(&b, &id))
            } else {
                let out = env.ok(&run_args(&b, &id));
                env.assert_no_leaks(&id);
                out
            };
            eprintln!("{runtime} run {round}: {out:?}");
            seen.push(out);
        }
    }
    assert!(seen[0].ends_with("written\n"), "{}", seen[0]);
    assert_eq!(seen[0], seen[1], "claude-shim's second run");
    assert_eq!(seen[2], seen[3], "runc's second run");
}

#[test]
fn an_unknown_capability_name_is_ignored_with_a_warning_as_runc_does() {
    let env = Env::new();
    let bundle = env.bundle("capname", |v| {
        for set in ["bounding", "effective", "permitted"] {
            v["process"]["capabilities"][set]
                .as_array_mut()
                .unwrap()
                .push("CAP_NO_SUCH_THING".into());
        }
        set_args(v, &["grep", "Cap[EBP]", "/proc/self/status"]);
    });
    let b = in_bundle(&bundle);
    let id = unique_id("capname");
    let ours = env.run(&run_args(&b, &id));
    let theirs = runc(&env, &run_args(&b, "runc-capname"));
    show("claude-shim", &ours);
    show("runc", &theirs);
    assert!(ours.status.success() && theirs.status.success());
    assert_eq!(
        text(&ours.stdout),
        text(&theirs.stdout),
        "the known ones are granted alike"
    );
    let warning = text(&ours.stderr);
    assert!(
        warning.contains("warning") && warning.contains("CAP_NO_SUCH_THING"),
        "{warning}"
    );
    env.assert_no_leaks(&id);
}

#[test]
fn poststop_hooks_after_a_failing_one_still_run() {
    // The runtime spec: "If any poststop hook fails, the runtime MUST log a
    // warning, but the remaining hooks and lifecycle continue".
    let env = Env::new();
    let mut ran = vec![];
    for runtime in ["claude-shim", "runc"] {
        let marker = env.dir.path().join(format!("poststop-{runtime}"));
        let bundle = env.bundle(&format!("poststop-{runtime}"), |v| {
            v["hooks"] = serde_json::json!({"poststop": [
                {"path": "/bin/false"},
                {"path": "/bin/sh", "args": ["sh", "-c", format!("echo ran > {}", marker.display())]}
            ]});
            set_args(v, &["true"]);
        });
        let b = in_bundle(&bundle);
        let id = format!("{}-{runtime}", unique_id("poststop"));
        let out = if runtime == "runc" {
            runc(&env, &run_args(&b, &id))
        } else {
            env.run(&run_args(&b, &id))
        };
        show(runtime, &out);
        if runtime == "claude-shim" {
            assert!(out.status.success());
            assert!(text(&out.stderr).contains("/bin/false"), "the warning names the hook");
            env.assert_no_leaks(&id);
        }
        ran.push(marker.exists());
    }
    eprintln!("second poststop hook ran: claude-shim {}, runc {}", ran[0], ran[1]);
    assert!(ran[0], "claude-shim skipped the hook after the failing one");
    // A deliberate difference: runc 1.1.5 stops at the failing hook (seen
    // here: the second did not run), against the spec claude-shim follows.
    assert!(
        !ran[1],
        "runc now runs the rest too: drop this difference from docs/commands.md"
    );
}

#[test]
fn ro_on_the_dev_tmpfs_makes_it_read_only_and_seven_id_ranges_map() {
    let env = Env::new();
    let bundle = env.bundle("devro", |v| {
        let dev = v["mounts"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|m| m["destination"] == "/dev")
            .unwrap();
        dev["options"].as_array_mut().unwrap().push("ro".into());
        set_args(
            v,
            &[
                "sh",
                "-c",
                "grep ' /dev ' /proc/mounts | cut -d' ' -f4 | cut -d, -f1-2; touch /dev/x 2>/dev/null || echo refused; echo > /dev/null && echo nodes",
            ],
        );
    });
    let b = in_bundle(&bundle);
    let id = unique_id("devro");
    let ours = env.ok(&run_args(&b, &id));
    let theirs = runc_ok(&env, &run_args(&b, "runc-devro"));
    eprintln!("/dev with ro: claude-shim {ours:?}, runc {theirs:?}");
    assert_eq!(ours, "ro,nosuid\nrefused\nnodes\n");
    assert_eq!(ours, theirs);
    env.assert_no_leaks(&id);

    // Seven uid ranges (the kernel takes up to 340 lines, written at once).
    let bundle = env.bundle("idranges", |v| {
        v["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"type": "user"}));
        v["linux"]["uidMappings"] = (0..7)
            .map(|i| serde_json::json!({"containerID": i * 1000, "hostID": 100000 + i * 1000, "size": 1000}))
            .collect();
        v["linux"]["gidMappings"] = serde_json::json!([{"containerID": 0, "hostID": 100000, "size": 65536}]);
        set_args(v, &["cat", "/proc/self/uid_map"]);
    });
    let b = in_bundle(&bundle);
    let id = unique_id("idranges");
    let ours = env.ok(&run_args(&b, &id));
    let theirs = runc_ok(&env, &run_args(&b, "runc-idranges"));
    eprintln!("uid_map: claude-shim {ours:?}, runc {theirs:?}");
    assert_eq!(ours.lines().count(), 7, "{ours}");
    assert_eq!(ours, theirs);
    env.assert_no_leaks(&id);
}

/// The `0::` line of /proc/PID/cgroup (the cgroup2 hierarchy), as the host sees it.
fn unified_line(pid: i64) -> String {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    text.lines()
        .find(|l| l.starts_with("0::"))
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_hybrid_hosts_cgroup2_hierarchy_holds_the_container_as_under_runc() {
    let unified = std::path::Path::new("/sys/fs/cgroup/unified");
    if unified_only() || !unified.join("cgroup.procs").exists() {
        // Nothing to place beside the v1 hierarchies (the CI host is hybrid).
        eprintln!("not a hybrid cgroup host: nothing to compare");
        return;
    }
    let env = Env::new();
    let id = unique_id("hybrid");
    let mut seen = vec![];
    for (runtime, name) in [("claude-shim", id.clone()), ("runc", format!("runc-{id}"))] {
        let bundle = env.bundle(&format!("hybrid-{runtime}"), |v| {
            v["linux"]["cgroupsPath"] = format!("/{name}").into();
            set_args(v, &["sleep", "1000"]);
        });
        let mut args = vec!["run", "--detach"];
        let b = in_bundle(&bundle);
        args.extend(b.iter().map(String::as_str));
        args.push(&name);
        let mut exec = vec!["exec", "--detach", &name, "sleep", "1000"];
        let state = if runtime == "runc" {
            runc_ok(&env, &args);
            runc_ok(&env, &exec);
            serde_json::from_str::<Value>(&runc_ok(&env, &["state", &name])).unwrap()
        } else {
            env.ok(&args);
            env.ok(&exec);
            env.state(&name)
        };
        let dir = unified.join(&name);
        let line = unified_line(state["pid"].as_i64().unwrap());
        let members = procs_in(&dir);
        exec = vec!["delete", "--force", &name];
        if runtime == "runc" {
            runc_ok(&env, &exec);
        } else {
            env.ok(&exec);
        }
        let left = dir.exists();
        eprintln!(
            "{runtime}: init {line:?}, {members} process(es) in {}, left after delete: {left}",
            dir.display()
        );
        seen.push((line.replace(&name, "ID"), members, left));
    }
    // The init and the exec'd process, at the cgroupsPath; removed at delete.
    assert_eq!(seen[0], ("0::/ID".to_owned(), 2, false));
    assert_eq!(seen[0], seen[1]);
    env.assert_no_leaks(&id);
}

fn procs_in(dir: &std::path::Path) -> usize {
    fs::read_to_string(dir.join("cgroup.procs")).map_or(0, |t| t.lines().count())
}

/// A tmpfs mounted over a directory of the image takes that directory's mode,
/// as runc chmods the new tmpfs to it; an explicit `mode=` option is kept,
/// where runc 1.1.5 overrides it too.
#[test]
fn a_tmpfs_over_a_directory_takes_its_mode_as_under_runc() {
    let env = Env::new();
    let rootfs = env.dir.path().join("tmpfs-mode-rootfs");
    let out = std::process::Command::new("cp")
        .arg("-a")
        .arg(claude_shim_e2e::rootfs())
        .arg(&rootfs)
        .output()
        .unwrap();
    assert!(out.status.success(), "cp: {}", String::from_utf8_lossy(&out.stderr));
    for (d, mode) in [("cache", 0o700), ("spool", 0o1777), ("given", 0o700)] {
        let p = rootfs.join(d);
        std::fs::create_dir_all(&p).unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();
    }
    let bundle = env.bundle("tmpfsmode", |v| {
        v["root"]["path"] = rootfs.to_str().unwrap().into();
        let mounts = v["mounts"].as_array_mut().unwrap();
        for (d, opts) in [
            ("/cache", vec!["nosuid"]),
            ("/spool", vec!["nosuid"]),
            ("/given", vec!["nosuid", "mode=755"]),
        ] {
            mounts.push(serde_json::json!({"destination": d, "type": "tmpfs", "source": "tmpfs", "options": opts}));
        }
        set_args(v, &["stat", "-c", "%a %n", "/cache", "/spool", "/given"]);
    });
    let b = in_bundle(&bundle);
    let id = unique_id("tmpfsmode");
    let ours = env.ok(&run_args(&b, &id));
    let theirs = runc_ok(&env, &run_args(&b, "runc-tmpfsmode"));
    eprintln!("tmpfs modes: claude-shim {ours:?}, runc {theirs:?}");
    // runc 1.1.5 chmods the tmpfs to the directory's mode even over an
    // explicit `mode=`; claude-shim keeps what the bundle asked for
    // (docs/commands.md).
    assert_eq!(theirs, "700 /cache\n1777 /spool\n700 /given\n", "runc, the oracle");
    assert_eq!(ours, "700 /cache\n1777 /spool\n755 /given\n");
    env.assert_no_leaks(&id);
}
