//! The world every network test runs in: two network namespaces joined by a
//! veth, the peers and the resolver in them, and the commands that run
//! claude-shim inside it. The bottom of the suite: every other module builds on it.

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use claude_shim_e2e::*;

const SERVERS: &[(&str, &str, &str)] = &[
    // (namespace, address, body)
    ("g", "198.20.123.2:80", "hello-pub"),
    ("g", "198.20.123.2:8080", "hello-pub8080"),
    ("g", "[2a01:123::2]:80", "hello-pub6"),
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
    ("pub.test", [198, 20, 123, 2]),
    ("api.wild.test", [198, 20, 123, 2]),
    ("blocked.wild.test", [198, 20, 123, 2]),
    ("wild.test", [198, 20, 123, 2]),
    ("ports.test", [198, 20, 123, 2]),
    ("ssh.test", [198, 20, 123, 2]),
    ("priv.test", [10, 123, 1, 2]),
    ("priv2.test", [10, 123, 1, 3]),
    ("rebind.test", [127, 0, 0, 1]),
    ("meta.test", [169, 254, 169, 254]),
];

pub(crate) fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The test world: two network namespaces, the peers in them, the resolver.
pub(crate) struct World {
    pub(crate) host: String,
    gateway: String,
    pub(crate) dir: tempfile::TempDir,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl World {
    pub(crate) fn new() -> Self {
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
                    "addr add 198.20.123.2/32 dev lo",
                    "addr add 10.123.1.2/32 dev lo",
                    "addr add 10.123.1.3/32 dev lo",
                    "addr add 169.254.169.254/32 dev lo",
                    "-6 addr add 2a01:123::2/128 dev lo nodad",
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

    /// The namespace that holds the peers.
    pub(crate) fn gateway_ns(&self) -> &str {
        &self.gateway
    }

    pub(crate) fn ns_path(name: &str) -> PathBuf {
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
    pub(crate) fn wrap(&self, inner: Command) -> Command {
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

    pub(crate) fn run(&self, env: &Env, args: &[&str]) -> Output {
        self.run_with(env, args, &[])
    }

    pub(crate) fn run_with(&self, env: &Env, args: &[&str], vars: &[(&str, &str)]) -> Output {
        let mut c = self.wrap(env.command(args));
        for (k, v) in vars {
            c.env(k, v);
        }
        output_of(c, env.dir.path())
    }

    /// `claude-shim sandbox --policy POLICY --workdir WORK -- sh -c SCRIPT` in the world.
    pub(crate) fn sandbox_sh(&self, env: &Env, policy: &Path, work: &Path, script: &str) -> Output {
        let (policy, work) = (policy.to_str().unwrap(), work.to_str().unwrap());
        self.run(
            env,
            &[
                "sandbox",
                "--policy",
                policy,
                "--workdir",
                work,
                "--",
                "sh",
                "-c",
                script,
            ],
        )
    }

    pub(crate) fn ok(&self, env: &Env, args: &[&str]) -> String {
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
pub(crate) fn output_of(mut c: Command, dir: &Path) -> Output {
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
