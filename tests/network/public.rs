//! Mode public: public addresses only, through pasta, behind a filter the
//! container cannot change. The script and its checks serve the rootless test too.

use claude_shim_e2e::*;
use serde_json::{json, Value};

use crate::container::{assert_all_gone, id_of, net_bundle, Net};
use crate::probes::Probes;
use crate::world::World;

pub(crate) const PUBLIC_SCRIPT: &str = r#"
p links busybox ip -o link
p pub busybox wget -q -O - http://198.20.123.2:80/
p pub8080 busybox wget -q -O - http://198.20.123.2:8080/
p pub6 busybox wget -q -O - http://[2a01:123::2]:80/
p dns busybox nslookup pub.test
p pub_name busybox wget -q -O - http://pub.test/
p priv2 busybox wget -q -O - http://10.123.1.3:80/
p punched busybox wget -q -O - http://10.123.1.2:80/
p punched_other_port busybox wget -q -O - http://10.123.1.2:81/
p gateway busybox wget -q -O - http://10.123.0.1:80/
p neighbour busybox wget -q -O - http://10.123.0.3:80/
p metadata busybox wget -q -O - http://169.254.169.254:80/
p host_lo busybox wget -q -O - http://127.0.0.1:18080/
p host_addr busybox wget -q -O - http://10.123.0.2:18080/
p host_via_gw busybox wget -q -O - http://10.123.0.1:18080/
p gateway6 busybox wget -q -O - http://[fd12:3::1]:80/
p priv6 busybox wget -q -O - http://[fd12:9::2]:80/
p ping busybox ping -c 1 -W 2 198.20.123.2
p nft_flush $L /usr/sbin/nft flush ruleset
p nft_delete $L /usr/sbin/nft delete table inet claude_shim
p route_del busybox ip route del default
p route_add busybox ip route add 10.123.1.3/32 dev eth0
p link_add $L /usr/bin/ip link add d1 type veth peer name d2
p link_down busybox ip link set eth0 down
p unshare_net busybox unshare -n true
p userns_nft $L /usr/bin/unshare -U --keep-caps /bin/sh -c "grep CapEff /proc/self/status; $L /usr/sbin/nft flush ruleset"
p priv2_after busybox wget -q -O - http://10.123.1.3:80/
p pub_after busybox wget -q -O - http://198.20.123.2:80/
"#;

pub(crate) fn public_policy() -> Value {
    json!({"allow_cidrs": ["10.123.1.2/32:80"], "deny": ["198.20.123.2:8080"]})
}

pub(crate) fn check_public(p: &Probes) {
    let (_, links) = p.get("links");
    assert!(links.contains("eth0"), "pasta's interface: {links}");
    p.reached("pub", "hello-pub");
    p.blocked("pub8080");
    p.reached("pub6", "hello-pub6");
    p.reached("dns", "198.20.123.2");
    p.reached("pub_name", "hello-pub");
    for blocked in [
        "priv2",
        "punched_other_port",
        "gateway",
        "neighbour",
        "metadata",
        "host_lo",
        "host_addr",
        "host_via_gw",
        "gateway6",
        "priv6",
        "ping",
    ] {
        p.blocked(blocked);
    }
    p.reached("punched", "hello-priv");
    // Tampering from inside: every attempt refused, the filter still there after.
    for t in [
        "nft_flush",
        "nft_delete",
        "route_del",
        "route_add",
        "link_add",
        "link_down",
        "unshare_net",
    ] {
        p.failed_with(t, "ermitted");
    }
    // Root with every capability in a new user namespace is still nobody to
    // the network namespace, which that user namespace does not own.
    p.failed_with("userns_nft", "CapEff: 000001ffffffffff");
    p.failed_with("userns_nft", "ermitted");
    p.blocked("priv2_after");
    p.reached("pub_after", "hello-pub");
}

#[test]
fn public_reaches_public_addresses_only_and_its_filter_cannot_be_changed_from_inside() {
    let world = World::new();
    let env = Env::new();
    let net = Net {
        mode: "public",
        policy: public_policy(),
        host_tools: true,
    };
    let bundle = net_bundle(&env, &world, "public", Some(&net), PUBLIC_SCRIPT);
    let id = id_of("public");
    let out = world.ok(&env, &["run", "--bundle", bundle.to_str().unwrap(), &id]);
    check_public(&Probes::parse(&out));
    assert_all_gone(&env, &id);
}
