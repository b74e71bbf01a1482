//! Unit tests of the network rule: the engine's annotations may narrow the
//! admin policy's mode and lists, never widen them.

use super::*;
use crate::admin::network::{covered, NetLists};

const ALLOWLIST: &str = "version = 1\n[network]\nmode = \"allowlist\"\nallow = [\"*.github.com\", \"pypi.org:443\"]\ndeny = [\"gist.github.com\"]\n";

fn with_annotations(pairs: &[(&str, &str)]) -> Spec {
    let mut spec = engine_spec();
    let ann: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    spec.set_annotations(Some(ann));
    spec
}

#[test]
fn network_annotations_may_narrow_never_widen() {
    let mut spec = with_annotations(&[(annotations::NETWORK, "public")]);
    assert_eq!(
        err(&mut spec, &[admin(STRICT)]),
        "annotation run.claude-shim.network=\"public\" asks for network mode \"public\", more than the admin policy's \"none\""
    );
    let mut spec = with_annotations(&[(annotations::NETWORK, "none")]);
    run(&mut spec, &[admin(ALLOWLIST)]).unwrap();
    assert_eq!(spec.annotations().as_ref().unwrap()[annotations::NETWORK], "none");

    let narrower = r#"{"allow":["api.github.com","pypi.org:443"],"deny":["x.github.com"]}"#;
    let mut spec = with_annotations(&[
        (annotations::NETWORK, "allowlist"),
        (annotations::NETWORK_POLICY, narrower),
    ]);
    run(&mut spec, &[admin(ALLOWLIST)]).unwrap();
    let ann = spec.annotations().clone().unwrap();
    let lists: NetLists = serde_json::from_str(&ann[annotations::NETWORK_POLICY]).unwrap();
    assert_eq!(lists.allow, ["api.github.com", "pypi.org:443"]);
    assert_eq!(
        lists.deny,
        ["gist.github.com", "x.github.com"],
        "the admin's deny stays"
    );

    for wider in [
        r#"{"allow":["example.com"]}"#,
        r#"{"allow":["pypi.org"]}"#,
        r#"{"allow":["*.com"]}"#,
    ] {
        let mut spec = with_annotations(&[(annotations::NETWORK_POLICY, wider)]);
        let e = err(&mut spec, &[admin(ALLOWLIST)]);
        assert!(
            e.contains("which the admin policy does not") || e.contains("too broad"),
            "{wider}: {e}"
        );
    }
    let mut spec = with_annotations(&[(annotations::NETWORK, "wide")]);
    assert!(err(&mut spec, &[admin(STRICT)]).contains("is not none, allowlist or public"));
    let mut spec = with_annotations(&[(annotations::BEST_EFFORT_RESOURCES, "true")]);
    assert!(err(&mut spec, &[admin(STRICT)]).contains("every resource limit or none"));
}

#[test]
fn host_patterns_cover_as_the_allow_list_reads() {
    let covers = |outer: &str, inner: &str| covered(&[outer.to_owned()], inner);
    assert!(covers("*.github.com", "api.github.com"));
    assert!(covers("*.github.com", "*.api.github.com"));
    assert!(covers("*.github.com", "api.github.com:443"));
    assert!(!covers("*.github.com", "github.com"));
    assert!(!covers("*.github.com", "evilgithub.com"));
    assert!(covers("pypi.org", "pypi.org:443"));
    assert!(!covers("pypi.org:443", "pypi.org"));
    assert!(!covers("pypi.org:443", "pypi.org:80"));
    // Without a port an entry admits the web's ports, and more only by `*:port`.
    assert!(!covers("github.com", "github.com:22"));
    assert!(covered(&["github.com".into(), "*:22".into()], "github.com:22"));
    assert!(!covers("github.com", "*:22"));
    assert!(covered(&["*:22".into()], "*:22"));
}
