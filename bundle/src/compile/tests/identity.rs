//! The process pass through whole compiles: who the agent runs as, its
//! capabilities and no_new_privileges, and the environment it gets.

use super::*;

#[test]
fn process_identity_capabilities_and_no_new_privileges() {
    let c = agent();
    let p = c.spec.process().as_ref().unwrap();
    assert_eq!(
        (p.user().uid(), p.user().gid()),
        (0, 0),
        "the caller is root in its user namespace"
    );
    assert_eq!(
        p.args().as_deref(),
        Some(&["claude".to_owned(), "--help".to_owned()][..])
    );
    assert_eq!(p.terminal(), Some(false));
    assert_eq!(p.no_new_privileges(), Some(true));
    assert!(p.rlimits().is_none());
    let caps = p.capabilities().as_ref().unwrap();
    for set in [
        caps.bounding(),
        caps.effective(),
        caps.inheritable(),
        caps.permitted(),
        caps.ambient(),
    ] {
        assert_eq!(set.as_ref().map(|s| s.len()), Some(0));
    }
    let json = serde_json::to_value(&c.spec).unwrap();
    assert_eq!(json["process"]["capabilities"]["bounding"], serde_json::json!([]));
    assert_eq!(json["process"]["capabilities"]["ambient"], serde_json::json!([]));

    let c = run(
        &policy("[identity]\ncapabilities = [\"CAP_NET_BIND_SERVICE\"]\nno_new_privileges = false"),
        &FakeHost::typical(),
        &Invocation {
            terminal: true,
            ..inv()
        },
    );
    let p = c.spec.process().as_ref().unwrap();
    assert_eq!(p.terminal(), Some(true));
    assert_eq!(
        p.no_new_privileges(),
        None,
        "false is left out (libcontainer reads presence as true)"
    );
    let caps = p.capabilities().as_ref().unwrap();
    for set in [
        caps.bounding(),
        caps.effective(),
        caps.inheritable(),
        caps.permitted(),
        caps.ambient(),
    ] {
        assert!(set
            .as_ref()
            .unwrap()
            .contains(&oci_spec::runtime::Capability::NetBindService));
    }
    assert_eq!(
        c.opt_outs,
        [
            "identity.capabilities: CAP_NET_BIND_SERVICE",
            "identity.no_new_privileges = false"
        ]
    );
}

#[test]
fn environment_is_cleared_allow_listed_and_secrets_never_pass() {
    let env = env_of(&agent());
    for (k, v) in [
        ("PATH", "/usr/bin:/bin"),
        ("HOME", "/home/u"),
        ("TERM", "xterm-256color"),
        ("LC_ALL", "C.UTF-8"),
        ("EDITOR", "vi"),
        ("IS_SANDBOX", "1"),
    ] {
        assert_eq!(env.get(k).map(String::as_str), Some(v), "{k}");
    }
    for k in [
        "GH_TOKEN",
        "ANTHROPIC_API_KEY",
        "SSH_AUTH_SOCK",
        "AWS_SECRET_ACCESS_KEY",
        "RANDOM_THING",
    ] {
        assert!(!env.contains_key(k), "{k} passed");
    }
    // Allowlist mode points clients at the proxy in the sandbox's namespace.
    assert_eq!(env["HTTPS_PROXY"], "http://127.0.0.1:3128");
    assert_eq!(env["http_proxy"], "http://127.0.0.1:3128");
    assert_eq!(env["ALL_PROXY"], "socks5h://127.0.0.1:1080");
    assert_eq!(env["no_proxy"], "localhost,127.0.0.1,::1");
    // ssh has no proxy variable: its ProxyCommand is the runtime's binary.
    assert_eq!(
        env["GIT_SSH_COMMAND"],
        "ssh -o 'ProxyCommand=/dev/.claude-shim-connect __connect %h %p'"
    );

    let offline = env_of(&run(&Policy::embedded_offline(), &FakeHost::typical(), &inv()));
    assert!(!offline.keys().any(|k| k.to_ascii_lowercase().contains("proxy")));
    assert!(!offline.contains_key("GIT_SSH_COMMAND"));
    assert!(!offline.contains_key("EDITOR"));

    // Even an allow-everything pattern loses to the secret rule; pass_secrets is by exact name.
    let p = policy(
        "[environment]\nallow = [\"*\"]\npass_secrets = [\"GH_TOKEN\"]\nset = { FOO = \"bar\", TERM = \"dumb\" }",
    );
    let env = env_of(&run(&p, &FakeHost::typical(), &inv()));
    assert_eq!(env["GH_TOKEN"], "ghp_secret");
    assert_eq!(env["RANDOM_THING"], "x");
    assert_eq!(env["FOO"], "bar");
    assert_eq!(env["TERM"], "dumb");
    assert!(!env.contains_key("ANTHROPIC_API_KEY") && !env.contains_key("SSH_AUTH_SOCK"));

    // Nothing from the caller: the fixed minimum still gives a PATH and a HOME.
    let env = env_of(&run(
        &Policy::embedded_offline(),
        &FakeHost::typical(),
        &Invocation { env: vec![], ..inv() },
    ));
    assert_eq!(env["PATH"], process::DEFAULT_PATH);
    assert_eq!(env["HOME"], "/home/u");
    assert_eq!(env.len(), 3, "{env:?}");
}
