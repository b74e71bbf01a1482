//! Many sandboxes at once, in every mode, sharing one world.

use std::sync::Arc;

use claude_shim_e2e::*;
use serde_json::json;

use crate::container::{assert_all_gone, id_of, net_bundle, Net};
use crate::probes::Probes;
use crate::world::World;

#[test]
fn twenty_sandboxes_with_networking_at_once() {
    let world = Arc::new(World::new());
    let env = Arc::new(Env::new());
    let modes = ["allowlist", "public", "none"];
    let script = r#"
p proxied sh -c 'http_proxy=http://127.0.0.1:3128 busybox wget -q -O - http://pub.test/'
p direct busybox wget -q -O - http://198.20.123.2/
p private busybox wget -q -O - http://10.123.1.3/
"#;
    let mut bundles = Vec::new();
    for m in modes {
        let net = Net {
            mode: m,
            policy: json!({"allow": ["pub.test"]}),
            host_tools: false,
        };
        bundles.push(net_bundle(&env, &world, &format!("many-{m}"), Some(&net), script));
    }
    let handles: Vec<_> = (0..20)
        .map(|i| {
            let (world, env) = (world.clone(), env.clone());
            let bundle = bundles[i % 3].clone();
            let mode = modes[i % 3];
            std::thread::spawn(move || {
                let id = id_of(&format!("many{i}"));
                let out = world.run(&env, &["run", "--bundle", bundle.to_str().unwrap(), &id]);
                (id, mode, out)
            })
        })
        .collect();
    for h in handles {
        let (id, mode, out) = h.join().unwrap();
        assert!(
            out.status.success(),
            "{id} ({mode}): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let p = Probes::parse(&String::from_utf8_lossy(&out.stdout));
        match mode {
            "allowlist" => {
                p.reached("proxied", "hello-pub");
                p.blocked("direct");
            }
            "public" => {
                p.blocked("proxied");
                p.reached("direct", "hello-pub");
            }
            _ => {
                p.blocked("proxied");
                p.blocked("direct");
            }
        }
        p.blocked("private");
        assert_all_gone(&env, &id);
    }
}
