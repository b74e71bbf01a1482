//! runc parity for what engines do to a live container (issue 25): `exec`
//! into a created one, `kill 0`, `exec --user` and HOME, the exit status of a
//! failed `exec`, `update` with runc's size units and `-1`, and who owns the
//! terminal of a `run` or `exec -t` with a user. Each runs the same bundle
//! under runc and claude-shim, prints both and compares them.

use std::process::Output;

use claude_shim_e2e::oracle::*;
use claude_shim_e2e::*;

/// One runtime under test: claude-shim (with its state root) or runc.
#[derive(Clone, Copy)]
enum Rt {
    Shim,
    Runc,
}

impl Rt {
    fn name(self) -> &'static str {
        match self {
            Rt::Shim => "claude-shim",
            Rt::Runc => "runc",
        }
    }

    fn run(self, env: &Env, args: &[&str]) -> Output {
        match self {
            Rt::Shim => env.run(args),
            Rt::Runc => runc(env, args),
        }
    }

    /// Runs, prints what the user saw, asserts success; returns stdout.
    fn ok(self, env: &Env, args: &[&str]) -> String {
        let out = self.run(env, args);
        eprintln!(
            "{} {args:?}: exit {:?}, stdout {:?}, stderr {:?}",
            self.name(),
            out.status.code(),
            text(&out.stdout),
            text(&out.stderr)
        );
        assert!(out.status.success(), "{} {args:?} failed", self.name());
        text(&out.stdout)
    }
}

const BOTH: [Rt; 2] = [Rt::Shim, Rt::Runc];

/// A `sleep` container created (not started) under each runtime; their ids.
fn created(env: &Env, name: &str, start: bool) -> [String; 2] {
    let bundle = env.bundle(name, |v| set_args(v, &["sleep", "1000"]));
    let b = in_bundle(&bundle);
    let ids = [unique_id(name), format!("runc-{name}")];
    for (rt, id) in BOTH.iter().zip(&ids) {
        let mut args = vec!["create"];
        args.extend(b.iter().map(String::as_str));
        args.push(id);
        rt.ok(env, &args);
        if start {
            rt.ok(env, &["start", id]);
        }
    }
    ids
}

fn remove(env: &Env, ids: &[String; 2]) {
    for (rt, id) in BOTH.iter().zip(ids) {
        rt.ok(env, &["delete", "--force", id]);
    }
    env.assert_no_leaks(&ids[0]);
}

#[test]
fn exec_into_a_created_container_and_kill_0_work_as_in_runc() {
    let env = Env::new();
    let ids = created(&env, "exec-created", false);
    let mut seen = vec![];
    for (rt, id) in BOTH.iter().zip(&ids) {
        // Engines exec into a created container (runc allows it); the
        // process joins the init's namespaces while the init still waits.
        // pid 1 is still the runtime's init ("runc:[2:INIT]", "youki:[2:INIT]").
        let out = rt.ok(&env, &["exec", id, "sh", "-c", "echo in; grep -c INIT /proc/1/comm"]);
        // Signal 0 checks that the init is there, in both states.
        rt.ok(&env, &["kill", id, "0"]);
        rt.ok(&env, &["start", id]);
        rt.ok(&env, &["kill", id, "0"]);
        seen.push(out);
    }
    assert_eq!(seen[0], seen[1], "claude-shim and runc saw different things");
    assert_eq!(seen[0], "in\n1\n");
    remove(&env, &ids);
    for (rt, id) in BOTH.iter().zip(&ids) {
        let out = rt.run(&env, &["kill", id, "0"]);
        eprintln!("{} kill {id} 0 after delete: {:?}", rt.name(), out.status.code());
        assert!(
            !out.status.success(),
            "{}: kill 0 of a deleted container succeeded",
            rt.name()
        );
    }
}

#[test]
fn exec_user_gets_home_from_the_containers_passwd_else_slash() {
    let env = Env::new();
    let ids = created(&env, "exec-home", true);
    let mut seen = vec![];
    for (rt, id) in BOTH.iter().zip(&ids) {
        // uid 0 has an entry in the rootfs's /etc/passwd, uid 1000 none.
        let mut out = String::new();
        for user in ["0:0", "1000:1000"] {
            out += &rt.ok(
                &env,
                &["exec", "--user", user, id, "sh", "-c", "echo \"HOME=${HOME-unset}\""],
            );
        }
        seen.push(out);
    }
    assert_eq!(seen[0], "HOME=/root\nHOME=/\n");
    assert_eq!(seen[0], seen[1]);
    remove(&env, &ids);
}

#[test]
fn a_failed_exec_exits_255_as_runcs() {
    let env = Env::new();
    let ids = created(&env, "exec-255", true);
    for (rt, id) in BOTH.iter().zip(&ids) {
        let out = rt.run(&env, &["exec", id, "/no/such/program"]);
        eprintln!(
            "{} exec of a missing program: exit {:?}, {}",
            rt.name(),
            out.status.code(),
            text(&out.stderr).trim()
        );
        // 255 tells the runtime's failure from the process's own status.
        assert_eq!(out.status.code(), Some(255), "{}", rt.name());
        assert!(text(&out.stderr).contains("/no/such/program"), "{}", rt.name());
        // The process's own status still comes through.
        let out = rt.run(&env, &["exec", id, "sh", "-c", "exit 3"]);
        assert_eq!(out.status.code(), Some(3), "{}", rt.name());
    }
    remove(&env, &ids);
}

#[test]
fn update_takes_runcs_units_and_minus_one() {
    let env = Env::new();
    let ids = created(&env, "update-units", true);
    // What the container itself reads back (its cgroup namespace's root).
    let limits = "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max; \
                  cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null || cat /sys/fs/cgroup/cpu.max";
    let mut seen = vec![];
    for (rt, id) in BOTH.iter().zip(&ids) {
        rt.ok(&env, &["update", "--memory", "50M", "--cpu-quota", "20000", id]);
        let set = rt.ok(&env, &["exec", id, "sh", "-c", limits]);
        rt.ok(&env, &["update", "--memory", "-1", "--cpu-quota", "-1", id]);
        let unset = rt.ok(&env, &["exec", id, "sh", "-c", limits]);
        seen.push((set, unset));
    }
    assert!(seen[0].0.starts_with("52428800\n"), "50M is 50 MiB: {:?}", seen[0]);
    assert_ne!(seen[0].0, seen[0].1, "-1 lifted the limits");
    assert_eq!(seen[0], seen[1]);
    // A size runc does not read either is refused, with the value named.
    let line = env.fails(&["update", "--memory", "50Q", &ids[0]]);
    assert!(line.contains("50Q"), "{line}");
    assert!(!runc(&env, &["update", "--memory", "50Q", &ids[1]]).status.success());
    remove(&env, &ids);
}

#[test]
fn a_terminal_containers_lines_end_as_the_program_wrote_them() {
    // Each runtime in the foreground on a terminal of its own (script(1)),
    // whose own output processing is off, so what shows is the container pty's.
    let env = Env::new();
    let bundle = env.bundle("onlcr", |v| {
        v["process"]["terminal"] = true.into();
        set_args(v, &["printf", "a\\nb\\n"]);
    });
    let id = unique_id("onlcr");
    let mut seen = vec![];
    for (program, root, name) in [
        (shim_path(), env.root.clone(), id.clone()),
        ("runc".into(), env.dir.path().join("runc"), "runc-onlcr".to_owned()),
    ] {
        let inner = format!(
            "stty -onlcr; {} --root {} run --bundle {} {name}",
            shell_word(&program),
            shell_word(&root),
            shell_word(&bundle)
        );
        let mut c = std::process::Command::new("script");
        c.args(["-qec", &inner, "/dev/null"]);
        let out = output_of(c, env.dir.path());
        let shown = text(&out.stdout);
        eprintln!("{}: exit {:?}, {shown:?}", program.display(), out.status.code());
        assert!(out.status.success(), "{}", text(&out.stderr));
        seen.push(shown.contains("a\nb\n") && !shown.contains('\r'));
    }
    // runc clears ONLCR on the pty it relays; the caller's terminal ends lines.
    assert_eq!(seen, [true, true], "\\n became \\r\\n (claude-shim, runc)");
    env.assert_no_leaks(&id);
}

/// The owner and group of the process's terminal as it sees it, through
/// script(1) (a terminal of the test's own), under one runtime: `run` of a
/// terminal container whose user is 1000, then `exec -t --user 1001` into a
/// second, detached one.
fn terminal_owners(env: &Env, rt: Rt, program: &std::path::Path, root: &std::path::Path) -> String {
    let show = "ls -lnL /proc/self/fd/0 | awk '{print $3, $4, $1}'";
    let bundle = env.bundle(&format!("ptyown-{}", rt.name()), |v| {
        v["process"]["terminal"] = true.into();
        v["process"]["user"] = serde_json::json!({"uid": 1000, "gid": 1000});
        set_args(v, &["sh", "-c", show]);
    });
    let id = format!("{}-{}", unique_id("ptyown"), rt.name());
    let shell = |inner: String| {
        let mut c = std::process::Command::new("script");
        c.args(["-qec", &inner, "/dev/null"]);
        let out = output_of(c, env.dir.path());
        // runc's relay puts a NUL before the output, which script shows as ^@.
        let shown = text(&out.stdout).replace('\r', "").replace("^@", "");
        eprintln!("{}: exit {:?}, {shown:?}", rt.name(), out.status.code());
        assert!(out.status.success(), "{}", text(&out.stderr));
        shown
    };
    let (prog, root) = (shell_word(program), shell_word(root));
    let mut seen = shell(format!(
        "{prog} --root {root} run --bundle {} {id}",
        shell_word(&bundle)
    ));
    let sleeper = env.bundle(&format!("ptyown-sleep-{}", rt.name()), |v| {
        set_args(v, &["sleep", "1000"])
    });
    let mut detached = vec!["run".to_owned(), "--detach".into()];
    detached.extend(in_bundle(&sleeper));
    detached.push(format!("{id}-exec"));
    rt.ok(env, &detached.iter().map(String::as_str).collect::<Vec<_>>());
    seen += &shell(format!(
        "{prog} --root {root} exec -t --user 1001:1001 {id}-exec sh -c \"{}\"",
        show.replace('$', "\\$")
    ));
    rt.ok(env, &["delete", "--force", &format!("{id}-exec")]);
    if let Rt::Shim = rt {
        env.assert_no_leaks(&id);
    }
    seen
}

#[test]
fn a_terminal_belongs_to_the_process_user_as_under_runc() {
    let env = Env::new();
    let ours = terminal_owners(&env, Rt::Shim, &shim_path(), &env.root);
    let theirs = terminal_owners(
        &env,
        Rt::Runc,
        std::path::Path::new("runc"),
        &env.dir.path().join("runc"),
    );
    eprintln!("terminal owner, group, mode: claude-shim {ours:?}, runc {theirs:?}");
    // The user owns it; the group stays the devpts mount's (gid=5, tty).
    assert_eq!(ours, "1000 5 crw--w----\n1001 5 crw--w----\n");
    assert_eq!(ours, theirs);
}

/// A parent cgroup of the test's own, in every v1 hierarchy, removed (with
/// whatever the runtimes left below it) when dropped.
struct ScratchParent(String);

impl Drop for ScratchParent {
    fn drop(&mut self) {
        for h in std::fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
            let dir = h.path().join(&self.0);
            if let Ok(children) = std::fs::read_dir(&dir) {
                for c in children.flatten().filter(|c| c.path().is_dir()) {
                    let _ = std::fs::remove_dir(c.path());
                }
                let _ = std::fs::remove_dir(&dir);
            }
        }
    }
}

#[test]
fn update_of_cpu_period_and_quota_under_a_limited_parent_as_runc() {
    let cpu = std::path::Path::new("/sys/fs/cgroup/cpu");
    if !cpu.join("cpu.cfs_period_us").exists() {
        // cgroup v2 takes both in one write of cpu.max: nothing to order.
        eprintln!("no cgroup v1 cpu hierarchy: nothing to compare");
        return;
    }
    let env = Env::new();
    let mut parents = vec![];
    let mut seen = vec![];
    for rt in BOTH {
        // Half a CPU for the parent, 0.4 for the container.
        let parent = ScratchParent(format!("{}-{}", unique_id("cpupar"), rt.name()));
        std::fs::create_dir(cpu.join(&parent.0)).unwrap();
        std::fs::write(cpu.join(&parent.0).join("cpu.cfs_quota_us"), "50000").unwrap();
        let bundle = env.bundle(&format!("cpuorder-{}", rt.name()), |v| {
            v["linux"]["cgroupsPath"] = format!("/{}/ctr", parent.0).into();
            v["linux"]["resources"]["cpu"] = serde_json::json!({"quota": 40000, "period": 100000});
            set_args(v, &["sleep", "1000"]);
        });
        let id = format!("{}-{}", unique_id("cpuorder"), rt.name());
        let mut args = vec!["run", "--detach"];
        let b = in_bundle(&bundle);
        args.extend(b.iter().map(String::as_str));
        args.push(&id);
        rt.ok(&env, &args);
        let dir = cpu.join(&parent.0).join("ctr");
        let mut results = vec![];
        // Each pair fits the parent; the period alone at 20000 does not.
        for update in [
            &["--cpu-period", "50000", "--cpu-quota", "20000"][..],
            &["--cpu-period", "100000", "--cpu-quota", "40000"],
            &["--cpu-quota", "10000", "--cpu-period", "20000"],
            &["--cpu-period", "10000"],
        ] {
            let out = rt.run(&env, &[&["update"], update, &[&id]].concat());
            let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap().trim().to_owned();
            let r = format!(
                "{update:?}: {} quota {} period {}",
                if out.status.success() { "ok" } else { "refused" },
                read("cpu.cfs_quota_us"),
                read("cpu.cfs_period_us")
            );
            eprintln!("{}: {r}; stderr {:?}", rt.name(), text(&out.stderr).trim());
            results.push(r);
        }
        rt.ok(&env, &["delete", "--force", &id]);
        if let Rt::Shim = rt {
            env.assert_no_leaks(&id);
        }
        seen.push(results);
        parents.push(parent);
    }
    assert_eq!(
        seen[0],
        [
            r#"["--cpu-period", "50000", "--cpu-quota", "20000"]: ok quota 20000 period 50000"#,
            r#"["--cpu-period", "100000", "--cpu-quota", "40000"]: ok quota 40000 period 100000"#,
            r#"["--cpu-quota", "10000", "--cpu-period", "20000"]: ok quota 10000 period 20000"#,
            r#"["--cpu-period", "10000"]: refused quota 10000 period 20000"#,
        ]
    );
    assert_eq!(seen[0], seen[1]);
}
