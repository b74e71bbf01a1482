//! Network modes end to end: real containers, real pasta, nft and proxy,
//! against a small world the tests build for themselves. Nothing here reaches
//! an address outside it: claude-shim runs inside a test network namespace
//! ("host", 10.123.0.2/24, fd12:3::2/64) whose only link is a veth to a second
//! one ("gateway", 10.123.0.1 and fd12:3::1) that holds every peer:
//!
//!   198.18.123.2 :80 :8080, 2001:db8:123::2 :80   a "public" server (RFC 2544 / 3849 test ranges)
//!   10.123.1.2 :80 :81, 10.123.1.3 :80           private servers
//!   10.123.0.1 :80, 10.123.0.3 :80, fd12:3::1 :80 the gateway and a neighbour on the host's subnet
//!   fd12:9::2 :80                                  a private IPv6 server
//!   169.254.169.254 :80                            a metadata service
//!   10.123.0.53 :53/udp                            the resolver (the host's resolv.conf points at it)
//!   host's 0.0.0.0:18080                           a service on the host, loopback included
//!
//! claude-shim sees that world's resolv.conf and hosts through a private
//! mount namespace per invocation. Every namespace (and with it every veth)
//! is deleted when a test ends.

use std::collections::HashMap;
use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use claude_shim_e2e::*;
use serde_json::{json, Value};

const SERVERS: &[(&str, &str, &str)] = &[
    // (namespace, address, body)
    ("g", "198.18.123.2:80", "hello-pub"),
    ("g", "198.18.123.2:8080", "hello-pub8080"),
    ("g", "[2001:db8:123::2]:80", "hello-pub6"),
    ("g", "10.123.1.2:80", "hello-priv"),
    ("g", "10.123.1.2:81", "hello-priv81"),
    ("g", "10.123.1.3:80", "hello-priv2"),
    ("g", "10.123.0.1:80", "hello-gateway"),
    ("g", "10.123.0.3:80", "hello-neighbour"),
    ("g", "[fd12:3::1]:80", "hello-gateway6"),
    ("g", "[fd12:9::2]:80", "hello-priv6"),
    ("g", "169.254.169.254:80", "hello-metadata"),
    ("h", "0.0.0.0:18080", "hello-host-loopback"),
];

/// What the world's resolver answers (A records; AAAA queries get no answer).
const NAMES: &[(&str, [u8; 4])] = &[
    ("pub.test", [198, 18, 123, 2]),
    ("api.wild.test", [198, 18, 123, 2]),
    ("blocked.wild.test", [198, 18, 123, 2]),
    ("wild.test", [198, 18, 123, 2]),
    ("ports.test", [198, 18, 123, 2]),
    ("priv.test", [10, 123, 1, 2]),
    ("priv2.test", [10, 123, 1, 3]),
    ("rebind.test", [127, 0, 0, 1]),
    ("meta.test", [169, 254, 169, 254]),
];

fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The test world: two network namespaces, the peers in them, the resolver.
struct World {
    host: String,
    gateway: String,
    dir: tempfile::TempDir,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl World {
    fn new() -> Self {
        require_root();
        static N: AtomicU32 = AtomicU32::new(0);
        let tag = format!("csn{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst));
        let (host, gateway) = (format!("{tag}-h"), format!("{tag}-g"));
        let dir = tempfile::Builder::new().prefix("claude-shim-world-").tempdir().unwrap();
        fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        fs::write(dir.path().join("resolv.conf"), "nameserver 10.123.0.53\n").unwrap();
        fs::write(dir.path().join("hosts"), "127.0.0.1 localhost\n::1 localhost\n").unwrap();
        let mut w = World {
            host,
            gateway,
            dir,
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
        };
        let (h, g) = (w.host.as_str(), w.gateway.as_str());
        sh(&["ip", "netns", "add", h]);
        sh(&["ip", "netns", "add", g]);
        // Created inside the namespaces, so parallel tests never share a name.
        sh(&[
            "ip", "-n", h, "link", "add", "h0", "type", "veth", "peer", "name", "g0", "netns", g,
        ]);
        for (ns, cmds) in [
            (
                h,
                vec![
                    "link set lo up",
                    "link set h0 up",
                    "addr add 10.123.0.2/24 dev h0",
                    "-6 addr add fd12:3::2/64 dev h0 nodad",
                    "route add default via 10.123.0.1",
                    "-6 route add default via fd12:3::1",
                ],
            ),
            (
                g,
                vec![
                    "link set lo up",
                    "link set g0 up",
                    "addr add 10.123.0.1/24 dev g0",
                    "addr add 10.123.0.3/24 dev g0",
                    "addr add 10.123.0.53/24 dev g0",
                    "-6 addr add fd12:3::1/64 dev g0 nodad",
                    "addr add 198.18.123.2/32 dev lo",
                    "addr add 10.123.1.2/32 dev lo",
                    "addr add 10.123.1.3/32 dev lo",
                    "addr add 169.254.169.254/32 dev lo",
                    "-6 addr add 2001:db8:123::2/128 dev lo nodad",
                    "-6 addr add fd12:9::2/128 dev lo nodad",
                ],
            ),
        ] {
            for c in cmds {
                let mut args = vec!["ip", "-n", ns];
                args.extend(c.split(' '));
                sh(&args);
            }
        }
        for (ns, addr, body) in SERVERS {
            let ns = if *ns == "g" { w.gateway.clone() } else { w.host.clone() };
            w.serve_http(&ns, addr.parse().unwrap(), body);
        }
        w.serve_dns();
        w
    }

    fn ns_path(name: &str) -> PathBuf {
        Path::new("/run/netns").join(name)
    }

    /// A thread whose sockets live in namespace `ns`.
    fn in_ns(&mut self, ns: &str, f: impl FnOnce(Arc<AtomicBool>) + Send + 'static) {
        let path = Self::ns_path(ns);
        let stop = self.stop.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        self.threads.push(std::thread::spawn(move || {
            let f_ns = fs::File::open(&path).unwrap();
            // SAFETY: setns on this thread only; a network namespace may differ per thread.
            let r = unsafe { libc::setns(f_ns.as_raw_fd(), libc::CLONE_NEWNET) };
            tx.send(r).unwrap();
            if r == 0 {
                f(stop);
            }
        }));
        assert_eq!(rx.recv().unwrap(), 0, "setns into {ns}");
    }

    /// Answers every connection with `body`, then half-closes and drains.
    fn serve_http(&mut self, ns: &str, addr: SocketAddr, body: &'static str) {
        let (tx, rx) = std::sync::mpsc::channel();
        self.in_ns(ns, move |stop| {
            let l = TcpListener::bind(addr);
            tx.send(l.as_ref().map(|_| ()).map_err(|e| e.to_string())).unwrap();
            let Ok(l) = l else { return };
            l.set_nonblocking(true).unwrap();
            while !stop.load(Ordering::SeqCst) {
                match l.accept() {
                    Ok((mut s, _)) => {
                        std::thread::spawn(move || {
                            let _ = s.set_nonblocking(false);
                            let text = format!("{body}\n");
                            let _ = write!(
                                s,
                                "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                                text.len()
                            );
                            let _ = s.shutdown(std::net::Shutdown::Write);
                            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                            let mut sink = [0u8; 4096];
                            while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        if let Err(e) = rx.recv().unwrap() {
            panic!("bind test server {addr} in {ns}: {e}");
        }
    }

    /// A resolver for NAMES at 10.123.0.53:53.
    fn serve_dns(&mut self) {
        let g = self.gateway.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        self.in_ns(&g, move |stop| {
            let s = UdpSocket::bind("10.123.0.53:53").unwrap();
            tx.send(()).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
            let mut buf = [0u8; 512];
            while !stop.load(Ordering::SeqCst) {
                let Ok((n, from)) = s.recv_from(&mut buf) else { continue };
                if let Some(answer) = dns_answer(&buf[..n]) {
                    let _ = s.send_to(&answer, from);
                }
            }
        });
        rx.recv().expect("the test resolver binds 10.123.0.53:53");
    }

    /// `env.command(args)`, run inside the world: the host namespace, the world's resolv.conf and hosts.
    fn wrap(&self, inner: Command) -> Command {
        let mut c = Command::new("unshare");
        c.args(["-m", "--propagation", "private", "--", "sh", "-c"]);
        c.arg(r#"mount --bind "$1" /etc/resolv.conf && mount --bind "$2" /etc/hosts && n=$3 && shift 3 && exec nsenter --net="$n" -- "$@""#);
        c.arg("sh")
            .arg(self.dir.path().join("resolv.conf"))
            .arg(self.dir.path().join("hosts"))
            .arg(Self::ns_path(&self.host));
        c.arg(inner.get_program()).args(inner.get_args());
        for (k, v) in inner.get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        c
    }

    fn run(&self, env: &Env, args: &[&str]) -> Output {
        self.run_with(env, args, &[])
    }

    fn run_with(&self, env: &Env, args: &[&str], vars: &[(&str, &str)]) -> Output {
        let mut c = self.wrap(env.command(args));
        for (k, v) in vars {
            c.env(k, v);
        }
        output_of(c, env.dir.path())
    }

    fn ok(&self, env: &Env, args: &[&str]) -> String {
        let out = self.run(env, args);
        assert!(
            out.status.success(),
            "claude-shim {args:?} failed with {:?}\nstdout: {}\nstderr: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        for ns in [&self.host, &self.gateway] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// Runs with stdio through files (a detached container keeps pipes open).
fn output_of(mut c: Command, dir: &Path) -> Output {
    let out_path = dir.join(format!("{}.out", unique_id("w")));
    let err_path = out_path.with_extension("err");
    let status = c
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out_path).unwrap())
        .stderr(fs::File::create(&err_path).unwrap())
        .status()
        .unwrap();
    let o = Output {
        status,
        stdout: fs::read(&out_path).unwrap(),
        stderr: fs::read(&err_path).unwrap(),
    };
    let _ = fs::remove_file(&out_path);
    let _ = fs::remove_file(&err_path);
    o
}

/// A DNS answer for a query (RFC 1035 4.1): A records from NAMES, no data
/// for other types of a known name, NXDOMAIN otherwise.
fn dns_answer(q: &[u8]) -> Option<Vec<u8>> {
    if q.len() < 12 {
        return None;
    }
    let mut i = 12;
    let mut labels = Vec::new();
    while i < q.len() && q[i] != 0 {
        let l = q[i] as usize;
        labels.push(String::from_utf8_lossy(q.get(i + 1..i + 1 + l)?).to_ascii_lowercase());
        i += 1 + l;
    }
    let qend = i + 5;
    let qtype = u16::from_be_bytes([*q.get(i + 1)?, *q.get(i + 2)?]);
    let name = labels.join(".");
    let addr = NAMES.iter().find(|(n, _)| *n == name).map(|(_, a)| *a);
    let mut r = q[..2].to_vec();
    let rcode = if addr.is_some() { 0 } else { 3 };
    r.extend_from_slice(&[0x81, 0x80 | rcode, 0, 1]);
    let answer = addr.filter(|_| qtype == 1);
    r.extend_from_slice(&[0, answer.is_some() as u8, 0, 0, 0, 0]);
    r.extend_from_slice(q.get(12..qend)?);
    if let Some(a) = answer {
        r.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4]);
        r.extend_from_slice(&a);
    }
    Some(r)
}

/// The shell function the probe scripts use: `p NAME CMD...` prints
/// `@@NAME RC OUTPUT` on one line.
const PROBE_FN: &str = r#"p() { n=$1; shift; o=$(busybox timeout 20 "$@" 2>&1 </dev/null); r=$?; echo "@@$n $r $(echo $o | tr -d '\r' | tr '\n' ' ')"; }
L="/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 --library-path /usr/lib/x86_64-linux-gnu"
"#;

struct Probes(HashMap<String, (i32, String)>);

impl Probes {
    fn parse(stdout: &str) -> Self {
        let mut m = HashMap::new();
        for line in stdout.lines().filter_map(|l| l.strip_prefix("@@")) {
            let mut parts = line.splitn(3, ' ');
            let name = parts.next().unwrap().to_owned();
            let rc: i32 = parts.next().unwrap_or("-1").parse().unwrap_or(-1);
            m.insert(name, (rc, parts.next().unwrap_or_default().to_owned()));
        }
        Probes(m)
    }

    fn get(&self, name: &str) -> &(i32, String) {
        self.0
            .get(name)
            .unwrap_or_else(|| panic!("probe {name} did not run: {:?}", self.0))
    }

    /// Succeeded and printed `want`.
    fn reached(&self, name: &str, want: &str) {
        let (rc, out) = self.get(name);
        assert!(
            *rc == 0 && out.contains(want),
            "probe {name} should reach {want}: rc {rc}, {out:?}"
        );
    }

    /// Failed, and no test server answered.
    fn blocked(&self, name: &str) {
        let (rc, out) = self.get(name);
        assert!(
            *rc != 0 && !out.contains("hello-"),
            "probe {name} should be blocked: rc {rc}, {out:?}"
        );
    }

    /// Failed with `want` in its output.
    fn failed_with(&self, name: &str, want: &str) {
        let (rc, out) = self.get(name);
        assert!(
            *rc != 0 && out.contains(want),
            "probe {name} should fail with {want:?}: rc {rc}, {out:?}"
        );
    }
}

struct Net<'a> {
    mode: &'a str,
    policy: Value,
    host_tools: bool,
}

/// A bundle running `script` (after PROBE_FN) in network mode `net`.
fn net_bundle(env: &Env, world: &World, name: &str, net: Option<&Net<'_>>, script: &str) -> PathBuf {
    let resolv = world.dir.path().join("resolv.conf");
    let script = format!("{PROBE_FN}{script}");
    env.bundle(name, |v| {
        set_args(v, &["sh", "-c", &script]);
        with_tmp(v);
        let ns = v["linux"]["namespaces"].as_array_mut().unwrap();
        if !ns.iter().any(|n| n["type"] == "network") {
            ns.push(json!({"type": "network"}));
        }
        let mounts = v["mounts"].as_array_mut().unwrap();
        mounts.push(
            json!({"destination": "/etc/resolv.conf", "type": "bind", "source": resolv, "options": ["bind", "ro"]}),
        );
        if net.is_some_and(|n| n.host_tools) {
            // curl, nft and ip of the host, run through its loader: the busybox rootfs has no libc.
            mounts.push(json!({"destination": "/usr", "type": "bind", "source": "/usr", "options": ["rbind", "ro"]}));
        }
        if let Some(net) = net {
            v["annotations"] = json!({
                "run.claude-shim.network": net.mode,
                "run.claude-shim.network.policy": net.policy.to_string(),
            });
        }
    })
}

/// Deletes a kept container even when the test fails half-way.
struct ForceDelete<'a>(&'a Env, String);

impl Drop for ForceDelete<'_> {
    fn drop(&mut self) {
        let _ = self.0.run(&["delete", "--force", &self.1]);
    }
}

fn id_of(prefix: &str) -> String {
    unique_id(prefix)
}

/// Pids of processes (pasta, helpers) whose command line names the container.
fn helper_processes(id: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        if e.file_name().to_string_lossy().parse::<u32>().is_err() {
            continue;
        }
        let cmd = fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if (cmd.contains("__network") || cmd.contains("pasta")) && cmd.contains(id) {
            out.push(format!("{} {cmd}", e.file_name().to_string_lossy()));
        }
    }
    out
}

/// `wget URL` inside a running container.
fn fetch(env: &Env, id: &str, url: &str) -> Output {
    env.run(&[
        "exec", id, "busybox", "timeout", "10", "busybox", "wget", "-q", "-O", "-", url,
    ])
}

fn fetch_ok(env: &Env, id: &str, url: &str) -> String {
    let out = fetch(env, id, url);
    assert!(
        out.status.success(),
        "wget {url} in {id}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn assert_all_gone(env: &Env, id: &str) {
    env.assert_no_leaks(id);
    let left = helper_processes(id);
    assert!(left.is_empty(), "helpers of {id} left running: {left:?}");
}

/// The pid a state's helpers annotation gives `name`, and whether it is marked exited.
fn helper_pid(state: &Value, name: &str) -> (i32, bool) {
    let text = state["annotations"]["run.claude-shim.helpers"]
        .as_str()
        .unwrap_or_else(|| panic!("no helpers in state {state}"));
    let entry = text
        .split(',')
        .find_map(|e| e.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in helpers {text:?}"));
    let exited = entry.ends_with("(exited)");
    (entry.trim_end_matches("(exited)").parse().unwrap(), exited)
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn proxy_log(env: &Env, id: &str) -> Vec<Value> {
    let path = env.root.join(".claude-shim").join(id).join("proxy.log");
    fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("log line {l:?}: {e}")))
        .collect()
}

const ALLOWLIST_SCRIPT: &str = r#"
p env_http sh -c 'echo $HTTP_PROXY $HTTPS_PROXY $ALL_PROXY $NO_PROXY'
p links busybox ip -o link
p direct_pub busybox nc -w 3 198.18.123.2 80
p direct_v6 busybox nc -w 3 2001:db8:123::2 80
p dns_inside busybox nslookup pub.test 10.123.0.53
p host_lo busybox nc -w 3 127.0.0.1 18080
p wget_pub busybox wget -q -O - http://pub.test/
p wget_wild busybox wget -q -O - http://API.wild.test./
p wget_deny busybox wget -q -O - http://blocked.wild.test/
p wget_apex busybox wget -q -O - http://wild.test/
p wget_port busybox wget -q -O - http://ports.test:8080/
p wget_port_wrong busybox wget -q -O - http://ports.test/
p wget_ip busybox wget -q -O - http://198.18.123.2/
p wget_rebind busybox wget -q -O - http://rebind.test:18080/
p wget_meta busybox wget -q -O - http://meta.test/
p wget_priv busybox wget -q -O - http://priv.test/
p wget_priv2 busybox wget -q -O - http://priv2.test/
p connect_pub sh -c 'printf "CONNECT pub.test:80 HTTP/1.1\r\nHost: pub.test:80\r\n\r\nGET / HTTP/1.0\r\n\r\n" | busybox nc -w 5 127.0.0.1 3128'
p connect_lo sh -c 'printf "CONNECT 127.0.0.1:18080 HTTP/1.1\r\n\r\n" | busybox nc -w 5 127.0.0.1 3128'
p connect_localhost sh -c 'printf "CONNECT localhost:18080 HTTP/1.1\r\n\r\n" | busybox nc -w 5 127.0.0.1 3128'
p socks_pub $L /usr/bin/curl -sS --max-time 5 -x socks5h://127.0.0.1:1080 http://pub.test/
p socks_deny $L /usr/bin/curl -sS --max-time 5 -x socks5h://127.0.0.1:1080 http://blocked.wild.test/
p socks_ip $L /usr/bin/curl -sS --max-time 5 -x socks5://127.0.0.1:1080 http://198.18.123.2/
p curl_https_proxy_env $L /usr/bin/curl -sS --max-time 5 --proxytunnel http://ports.test:8080/
"#;

fn allowlist_policy() -> Value {
    json!({
        "allow": ["pub.test", "*.wild.test", "ports.test:8080", "rebind.test", "meta.test", "priv.test", "priv2.test"],
        "deny": ["blocked.wild.test"],
        "allow_cidrs": ["10.123.1.2/32:80"],
    })
}

fn check_allowlist(p: &Probes) {
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
    assert_eq!(find("api.wild.test", 80)["address"], "198.18.123.2:80");
    assert_eq!(find("wild.test", 80)["reason"], "not on the allowlist");
    assert_eq!(find("ports.test", 80)["decision"], "deny");
    assert_eq!(find("198.18.123.2", 80)["decision"], "deny");
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
    // 11 by wget, 3 CONNECT by nc, 3 SOCKS5 and 1 CONNECT by curl.
    assert_eq!(requests.len(), 18, "one line per request: {requests:#?}");
    env.ok(&["delete", &id]);
    assert_all_gone(&env, &id);
}

const PUBLIC_SCRIPT: &str = r#"
p links busybox ip -o link
p pub busybox wget -q -O - http://198.18.123.2:80/
p pub8080 busybox wget -q -O - http://198.18.123.2:8080/
p pub6 busybox wget -q -O - http://[2001:db8:123::2]:80/
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
p ping busybox ping -c 1 -W 2 198.18.123.2
p nft_flush $L /usr/sbin/nft flush ruleset
p nft_delete $L /usr/sbin/nft delete table inet claude_shim
p route_del busybox ip route del default
p route_add busybox ip route add 10.123.1.3/32 dev eth0
p link_add $L /usr/bin/ip link add d1 type veth peer name d2
p link_down busybox ip link set eth0 down
p unshare_net busybox unshare -n true
p userns_nft $L /usr/bin/unshare -U --keep-caps /bin/sh -c "grep CapEff /proc/self/status; $L /usr/sbin/nft flush ruleset"
p priv2_after busybox wget -q -O - http://10.123.1.3:80/
p pub_after busybox wget -q -O - http://198.18.123.2:80/
"#;

fn public_policy() -> Value {
    json!({"allow_cidrs": ["10.123.1.2/32:80"], "deny": ["198.18.123.2:8080"]})
}

fn check_public(p: &Probes) {
    let (_, links) = p.get("links");
    assert!(links.contains("eth0"), "pasta's interface: {links}");
    p.reached("pub", "hello-pub");
    p.blocked("pub8080");
    p.reached("pub6", "hello-pub6");
    p.reached("dns", "198.18.123.2");
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
p pub busybox nc -w 3 198.18.123.2 80
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

#[test]
fn create_start_path_as_engines_drive_it() {
    let world = World::new();
    let env = Env::new();
    let net = Net {
        mode: "allowlist",
        policy: json!({"allow": ["pub.test"]}),
        host_tools: false,
    };
    let bundle = net_bundle(&env, &world, "engine", Some(&net), "sleep 1000\n");
    let id = id_of("engine");
    world.ok(&env, &["create", "--bundle", bundle.to_str().unwrap(), &id]);
    let state = env.state(&id);
    assert_eq!(state["status"], "created");
    let (proxy, exited) = helper_pid(&state, "proxy");
    assert!(!exited && proxy > 0, "{state}");
    let (watch, exited) = helper_pid(&state, "watch");
    assert!(!exited && watch > 0, "{state}");
    let log = state["annotations"]["run.claude-shim.proxy.log"].as_str().unwrap();
    assert!(Path::new(log).is_file(), "state names the proxy log {log}");
    env.ok(&["start", &id]);
    let out = fetch_ok(&env, &id, "http://pub.test/");
    assert!(out.contains("hello-pub"), "{out}");
    let denied = fetch(&env, &id, "http://wild.test/");
    assert!(!denied.status.success());
    env.ok(&["kill", &id, "KILL"]);
    env.wait_status(&id, "stopped");
    // The helpers end with the container's init, before any delete.
    wait_until("the helpers exit with the init", || {
        let s = env.state(&id);
        helper_pid(&s, "proxy").1 && helper_pid(&s, "watch").1
    });
    let events = fs::read_to_string(env.root.join(".claude-shim").join(&id).join("network.log")).unwrap();
    assert!(events.contains("the container's init exited"), "{events}");
    env.ok(&["delete", &id]);
    assert_all_gone(&env, &id);
}

#[test]
fn killing_pasta_leaves_no_egress_and_state_says_so() {
    let world = World::new();
    let env = Env::new();
    let net = Net {
        mode: "public",
        policy: json!({}),
        host_tools: false,
    };
    let bundle = net_bundle(&env, &world, "killpasta", Some(&net), "sleep 1000\n");
    let id = id_of("killpasta");
    world.ok(&env, &["run", "--detach", "--bundle", bundle.to_str().unwrap(), &id]);
    let reach = || fetch(&env, &id, "http://198.18.123.2/");
    let before = reach();
    assert!(
        String::from_utf8_lossy(&before.stdout).contains("hello-pub"),
        "reachable before"
    );
    let (pasta, _) = helper_pid(&env.state(&id), "pasta");
    sh(&["kill", "-KILL", &pasta.to_string()]);
    wait_until("state reports pasta exited", || helper_pid(&env.state(&id), "pasta").1);
    let after = reach();
    assert!(
        !after.status.success() && !String::from_utf8_lossy(&after.stdout).contains("hello-"),
        "no egress once pasta is gone: {after:?}"
    );
    let links = env.ok(&["exec", &id, "busybox", "ip", "-o", "link"]);
    assert!(!links.contains("eth0"), "the tap went with pasta: {links}");
    wait_until("the watcher logs pasta's death", || {
        fs::read_to_string(env.root.join(".claude-shim").join(&id).join("network.log"))
            .unwrap_or_default()
            .contains("pasta exited while the container runs")
    });
    env.ok(&["delete", "--force", &id]);
    assert_all_gone(&env, &id);
}

#[test]
fn killing_the_proxy_leaves_no_egress_and_state_says_so() {
    let world = World::new();
    let env = Env::new();
    let net = Net {
        mode: "allowlist",
        policy: json!({"allow": ["pub.test"]}),
        host_tools: false,
    };
    let bundle = net_bundle(&env, &world, "killproxy", Some(&net), "sleep 1000\n");
    let id = id_of("killproxy");
    world.ok(&env, &["run", "--detach", "--bundle", bundle.to_str().unwrap(), &id]);
    let reach = || fetch(&env, &id, "http://pub.test/");
    assert!(String::from_utf8_lossy(&reach().stdout).contains("hello-pub"));
    let (proxy, _) = helper_pid(&env.state(&id), "proxy");
    sh(&["kill", "-KILL", &proxy.to_string()]);
    wait_until("state reports the proxy exited", || {
        helper_pid(&env.state(&id), "proxy").1
    });
    let after = reach();
    assert!(!after.status.success(), "no egress once the proxy is gone");
    assert!(
        String::from_utf8_lossy(&after.stderr).contains("refused"),
        "nothing listens any more: {}",
        String::from_utf8_lossy(&after.stderr)
    );
    let direct = env.run(&[
        "exec",
        &id,
        "busybox",
        "timeout",
        "10",
        "busybox",
        "nc",
        "-w",
        "3",
        "198.18.123.2",
        "80",
    ]);
    assert!(!direct.status.success(), "and no direct way either");
    wait_until("the watcher logs the proxy's death", || {
        fs::read_to_string(env.root.join(".claude-shim").join(&id).join("network.log"))
            .unwrap_or_default()
            .contains("proxy exited while the container runs")
    });
    env.ok(&["delete", "--force", &id]);
    assert_all_gone(&env, &id);
}

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
            "start pasta",
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

#[test]
fn twenty_sandboxes_with_networking_at_once() {
    let world = Arc::new(World::new());
    let env = Arc::new(Env::new());
    let modes = ["allowlist", "public", "none"];
    let script = r#"
p proxied sh -c 'http_proxy=http://127.0.0.1:3128 busybox wget -q -O - http://pub.test/'
p direct busybox wget -q -O - http://198.18.123.2/
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

/// /dev/net/tun must be usable by the test user for rootless pasta.
fn require_tun_for_users() {
    let mode = std::os::unix::fs::PermissionsExt::mode(&fs::metadata("/dev/net/tun").unwrap().permissions());
    assert_eq!(
        mode & 0o666,
        0o666,
        "/dev/net/tun is mode {mode:o}: run hack/setup (rootless pasta needs 0666)"
    );
}

#[test]
fn rootless_sandboxes_get_the_same_network() {
    require_tun_for_users();
    let world = World::new();
    let (uid, gid) = test_user();
    let env = Env::as_user(uid, gid);
    for (name, mode, policy, script) in [
        ("rl-allow", "allowlist", allowlist_policy(), ALLOWLIST_SCRIPT),
        ("rl-public", "public", public_policy(), PUBLIC_SCRIPT),
    ] {
        let net = Net {
            mode,
            policy,
            host_tools: true,
        };
        let bundle = net_bundle(&env, &world, name, Some(&net), script);
        let id = id_of(name);
        let out = world.ok(&env, &["run", "--bundle", bundle.to_str().unwrap(), &id]);
        let p = Probes::parse(&out);
        if mode == "allowlist" {
            check_allowlist(&p);
        } else {
            check_public(&p);
        }
        assert_all_gone(&env, &id);
    }
}

/// A policy file: the embedded defaults but for its `[network]` section.
fn policy_file(env: &Env, name: &str, network: &str) -> PathBuf {
    let path = env.dir.path().join(format!("{name}.toml"));
    fs::write(
        &path,
        format!("version = 1\nname = \"{name}\"\n\n[network]\n{network}\n"),
    )
    .unwrap();
    path
}

/// A working directory the sandbox's user owns.
fn workdir(env: &Env, name: &str) -> PathBuf {
    let dir = env.dir.path().join(name);
    fs::create_dir(&dir).unwrap();
    if let Some((uid, gid)) = env.as_user {
        nix::unistd::chown(&dir, Some(uid.into()), Some(gid.into())).unwrap();
    }
    dir
}

const VERIFY_ALLOWLIST: &str =
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

/// The one-shot command a user types: `sandbox --policy FILE -- curl ...`
/// reaches exactly the hosts on the list.
fn sandbox_reaches_exactly_the_listed_hosts(env: &Env, world: &World, name: &str) {
    let policy = policy_file(env, name, VERIFY_ALLOWLIST);
    let work = workdir(env, name);
    let script = r#"
for u in http://pub.test/ http://api.wild.test/ http://blocked.wild.test/ http://wild.test/ \
         http://priv2.test/ http://meta.test/ http://198.18.123.2/ http://127.0.0.1:18080/; do
  echo "$u $(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$u")"
done
echo "body $(curl -s --max-time 5 http://api.wild.test/)"
echo "direct $(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --noproxy '*' http://198.18.123.2/)"
"#;
    let out = world.ok(
        env,
        &[
            "sandbox",
            "--policy",
            policy.to_str().unwrap(),
            "--workdir",
            work.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            script,
        ],
    );
    let got: HashMap<&str, &str> = out.lines().filter_map(|l| l.split_once(' ')).collect();
    for (url, code) in [
        ("http://pub.test/", "200"),
        ("http://api.wild.test/", "200"),
        ("http://blocked.wild.test/", "403"),
        ("http://wild.test/", "403"),
        ("http://priv2.test/", "403"),
        ("http://meta.test/", "403"),
        ("http://198.18.123.2/", "403"),
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
    sandbox_reaches_exactly_the_listed_hosts(&Env::new(), &world, "sb-allow");
    let (uid, gid) = test_user();
    sandbox_reaches_exactly_the_listed_hosts(&Env::as_user(uid, gid), &world, "rsb-allow");
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
