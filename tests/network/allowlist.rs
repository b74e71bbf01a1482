//! Mode allowlist: the proxy admits exactly the listed hosts and logs each
//! request. The script and its checks serve the rootless test too.

use claude_shim_e2e::*;
use serde_json::{json, Value};

use crate::container::{assert_all_gone, id_of, net_bundle, proxy_log, ForceDelete, Net};
use crate::probes::Probes;
use crate::world::World;

pub(crate) const ALLOWLIST_SCRIPT: &str = r#"
p env_http sh -c 'echo $HTTP_PROXY $HTTPS_PROXY $ALL_PROXY $NO_PROXY'
p links busybox ip -o link
p direct_pub busybox nc -w 3 198.20.123.2 80
p direct_v6 busybox nc -w 3 2a01:123::2 80
p dns_inside busybox nslookup pub.test 10.123.0.53
p host_lo busybox nc -w 3 127.0.0.1 18080
p wget_pub busybox wget -q -O - http://pub.test/
p wget_wild busybox wget -q -O - http://API.wild.test./
p wget_deny busybox wget -q -O - http://blocked.wild.test/
p wget_apex busybox wget -q -O - http://wild.test/
p wget_port busybox wget -q -O - http://ports.test:8080/
p wget_port_wrong busybox wget -q -O - http://ports.test/
p wget_ip busybox wget -q -O - http://198.20.123.2/
p wget_rebind busybox wget -q -O - http://rebind.test:18080/
p wget_meta busybox wget -q -O - http://meta.test/
p wget_priv busybox wget -q -O - http://priv.test/
p wget_priv2 busybox wget -q -O - http://priv2.test/
p connect_pub sh -c 'printf "CONNECT pub.test:80 HTTP/1.1\r\nHost: pub.test:80\r\n\r\nGET / HTTP/1.0\r\n\r\n" | busybox nc -w 5 127.0.0.1 3128'
p connect_lo sh -c 'printf "CONNECT 127.0.0.1:18080 HTTP/1.1\r\n\r\n" | busybox nc -w 5 127.0.0.1 3128'
p connect_localhost sh -c 'printf "CONNECT localhost:18080 HTTP/1.1\r\n\r\n" | busybox nc -w 5 127.0.0.1 3128'
p port_default sh -c 'printf "CONNECT pub.test:8080 HTTP/1.1\r\n\r\n" | busybox nc -w 5 127.0.0.1 3128'
p port_any_host sh -c 'printf "CONNECT pub.test:8081 HTTP/1.1\r\n\r\n" | busybox nc -w 5 127.0.0.1 3128'
p host_mismatch sh -c 'printf "GET http://pub.test/ HTTP/1.1\r\nHost: priv2.test\r\n\r\n" | busybox nc -w 5 127.0.0.1 3128'
p pipelined sh -c 'printf "GET http://pub.test/ HTTP/1.1\r\nHost: pub.test\r\n\r\nGET http://priv2.test/ HTTP/1.1\r\nHost: priv2.test\r\n\r\n" | busybox nc -w 5 127.0.0.1 3128'
p nat64_meta sh -c 'printf "CONNECT [64:ff9b::a9fe:a9fe]:80 HTTP/1.1\r\n\r\n" | busybox nc -w 5 127.0.0.1 3128'
p sixtofour_priv sh -c 'printf "CONNECT [2002:a7b:102::1]:80 HTTP/1.1\r\n\r\n" | busybox nc -w 5 127.0.0.1 3128'
p socks_pub $L /usr/bin/curl -sS --max-time 5 -x socks5h://127.0.0.1:1080 http://pub.test/
p socks_deny $L /usr/bin/curl -sS --max-time 5 -x socks5h://127.0.0.1:1080 http://blocked.wild.test/
p socks_ip $L /usr/bin/curl -sS --max-time 5 -x socks5://127.0.0.1:1080 http://198.20.123.2/
p curl_https_proxy_env $L /usr/bin/curl -sS --max-time 5 --proxytunnel http://ports.test:8080/
"#;

pub(crate) fn allowlist_policy() -> Value {
    json!({
        "allow": ["pub.test", "*.wild.test", "ports.test:8080", "rebind.test:18080", "meta.test", "priv.test", "priv2.test", "*:8081"],
        "deny": ["blocked.wild.test"],
        "allow_cidrs": ["10.123.1.2/32:80"],
    })
}

pub(crate) fn check_allowlist(p: &Probes) {
    p.reached(
        "env_http",
        "http://127.0.0.1:3128 http://127.0.0.1:3128 socks5h://127.0.0.1:1080 localhost,127.0.0.1,::1",
    );
    let (_, links) = p.get("links");
    assert!(
        links.contains("lo:") && !links.contains("eth0"),
        "loopback only: {links}"
    );
    p.blocked("direct_pub");
    p.blocked("direct_v6");
    p.blocked("dns_inside");
    p.blocked("host_lo");
    p.reached("wget_pub", "hello-pub");
    p.reached("wget_wild", "hello-pub");
    p.failed_with("wget_deny", "403");
    p.failed_with("wget_apex", "403");
    p.reached("wget_port", "hello-pub8080");
    p.failed_with("wget_port_wrong", "403");
    p.failed_with("wget_ip", "403");
    p.failed_with("wget_rebind", "403");
    p.failed_with("wget_meta", "403");
    p.reached("wget_priv", "hello-priv");
    p.failed_with("wget_priv2", "403");
    p.reached("connect_pub", "200 Connection established");
    p.reached("connect_pub", "hello-pub");
    let (_, lo) = p.get("connect_lo");
    assert!(
        lo.contains("403") && !lo.contains("hello-"),
        "CONNECT to the host's loopback: {lo}"
    );
    let (_, lh) = p.get("connect_localhost");
    assert!(
        lh.contains("403") && !lh.contains("hello-"),
        "CONNECT to localhost: {lh}"
    );
    // An entry without a port admits 443 and 80; `*:8081` adds 8081 for
    // every allowed host (nothing listens there: the proxy's 502 says it tried).
    p.refused_with("port_default", "403", "port 8080 is not allowed");
    p.refused_with("port_any_host", "502", "pub.test:8081");
    // Plain http: the Host header names the target, and one request per connection.
    p.refused_with("host_mismatch", "400", "names another host");
    p.refused_with("pipelined", "400", "one request per connection");
    // NAT64 and 6to4 addresses are judged by the IPv4 address they carry.
    p.refused_with("nat64_meta", "403", "NAT64 form of 169.254.0.0/16");
    p.refused_with("sixtofour_priv", "403", "6to4 form of 10.0.0.0/8");
    p.reached("socks_pub", "hello-pub");
    p.blocked("socks_deny");
    p.blocked("socks_ip");
    p.reached("curl_https_proxy_env", "hello-pub8080");
}

#[test]
fn allowlist_admits_exactly_the_listed_hosts_and_logs_each_request() {
    let world = World::new();
    let env = Env::new();
    let net = Net {
        mode: "allowlist",
        policy: allowlist_policy(),
        host_tools: true,
    };
    let bundle = net_bundle(&env, &world, "allow", Some(&net), ALLOWLIST_SCRIPT);
    let id = id_of("allow");
    let _cleanup = ForceDelete(&env, id.clone());
    let out = world.ok(&env, &["run", "--keep", "--bundle", bundle.to_str().unwrap(), &id]);
    let p = Probes::parse(&out);
    check_allowlist(&p);

    // One line per request: container, client, host, port, decision, reason.
    let log = proxy_log(&env, &id);
    let requests: Vec<&Value> = log.iter().filter(|l| l.get("decision").is_some()).collect();
    for r in &requests {
        assert_eq!(r["container"], id.as_str(), "{r}");
        assert!(r["client"].as_str().unwrap().starts_with("127.0.0.1:"), "{r}");
        assert!(r["reason"].as_str().is_some_and(|s| !s.is_empty()), "{r}");
        assert!(r["time"].as_str().is_some(), "{r}");
    }
    let find = |host: &str, port: u64| -> &Value {
        requests
            .iter()
            .find(|r| r["host"] == host && r["port"] == port)
            .unwrap_or_else(|| panic!("no log line for {host}:{port} in {requests:?}"))
    };
    let deny = find("blocked.wild.test", 80);
    assert_eq!(deny["decision"], "deny");
    assert_eq!(deny["reason"], "denied by blocked.wild.test");
    assert_eq!(find("api.wild.test", 80)["reason"], "allowed by *.wild.test");
    assert_eq!(find("api.wild.test", 80)["address"], "198.20.123.2:80");
    assert_eq!(find("wild.test", 80)["reason"], "not on the allowlist");
    assert_eq!(find("ports.test", 80)["decision"], "deny");
    assert_eq!(find("198.20.123.2", 80)["decision"], "deny");
    let rebind = find("rebind.test", 18080);
    assert_eq!(rebind["decision"], "deny");
    assert!(
        rebind["reason"]
            .as_str()
            .unwrap()
            .contains("127.0.0.1 is in blocked range 127.0.0.0/8"),
        "{rebind}"
    );
    assert!(find("meta.test", 80)["reason"]
        .as_str()
        .unwrap()
        .contains("169.254.169.254"));
    assert_eq!(find("priv.test", 80)["decision"], "allow");
    assert_eq!(find("127.0.0.1", 18080)["decision"], "deny");
    assert_eq!(find("localhost", 18080)["decision"], "deny");
    let socks: Vec<_> = requests.iter().filter(|r| r["proto"] == "socks5").collect();
    assert_eq!(socks.len(), 3, "three SOCKS5 requests: {socks:?}");
    // 11 by wget, 3 CONNECT by nc, 3 SOCKS5 and 1 CONNECT by curl, and the
    // proxy-rule probes: 4 CONNECT, a Host mismatch and a pipelined pair.
    assert_eq!(requests.len(), 24, "one line per request: {requests:#?}");
    assert_eq!(
        find("pub.test", 8080)["reason"],
        "port 8080 is not allowed: an entry without a port admits 443 and 80; add pub.test:8080 or *:8080"
    );
    assert_eq!(find("pub.test", 8081)["reason"], "allowed by pub.test");
    env.ok(&["delete", &id]);
    assert_all_gone(&env, &id);
}
