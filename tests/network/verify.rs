//! `verify` in the world: it probes every network mode from inside, and fails
//! a sandbox left on the host's network. Its policy files serve the sandbox test too.

use std::collections::HashMap;
use std::fs;
use std::path::PathBuf;

use claude_shim_e2e::*;
use serde_json::Value;

use crate::rootless::require_tun_for_users;
use crate::world::World;

/// A policy file: the embedded defaults but for its `[network]` section.
pub(crate) fn policy_file(env: &Env, name: &str, network: &str) -> PathBuf {
    let path = env.dir.path().join(format!("{name}.toml"));
    fs::write(
        &path,
        format!("version = 1\nname = \"{name}\"\n\n[network]\n{network}\n"),
    )
    .unwrap();
    path
}

/// A working directory the sandbox's user owns.
pub(crate) fn workdir(env: &Env, name: &str) -> PathBuf {
    let dir = env.dir.path().join(name);
    fs::create_dir(&dir).unwrap();
    if let Some((uid, gid)) = env.as_user {
        nix::unistd::chown(&dir, Some(uid.into()), Some(gid.into())).unwrap();
    }
    dir
}

pub(crate) const VERIFY_ALLOWLIST: &str =
    "mode = \"allowlist\"\nallow = [\"pub.test\", \"*.wild.test\"]\ndeny = [\"blocked.wild.test\"]";
const VERIFY_PUBLIC: &str = "mode = \"public\"\nallow_cidrs = [\"10.123.1.2/32:80\"]";

/// `verify` in the world; every row of the network group, by check id.
fn verify_network(world: &World, env: &Env, name: &str, network: &str, extra: &[&str]) -> HashMap<String, String> {
    let policy = policy_file(env, name, network);
    let work = workdir(env, name);
    let mut args = vec![
        "verify",
        "--policy",
        policy.to_str().unwrap(),
        "--workdir",
        work.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = world.run(env, &args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "verify {name}:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The table, for `--nocapture` runs.
    println!("verify {name}:\n{stdout}");
    let summary = stdout.lines().find(|l| l.starts_with("claude-shim: ")).unwrap();
    assert!(summary.contains(" 0 failed"), "{summary}");
    let mut rows = HashMap::new();
    for line in stdout.lines() {
        let cells: Vec<&str> = line.split(" | ").map(str::trim).collect();
        if cells.len() == 4 {
            rows.insert(cells[0].to_owned(), format!("{} | {}", cells[2], cells[3]));
        }
    }
    rows
}

/// The row whose id starts with `prefix` (ports of the host's canary vary).
fn row<'a>(rows: &'a HashMap<String, String>, prefix: &str) -> &'a str {
    let mut hits: Vec<(&String, &String)> = rows.iter().filter(|(k, _)| k.starts_with(prefix)).collect();
    hits.sort();
    let (id, cell) = hits
        .first()
        .unwrap_or_else(|| panic!("no row {prefix:?} in {:#?}", rows.keys().collect::<Vec<_>>()));
    assert!(cell.ends_with("| PASS"), "{id}: {cell}");
    cell
}

fn check_verify_allowlist(rows: &HashMap<String, String>) {
    assert!(row(rows, "network allowlist").contains("interfaces: lo"));
    for r in ["rtnetlink address change", "nftables table deletion"] {
        assert!(row(rows, r).contains("refused: EPERM"), "{r}");
    }
    for r in [
        "direct gateway 10.123.0.1:",
        "direct host address 10.123.0.2:",
        "direct host address [fd12:3::2]:",
        "direct metadata 169.254.169.254:80",
        "direct private 10/8",
        "direct public IPv6",
    ] {
        assert!(row(rows, r).contains("ENETUNREACH"), "{r}");
    }
    assert!(row(rows, "direct host loopback 127.0.0.1:").contains("ECONNREFUSED"));
    // The proxy: the allowed host through to the test server, the rest refused.
    assert!(row(rows, "proxy http allowed pub.test:80").contains("200 Connection established"));
    for r in [
        "proxy http off the list",
        "proxy http denied blocked.wild.test:443",
        "proxy http metadata 169.254.169.254:80",
        "proxy http host loopback 127.0.0.1:",
        "proxy http host address 10.123.0.2:",
    ] {
        assert!(row(rows, r).contains("403 Forbidden"), "{r}");
    }
    for r in ["proxy socks5 off the list", "proxy socks5 host loopback localhost:"] {
        assert!(row(rows, r).contains("not allowed by ruleset"), "{r}");
    }
    // The proxy's own rules, proven from inside: a port the entry does not
    // admit, NAT64's form of the metadata address, and plain-HTTP requests
    // that smuggle a second host.
    assert!(row(rows, "proxy http port not allowed pub.test:25").contains("port 25 is not allowed"));
    assert!(row(rows, "proxy http metadata as NAT64 [64:ff9b::a9fe:a9fe]:80").contains("NAT64 form of 169.254.0.0/16"));
    for r in [
        "proxy http Host mismatch pub.test:80",
        "proxy http pipelined pub.test:80",
    ] {
        assert!(row(rows, r).contains("400 Bad Request"), "{r}");
    }
}

fn check_verify_public(rows: &HashMap<String, String>) {
    assert!(row(rows, "network public").contains("eth0"));
    for r in ["rtnetlink address change", "nftables table deletion"] {
        assert!(row(rows, r).contains("refused: EPERM"), "{r}");
    }
    // The sandbox holds copies of the host's addresses (pasta): its own
    // stack answers there, the host's canary is not reached.
    for r in ["direct host address 10.123.0.2:", "direct host address [fd12:3::2]:"] {
        assert!(row(rows, r).contains("ECONNREFUSED"), "{r}");
    }
    // Rejected by the filter (admin-prohibited), not by a missing route.
    for r in [
        "direct gateway 10.123.0.1:",
        "direct metadata 169.254.169.254:80",
        "direct private 10/8",
        "direct private 192.168/16",
        "direct CGNAT",
    ] {
        assert!(row(rows, r).contains("EHOSTUNREACH"), "{r}");
    }
    for r in ["direct gateway [fd12:3::1]:", "direct private IPv6"] {
        assert!(row(rows, r).contains("EACCES"), "{r}");
    }
    assert!(!rows.keys().any(|k| k.starts_with("proxy ")), "no proxy in public mode");
}

#[test]
fn verify_probes_every_network_mode_from_inside() {
    let world = World::new();
    let env = Env::new();
    let rows = verify_network(&world, &env, "v-allow", VERIFY_ALLOWLIST, &["--reach", "pub.test:80"]);
    check_verify_allowlist(&rows);
    // With no --reach, the first name on the allowlist, port 443: admitted,
    // and the test server has nothing on 443.
    let rows = verify_network(&world, &env, "v-allow-default", VERIFY_ALLOWLIST, &[]);
    assert!(row(&rows, "proxy http allowed pub.test:443").contains("upstream is unreachable"));
    check_verify_public(&verify_network(&world, &env, "v-public", VERIFY_PUBLIC, &[]));
    let rows = verify_network(&world, &env, "v-none", "mode = \"none\"", &[]);
    assert!(row(&rows, "network none").contains("interfaces: lo"));
    assert!(row(&rows, "direct gateway 10.123.0.1:").contains("ENETUNREACH"));
    assert!(!rows.keys().any(|k| k.starts_with("proxy ")));
}

#[test]
fn verify_probes_the_network_of_rootless_sandboxes() {
    require_tun_for_users();
    let world = World::new();
    let (uid, gid) = test_user();
    let env = Env::as_user(uid, gid);
    let rows = verify_network(&world, &env, "rv-allow", VERIFY_ALLOWLIST, &["--reach", "pub.test:80"]);
    check_verify_allowlist(&rows);
    check_verify_public(&verify_network(&world, &env, "rv-public", VERIFY_PUBLIC, &[]));
}

/// The network checks must be able to fail: the same bundle under a peer
/// "runtime" that drops the network namespace (runc on the host's network)
/// reaches the host's canary and sees its interfaces, and verify says so.
#[test]
fn verify_fails_a_sandbox_on_the_hosts_network() {
    let world = World::new();
    let env = Env::new();
    let wrapper = loosened_runc(
        env.dir.path(),
        "hostnet-runc",
        r#"del(.linux.namespaces[] | select(.type == "network"))"#,
    );
    let policy = policy_file(&env, "v-hostnet", VERIFY_ALLOWLIST);
    let work = workdir(&env, "v-hostnet");
    let out = world.run(
        &env,
        &[
            "verify",
            "--json",
            "--reach",
            "none",
            "--policy",
            policy.to_str().unwrap(),
            "--workdir",
            work.to_str().unwrap(),
            "--runtime",
            wrapper.to_str().unwrap(),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let rows: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    let result = |prefix: &str, run: usize| -> (String, String) {
        let r = rows
            .iter()
            .find(|r| r["check"].as_str().unwrap().starts_with(prefix))
            .unwrap_or_else(|| panic!("no row {prefix}"));
        let cell = &r["runs"][run]["row"];
        (
            cell["result"].as_str().unwrap().to_owned(),
            cell["observed"].as_str().unwrap().to_owned(),
        )
    };
    for (prefix, seen) in [
        ("network allowlist", "h0"),
        ("direct host loopback 127.0.0.1:", "connected"),
        ("direct host address 10.123.0.2:", "connected"),
        ("direct gateway 10.123.0.1:", "ECONNREFUSED"),
    ] {
        assert_eq!(
            result(prefix, 0).0,
            "PASS",
            "claude-shim: {prefix} {:?}",
            result(prefix, 0)
        );
        let (verdict, observed) = result(prefix, 1);
        assert_eq!(verdict, "FAIL", "{prefix}: {observed}");
        assert!(observed.contains(seen), "{prefix}: {observed}");
    }
}
