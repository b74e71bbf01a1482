//! Mode none (loopback only), and no mode at all (the spec's network as it is).

use claude_shim_e2e::*;
use serde_json::json;

use crate::container::{assert_all_gone, id_of, net_bundle, Net};
use crate::probes::Probes;
use crate::world::{output_of, World};

#[test]
fn none_has_loopback_only() {
    let world = World::new();
    let env = Env::new();
    let net = Net {
        mode: "none",
        policy: json!({}),
        host_tools: false,
    };
    let script = r#"
p links busybox ip -o link
p routes busybox ip route
p pub busybox nc -w 3 198.20.123.2 80
p host_lo busybox nc -w 3 127.0.0.1 18080
p own_lo sh -c 'busybox timeout 10 busybox nc -l -p 7000 -e echo hello-own-lo & i=0; until busybox nc -w 3 127.0.0.1 7000 2>/dev/null || [ $i -ge 50 ]; do i=$((i+1)); sleep 0.1; done'
p proxy busybox nc -w 3 127.0.0.1 3128
"#;
    let bundle = net_bundle(&env, &world, "none", Some(&net), script);
    let id = id_of("none");
    let out = world.ok(&env, &["run", "--bundle", bundle.to_str().unwrap(), &id]);
    let p = Probes::parse(&out);
    let (_, links) = p.get("links");
    assert!(
        links.contains("lo:") && links.contains("UP") && !links.contains("eth0"),
        "lo, up, alone: {links}"
    );
    assert_eq!(p.get("routes").1.trim(), "", "no routes");
    p.blocked("pub");
    p.blocked("host_lo");
    p.blocked("proxy");
    p.reached("own_lo", "hello-own-lo");
    assert_all_gone(&env, &id);
}

#[test]
fn no_annotation_keeps_the_spec_as_it_is() {
    let world = World::new();
    let env = Env::new();
    let bundle = net_bundle(&env, &world, "plain", None, "p links busybox ip -o link\nsleep 1\n");
    let id = id_of("plain");
    let run = world.wrap(env.command(&["run", "--detach", "--bundle", bundle.to_str().unwrap(), &id]));
    let out = output_of(run, env.dir.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let state = env.state(&id);
    assert!(
        state["annotations"].get("run.claude-shim.helpers").is_none(),
        "no helpers: {state}"
    );
    assert!(!env.root.join(".claude-shim").join(&id).join("network.json").exists());
    env.wait_status(&id, "stopped");
    env.ok(&["delete", &id]);
    assert_all_gone(&env, &id);
}
