//! The network pass through whole compiles: the annotations the network
//! helper reads, and the proxy environment of the allowlist mode.

use super::*;

#[test]
fn network_annotations_follow_the_contract() {
    let c = agent();
    assert_eq!(annotation(&c, annotations::POLICY), Some("agent"));
    assert_eq!(annotation(&c, annotations::NETWORK), Some("allowlist"));
    let v: serde_json::Value = serde_json::from_str(annotation(&c, annotations::NETWORK_POLICY).unwrap()).unwrap();
    assert_eq!(v["allow"][0], "api.anthropic.com");
    assert_eq!(v["deny"], serde_json::json!([]));
    assert_eq!(v["allow_cidrs"], serde_json::json!([]));
    assert_eq!(v.as_object().unwrap().len(), 3);
    assert_eq!(annotation(&c, annotations::OPT_OUTS), Some("[]"));

    let c = run(&Policy::embedded_offline(), &FakeHost::typical(), &inv());
    assert_eq!(annotation(&c, annotations::NETWORK), Some("none"));
    assert_eq!(
        annotation(&c, annotations::NETWORK_POLICY),
        Some(r#"{"allow":[],"deny":[],"allow_cidrs":[]}"#)
    );

    let p = policy("[network]\nmode = \"allowlist\"\nallow = [\"GitHub.com:443\"]\ndeny = [\"gist.github.com\"]");
    let c = run(&p, &FakeHost::typical(), &inv());
    assert_eq!(
        annotation(&c, annotations::NETWORK_POLICY),
        Some(r#"{"allow":["github.com:443"],"deny":["gist.github.com"],"allow_cidrs":[]}"#)
    );
    let p = policy("[network]\nmode = \"public\"\nallow_cidrs = [\"10.0.0.5/32:443\"]");
    let c = run(&p, &FakeHost::typical(), &inv());
    assert_eq!(annotation(&c, annotations::NETWORK), Some("public"));
    assert_eq!(
        annotation(&c, annotations::NETWORK_POLICY),
        Some(r#"{"allow":[],"deny":[],"allow_cidrs":["10.0.0.5/32:443"]}"#)
    );
    assert!(!env_of(&c).contains_key("HTTPS_PROXY"));
    let opt: Vec<String> = serde_json::from_str(annotation(&c, annotations::OPT_OUTS).unwrap()).unwrap();
    assert_eq!(opt, ["network.mode = public", "network.allow_cidrs: 10.0.0.5/32:443"]);
}

#[test]
fn published_ports_and_the_workdir_are_annotated() {
    let c = agent();
    assert_eq!(annotation(&c, annotations::NETWORK_PUBLISH), None);
    assert_eq!(
        annotation(&c, annotations::WORKDIR).map(std::path::PathBuf::from),
        Some(inv().workdir)
    );
    let p = policy("[network]\nmode = \"none\"\npublish = [\"8080:3000\", \"5173\"]");
    let c = run(&p, &FakeHost::typical(), &inv());
    assert_eq!(
        annotation(&c, annotations::NETWORK_PUBLISH),
        Some("8080:3000,5173:5173")
    );
}
