//! runc parity for what engines and scripts read as text (issue 37): `state`
//! and `list` JSON with runc's key order, `list` with no container, and the
//! table's columns. Each runs the same commands under claude-shim and runc
//! 1.1.5, prints both and compares them.

use claude_shim_e2e::oracle::*;
use claude_shim_e2e::*;

/// The keys of each JSON object in `text`, in the order written.
fn key_order(text: &str) -> Vec<String> {
    let mut keys = vec![];
    let mut rest = text;
    // A key is a string followed by a colon; values here hold no `":`.
    while let Some(i) = rest.find("\":") {
        let start = rest[..i].rfind('"').unwrap();
        keys.push(rest[start + 1..i].to_owned());
        rest = &rest[i + 2..];
    }
    keys
}

#[test]
fn state_and_list_print_runcs_keys_in_runcs_order() {
    let env = Env::new();
    let bundle = env.bundle("order", |v| set_args(v, &["sleep", "1000"]));
    let b = in_bundle(&bundle);
    let id = unique_id("order");
    let mut create = vec!["create"];
    create.extend(b.iter().map(String::as_str));
    // No container yet: runc prints `null` (a nil slice).
    let ours = env.ok(&["list", "--format", "json"]);
    let theirs = runc_ok(&env, &["list", "--format", "json"]);
    eprintln!("empty list: claude-shim {ours:?}, runc {theirs:?}");
    assert_eq!(ours, theirs);
    let ours = env.ok(&["list"]);
    let theirs = runc_ok(&env, &["list"]);
    eprintln!("empty table: claude-shim {ours:?}, runc {theirs:?}");
    assert_eq!(ours, theirs);

    env.ok(&[create.clone(), vec![id.as_str()]].concat());
    runc_ok(&env, &[create, vec![id.as_str()]].concat());
    for args in [&["state", id.as_str()][..], &["list", "--format", "json"][..]] {
        let ours = env.ok(args);
        let theirs = runc_ok(&env, args);
        eprintln!("{args:?}:\nclaude-shim {ours}\nrunc {theirs}");
        assert_eq!(key_order(&ours), key_order(&theirs), "{args:?}");
        assert_eq!(key_order(&ours)[..3], ["ociVersion", "id", "pid"], "{args:?}: {ours}");
    }
    let ours = env.ok(&["list"]);
    let theirs = runc_ok(&env, &["list"]);
    eprintln!("table:\nclaude-shim {ours}\nrunc {theirs}");
    assert_eq!(ours.lines().count(), 2, "{ours}");
    env.ok(&["delete", "--force", &id]);
    runc_ok(&env, &["delete", "--force", &id]);
    env.assert_no_leaks(&id);
}

/// `events --stats` prints one stats event and exits; the stream prints one
/// every `--interval` (a Go duration) until the container is deleted; each
/// line starts as runc's (`{"type":"stats","id":ID,`), which the bats suite
/// and scripts match as text.
#[test]
fn events_print_runcs_stats_lines() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let env = Env::new();
    let bundle = env.bundle("events", |v| set_args(v, &["sleep", "1000"]));
    let b = in_bundle(&bundle);
    let id = unique_id("events");
    let mut detached = vec!["run", "--detach"];
    detached.extend(b.iter().map(String::as_str));
    env.ok(&[detached.clone(), vec![id.as_str()]].concat());
    runc_ok(&env, &[detached, vec![id.as_str()]].concat());
    let prefix = format!("{{\"type\":\"stats\",\"id\":\"{id}\",\"data\":{{");
    let ours = env.ok(&["events", "--stats", &id]);
    let theirs = runc_ok(&env, &["events", "--stats", &id]);
    eprintln!("events --stats:\nclaude-shim {ours}\nrunc {theirs}");
    for (rt, out) in [("claude-shim", &ours), ("runc", &theirs)] {
        assert_eq!(out.lines().count(), 1, "{rt}: {out}");
        assert!(out.starts_with(&prefix), "{rt}: {out}");
        let v: serde_json::Value = serde_json::from_str(out).unwrap();
        assert!(v["data"]["pids"]["current"].as_u64() >= Some(1), "{rt}: {out}");
    }

    // The stream, until delete: both end once the container is gone.
    for rt in ["claude-shim", "runc"] {
        let log = env.dir.path().join(format!("events-{rt}.log"));
        let mut c = if rt == "runc" {
            let mut c = Command::new("runc");
            c.arg("--root").arg(env.dir.path().join("runc"));
            c
        } else {
            env.command(&[])
        };
        c.args(["events", "--interval", "100ms", &id])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::null());
        let mut child = c.spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::read_to_string(&log).unwrap().lines().count() < 2 {
            assert!(Instant::now() < deadline, "{rt}: no two events in 10 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        if rt == "runc" {
            runc_ok(&env, &["delete", "--force", &id]);
        } else {
            env.ok(&["delete", "--force", &id]);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "{rt}: the stream outlived the container");
            std::thread::sleep(Duration::from_millis(50));
        }
        let text = std::fs::read_to_string(&log).unwrap();
        eprintln!("{rt} events stream:\n{text}");
        assert!(text.lines().all(|l| l.starts_with(&prefix)), "{rt}: {text}");
    }
    env.assert_no_leaks(&id);
}

/// `spec` writes runc's template: the same namespaces as runc's on this host
/// (a cgroup namespace only where cgroups are v2 alone; runc's bats suite
/// reads the host's cgroup paths from inside on a v1 or hybrid host).
#[test]
fn the_spec_template_lists_runcs_namespaces() {
    let env = Env::new();
    let mut seen = vec![];
    for runtime in ["claude-shim", "runc"] {
        let dir = env.dir.path().join(format!("spec-ns-{runtime}"));
        std::fs::create_dir(&dir).unwrap();
        let out = if runtime == "runc" {
            runc(&env, &["spec", "--bundle", dir.to_str().unwrap()])
        } else {
            env.run(&["spec", "--bundle", dir.to_str().unwrap()])
        };
        assert!(out.status.success(), "{runtime}: {}", text(&out.stderr));
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
        let types: Vec<String> = v["linux"]["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["type"].as_str().unwrap().to_owned())
            .collect();
        eprintln!("{runtime}'s template: {types:?}");
        seen.push(types);
    }
    assert_eq!(seen[0], seen[1], "claude-shim, then runc");
}
