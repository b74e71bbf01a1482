//! The one-shot `sandbox --policy FILE` command reaches exactly the hosts its
//! policy lists, with ports published or not.

use std::collections::HashMap;

use claude_shim_e2e::*;

use crate::verify::{policy_file, workdir, VERIFY_ALLOWLIST};
use crate::world::World;

/// The one-shot command a user types: `sandbox --policy FILE -- curl ...`
/// reaches exactly the hosts on the list.
fn sandbox_reaches_exactly_the_listed_hosts(env: &Env, world: &World, name: &str, extra: &[&str]) {
    let policy = policy_file(env, name, VERIFY_ALLOWLIST);
    let work = workdir(env, name);
    let script = r#"
for u in http://pub.test/ http://api.wild.test/ http://blocked.wild.test/ http://wild.test/ \
         http://priv2.test/ http://meta.test/ http://198.20.123.2/ http://127.0.0.1:18080/; do
  echo "$u $(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$u")"
done
echo "body $(curl -s --max-time 5 http://api.wild.test/)"
echo "direct $(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --noproxy '*' http://198.20.123.2/)"
"#;
    let (p, w) = (policy.to_str().unwrap(), work.to_str().unwrap());
    let mut args = vec!["sandbox", "--policy", p, "--workdir", w];
    args.extend(extra);
    args.extend(["--", "sh", "-c", script]);
    let out = world.run(env, &args);
    assert!(
        out.status.success(),
        "sandbox: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = String::from_utf8_lossy(&out.stdout);
    let got: HashMap<&str, &str> = out.lines().filter_map(|l| l.split_once(' ')).collect();
    for (url, code) in [
        ("http://pub.test/", "200"),
        ("http://api.wild.test/", "200"),
        ("http://blocked.wild.test/", "403"),
        ("http://wild.test/", "403"),
        ("http://priv2.test/", "403"),
        ("http://meta.test/", "403"),
        ("http://198.20.123.2/", "403"),
        ("http://127.0.0.1:18080/", "000"),
        ("direct", "000"),
    ] {
        assert_eq!(got.get(url).copied(), Some(code), "{url} in {out}");
    }
    assert_eq!(got.get("body").copied(), Some("hello-pub"), "{out}");
}

#[test]
fn sandbox_with_a_policy_file_reaches_exactly_the_listed_hosts() {
    let world = World::new();
    sandbox_reaches_exactly_the_listed_hosts(&Env::new(), &world, "sb-allow", &[]);
    let (uid, gid) = test_user();
    sandbox_reaches_exactly_the_listed_hosts(&Env::as_user(uid, gid), &world, "rsb-allow", &[]);
}

/// A published port opens no way out: the same hosts and no others, with
/// the host's 18080 (which 18081 is published beside) still out of reach.
#[test]
fn a_published_port_opens_no_way_out() {
    let world = World::new();
    let publish = ["--publish", "18081:18080", "--publish", "8000"];
    sandbox_reaches_exactly_the_listed_hosts(&Env::new(), &world, "sb-publish", &publish);
    let (uid, gid) = test_user();
    sandbox_reaches_exactly_the_listed_hosts(&Env::as_user(uid, gid), &world, "rsb-publish", &publish);
}
