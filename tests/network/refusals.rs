//! What claude-shim refuses to run: a missing or failing pasta, nft or proxy,
//! and network setups it cannot enforce.

use std::fs;
use std::path::{Path, PathBuf};

use claude_shim_e2e::*;
use serde_json::{json, Value};

use crate::container::{assert_all_gone, id_of, net_bundle, Net};
use crate::world::World;

/// A stand-in for a tool: a shell script in the test's directory.
fn fake_tool(env: &Env, name: &str, body: &str) -> PathBuf {
    let p = env.dir.path().join(name);
    fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    p
}

#[test]
fn missing_or_failing_pasta_nft_or_proxy_refuses_the_container() {
    let world = World::new();
    let env = Env::new();
    let public = Net {
        mode: "public",
        policy: json!({}),
        host_tools: false,
    };
    let allow = Net {
        mode: "allowlist",
        policy: json!({}),
        host_tools: false,
    };
    let pub_bundle = net_bundle(&env, &world, "refuse-pub", Some(&public), "echo started\n");
    // The proxy is a fork of the runtime (nothing to find on disk); it fails
    // when its API gateway has no CA certificate to check upstream with.
    let gateway_bundle = net_bundle(&env, &world, "refuse-allow", Some(&allow), "echo started\n");
    let config = gateway_bundle.join("config.json");
    let mut v: Value = serde_json::from_str(&fs::read_to_string(&config).unwrap()).unwrap();
    v["annotations"]["run.claude-shim.gateway"] = json!("https://api.test");
    fs::write(&config, v.to_string()).unwrap();
    let fails_pasta = fake_tool(&env, "pasta-fails", "echo 'no tap for you' >&2; exit 3");
    let fails_nft = fake_tool(&env, "nft-fails", "echo 'Error: no netlink' >&2; exit 1");
    // Says yes to everything and installs nothing: the read-back must catch it.
    let lying_nft = fake_tool(&env, "nft-lies", r#"cat >/dev/null; echo '{"nftables": []}'; exit 0"#);
    type Case<'a> = (&'a str, &'a Path, Vec<(&'a str, &'a str)>, &'a str);
    let cases: Vec<Case<'_>> = vec![
        (
            "no-pasta",
            &pub_bundle,
            vec![("CLAUDE_SHIM_PASTA", "/nonexistent/pasta")],
            "/nonexistent/pasta",
        ),
        (
            "no-nft",
            &pub_bundle,
            vec![("CLAUDE_SHIM_NFT", "/nonexistent/nft")],
            "/nonexistent/nft",
        ),
        (
            "pasta-fails",
            &pub_bundle,
            vec![("CLAUDE_SHIM_PASTA", fails_pasta.to_str().unwrap())],
            // pasta's own words reach the error (its stderr and log are one pipe).
            "exit status: 3: no tap for you",
        ),
        (
            "nft-fails",
            &pub_bundle,
            vec![("CLAUDE_SHIM_NFT", fails_nft.to_str().unwrap())],
            "no netlink",
        ),
        (
            "nft-lies",
            &pub_bundle,
            vec![("CLAUDE_SHIM_NFT", lying_nft.to_str().unwrap())],
            "read the rules back",
        ),
        (
            "proxy-fails",
            &gateway_bundle,
            vec![
                ("SSL_CERT_FILE", "/nonexistent/ca.pem"),
                ("SSL_CERT_DIR", "/nonexistent"),
            ],
            "CA certificates",
        ),
    ];
    for (name, bundle, vars, want) in cases {
        let id = id_of(name);
        let out = world.run_with(&env, &["run", "--bundle", bundle.to_str().unwrap(), &id], &vars);
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!("{name}: {stderr}");
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("started"),
            "{name}: the process never ran"
        );
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.contains("warning:")).collect();
        assert_eq!(lines.len(), 1, "{name}: one error line: {stderr}");
        assert!(
            lines[0].starts_with("claude-shim: error: failed to "),
            "{name}: {}",
            lines[0]
        );
        assert!(lines[0].contains(want), "{name}: {} should name {want}", lines[0]);
        assert_all_gone(&env, &id);
    }
}

#[test]
fn modes_that_cannot_be_enforced_are_refused() {
    let world = World::new();
    let env = Env::new();
    let net = Net {
        mode: "none",
        policy: json!({}),
        host_tools: false,
    };
    let host_net = net_bundle(&env, &world, "hostnet", Some(&net), "echo started\n");
    edit_config(&host_net, |v| {
        v["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .retain(|n| n["type"] != "network");
    });
    // The namespace claude-shim itself runs in (the world's "host"), by path.
    let joined_host = net_bundle(&env, &world, "joinhost", Some(&net), "echo started\n");
    let host_path = World::ns_path(&world.host);
    edit_config(&joined_host, |v| {
        for n in v["linux"]["namespaces"].as_array_mut().unwrap() {
            if n["type"] == "network" {
                n["path"] = json!(host_path);
            }
        }
    });
    let net_admin = net_bundle(&env, &world, "netadmin", Some(&net), "echo started\n");
    edit_config(&net_admin, |v| {
        for set in ["bounding", "effective", "permitted"] {
            v["process"]["capabilities"][set]
                .as_array_mut()
                .unwrap()
                .push(json!("CAP_NET_ADMIN"));
        }
    });
    let bad_mode = net_bundle(&env, &world, "badmode", Some(&net), "echo started\n");
    edit_config(&bad_mode, |v| {
        v["annotations"]["run.claude-shim.network"] = json!("wide-open")
    });
    let bad_policy = net_bundle(&env, &world, "badpolicy", Some(&net), "echo started\n");
    edit_config(&bad_policy, |v| {
        v["annotations"]["run.claude-shim.network"] = json!("allowlist");
        v["annotations"]["run.claude-shim.network.policy"] = json!(r#"{"allow": ["ok.test", "*"]}"#);
    });
    for (bundle, want) in [
        (&host_net, "shares the host's network namespace"),
        (&joined_host, "which is the host's network namespace"),
        (&net_admin, "CAP_NET_ADMIN"),
        (&bad_mode, "\"wide-open\" is not a mode"),
        (&bad_policy, "entry \"*\""),
    ] {
        let id = id_of("refused");
        let out = world.run(&env, &["run", "--bundle", bundle.to_str().unwrap(), &id]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(want) && stderr.starts_with("claude-shim: error: failed to "),
            "{stderr} should say {want}"
        );
        assert!(!String::from_utf8_lossy(&out.stdout).contains("started"));
        assert_all_gone(&env, &id);
    }
}

fn edit_config(bundle: &Path, edit: impl FnOnce(&mut Value)) {
    let path = bundle.join("config.json");
    let mut v: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut v);
    fs::write(&path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}
