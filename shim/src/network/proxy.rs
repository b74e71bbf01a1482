//! Allowlist mode's only way out: an HTTP (CONNECT and plain http://) and
//! SOCKS5 proxy that claude-shim runs beside the container. Its listening
//! sockets live in the container's network namespace (127.0.0.1:3128 and
//! :1080, created there by a short-lived child), while it accepts, resolves
//! and connects from the host's. Every request is checked against the policy,
//! every address it resolves to against the blocked ranges, and logged as one
//! JSON line in <state>/proxy.log.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, SocketAddrV4, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use ipnet::IpNet;
use serde_json::json;

use super::args::HelperOpts;
use super::control;
use super::log::Log;
use super::plan::Plan;
use super::policy::change;
use super::policy::{blocked_with_local, Decision, Host, Policy, RawPolicy};
use super::relay::{copy_then_shutdown, tunnel};
use super::wire::*;
use super::{netns, process, routing};

pub const HTTP_PORT: u16 = 3128;
pub const SOCKS_PORT: u16 = 1080;
const MAX_CONNECTIONS: usize = 512;
const MAX_HEAD: usize = 64 * 1024;
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The lists the proxy decides by: the run's policy, as `claude-shim
/// allow`/`deny` have changed it since.
struct Lists {
    raw: RawPolicy,
    policy: Arc<Policy>,
}

struct Shared {
    lists: RwLock<Lists>,
    blocked: Vec<IpNet>,
    log: Log,
    active: AtomicUsize,
    /// `claude-shim claude`'s API gateway, when the plan asks for one.
    gateway: Option<super::gateway::Gateway>,
}

/// The host's own networks join the fixed blocked ranges: the proxy connects
/// from the host, so its LAN, gateway and addresses are what "local" means.
fn host_blocked() -> Vec<IpNet> {
    blocked_with_local(
        routing::local_networks(&routing::routes("self"))
            .into_iter()
            .chain(routing::host_addresses().into_iter().map(IpNet::from)),
    )
}

/// The proxy helper (forked by `__network watch`): set up, report ready, serve until the
/// container's init exits or the runtime stops it.
pub fn run(opts: &HelperOpts) -> Result<()> {
    let init = process::open_verified(opts.init_pid, opts.init_start)
        .ok_or_else(|| anyhow!("find the init of container {} (pid {})", opts.id, opts.init_pid))?;
    let plan = Plan::load(&opts.state_dir)?;
    let ns = netns::NsFds::inherited(plan.join_user);
    let mut addrs = vec![
        SocketAddrV4::new([127, 0, 0, 1].into(), HTTP_PORT),
        SocketAddrV4::new([127, 0, 0, 1].into(), SOCKS_PORT),
    ];
    // The credential is read here, outside, before privileges are dropped.
    let gateway = match &plan.gateway {
        Some(url) => Some(super::gateway::Gateway::new(url)?),
        None => None,
    };
    if gateway.is_some() {
        addrs.push(SocketAddrV4::new([127, 0, 0, 1].into(), super::gateway::PORT));
    }
    let mut fds = netns::loopback(&ns, &addrs).with_context(|| {
        format!(
            "listen on 127.0.0.1:{HTTP_PORT} and :{SOCKS_PORT} in container {}",
            opts.id
        )
    })?;
    drop(ns);
    let gateway_listener: Option<TcpListener> = if gateway.is_some() {
        Some(fds.pop().map(Into::into).context("the gateway listener")?)
    } else {
        None
    };
    let socks: TcpListener = fds.pop().map(Into::into).context("the SOCKS listener")?;
    let http: TcpListener = fds.pop().map(Into::into).context("the HTTP listener")?;
    let log = Log::open(&opts.state_dir.join("proxy.log"), &opts.id)?;
    // Bound as the runtime's user, before the privileges go.
    let control = control::Server::bind(&opts.state_dir)?;
    let shared = Arc::new(Shared {
        lists: RwLock::new(Lists {
            raw: plan.policy.clone(),
            policy: Arc::new(plan.policy()?),
        }),
        blocked: host_blocked(),
        log,
        active: AtomicUsize::new(0),
        gateway,
    });
    process::drop_to_nobody()?;

    // Blocked before any thread exists, so only the signalfd sees them.
    let sigfd = process::end_signals()?;
    let mut listeners = vec![(http, Kind::Http), (socks, Kind::Socks)];
    listeners.extend(gateway_listener.map(|l| (l, Kind::Gateway)));
    for (listener, kind) in listeners {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name(format!("{kind:?}"))
            .spawn(move || accept_loop(listener, kind, shared))
            .context("start a listener thread")?;
    }
    {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name("control".into())
            .spawn(move || control.serve(|req, uid| change_lists(&shared, req, uid)))
            .context("start the control thread")?;
    }
    shared.log.write(json!({"event": "started", "pid": std::process::id(),
        "listen": [format!("127.0.0.1:{HTTP_PORT}"), format!("127.0.0.1:{SOCKS_PORT}")],
        "workdir": plan.workdir}));
    process::report_ready(&format!("ok {}", std::process::id()));
    process::shed_start_up_pages();

    let why = process::wait_for_end(&init, &sigfd);
    shared.log.write(json!({"event": "stopped", "reason": why}));
    Ok(())
}

/// `claude-shim allow`/`deny` from the host: the lists change for every
/// request from now on, and the change is logged beside the requests.
fn change_lists(shared: &Shared, req: &control::Request, uid: u32) -> control::Reply {
    let mut lists = match shared.lists.write() {
        Ok(l) => l,
        Err(p) => p.into_inner(),
    };
    let changed = match change::apply(&lists.raw, req.op, &req.entry) {
        Ok(c) => c,
        Err(e) => {
            return control::Reply {
                error: Some(e.to_string()),
                ..control::Reply::default()
            }
        }
    };
    let policy = match Policy::parse(&changed.lists) {
        Ok(p) => p,
        Err(e) => {
            return control::Reply {
                error: Some(e.to_string()),
                ..control::Reply::default()
            }
        }
    };
    lists.policy = Arc::new(policy);
    lists.raw = changed.lists;
    shared.log.write(
        json!({"event": "policy change", "op": req.op, "entry": req.entry.trim(), "uid": uid,
        "said": changed.said, "allow": lists.raw.allow, "deny": lists.raw.deny}),
    );
    control::Reply {
        error: None,
        said: changed.said,
        allow: lists.raw.allow.clone(),
        deny: lists.raw.deny.clone(),
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Http,
    Socks,
    Gateway,
}

fn accept_loop(listener: TcpListener, kind: Kind, shared: Arc<Shared>) {
    loop {
        let (stream, peer) = match listener.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                shared
                    .log
                    .write(json!({"event": "accept failed", "error": e.to_string()}));
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        if shared.active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            shared.active.fetch_sub(1, Ordering::SeqCst);
            shared.log.write(json!({"client": peer.to_string(), "decision": "deny",
                "reason": format!("more than {MAX_CONNECTIONS} connections at once")}));
            continue;
        }
        let shared2 = shared.clone();
        let spawned = std::thread::Builder::new().stack_size(256 * 1024).spawn(move || {
            let _ = stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT));
            let _ = stream.set_nodelay(true);
            match kind {
                Kind::Http => serve_http(stream, peer, &shared2),
                Kind::Socks => serve_socks(stream, peer, &shared2),
                Kind::Gateway => {
                    if let Some(gw) = &shared2.gateway {
                        super::gateway::serve(stream, peer, gw, &shared2.log)
                    }
                }
            }
            shared2.active.fetch_sub(1, Ordering::SeqCst);
        });
        if spawned.is_err() {
            shared.active.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// What became of one request, for its log line.
struct Outcome {
    upstream: Option<TcpStream>,
    decision: &'static str,
    reason: String,
    address: Option<SocketAddr>,
    /// Why an allowed request still failed: resolve, connect.
    error: Option<String>,
}

/// The policy, then resolution (by the host's resolver), then the address
/// check, then the connection.
fn open_upstream(shared: &Shared, host: &Host, port: u16) -> Outcome {
    // A literal in a blocked range is refused for that, whatever the lists
    // say, so the refusal names the range (verify reads it).
    // A copy of the lists as they are now: a change from the host applies
    // to the next request, never half-way through one.
    let policy = match shared.lists.read() {
        Ok(l) => l.policy.clone(),
        Err(p) => p.into_inner().policy.clone(),
    };
    let decision = match host {
        Host::Ip(ip) => match policy.address_verdict(*ip, port, &shared.blocked) {
            Ok(()) => policy.decide(host, port),
            Err(why) => Decision {
                allow: false,
                reason: why,
            },
        },
        Host::Name(_) => policy.decide(host, port),
    };
    let mut out = Outcome {
        upstream: None,
        decision: if decision.allow { "allow" } else { "deny" },
        reason: decision.reason,
        address: None,
        error: None,
    };
    if !decision.allow {
        return out;
    }
    let candidates: Vec<SocketAddr> = match host {
        Host::Ip(ip) => vec![SocketAddr::new(*ip, port)],
        Host::Name(name) => match (name.as_str(), port).to_socket_addrs() {
            Ok(a) => a.collect(),
            Err(e) => {
                out.error = Some(format!("resolve {name}: {e}"));
                return out;
            }
        },
    };
    let mut refused = Vec::new();
    let allowed: Vec<SocketAddr> = candidates
        .into_iter()
        .filter(|a| match policy.address_verdict(a.ip(), port, &shared.blocked) {
            Ok(()) => true,
            Err(why) => {
                refused.push(why);
                false
            }
        })
        .collect();
    if allowed.is_empty() {
        out.decision = "deny";
        out.reason = if refused.is_empty() {
            "the name resolved to no address".into()
        } else {
            refused.join("; ")
        };
        return out;
    }
    let mut errors = Vec::new();
    for a in allowed {
        match TcpStream::connect_timeout(&a, CONNECT_TIMEOUT) {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                out.upstream = Some(s);
                out.address = Some(a);
                return out;
            }
            Err(e) => errors.push(format!("connect {a}: {e}")),
        }
    }
    out.error = Some(errors.join("; "));
    out
}

fn log_request(shared: &Shared, peer: SocketAddr, proto: &str, host: &Host, port: u16, o: &Outcome) {
    let mut line = json!({"client": peer.to_string(), "proto": proto, "host": host.to_string(), "port": port,
        "decision": o.decision, "reason": o.reason});
    if let Some(a) = o.address {
        line["address"] = json!(a.to_string());
    }
    if let Some(e) = &o.error {
        line["error"] = json!(e);
    }
    shared.log.write(line);
}

fn http_error(stream: &mut TcpStream, status: &str, text: &str) {
    let body = format!("claude-shim: {text}\n");
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

fn serve_http(mut stream: TcpStream, peer: SocketAddr, shared: &Shared) {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    let req = loop {
        match parse_http(&buf) {
            Ok(Some(r)) => break r,
            Ok(None) if buf.len() < MAX_HEAD => {}
            Ok(None) => {
                http_error(
                    &mut stream,
                    "431 Request Header Fields Too Large",
                    "request head too large",
                );
                return;
            }
            Err(e) => {
                shared
                    .log
                    .write(json!({"client": peer.to_string(), "proto": "http", "decision": "deny", "reason": e}));
                http_error(&mut stream, "400 Bad Request", &e);
                return;
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    // Bytes past the body in the first read are a pipelined second request.
    if req.upstream_head.is_some() && (buf.len() - req.body_start) as u64 > req.content_length {
        let why = "a second request on the connection is not forwarded: one request per connection";
        shared.log.write(
            json!({"client": peer.to_string(), "proto": "http", "host": req.host.to_string(),
            "port": req.port, "decision": "deny", "reason": why}),
        );
        http_error(&mut stream, "400 Bad Request", why);
        return;
    }
    let proto = if req.upstream_head.is_none() {
        "http-connect"
    } else {
        "http"
    };
    let o = open_upstream(shared, &req.host, req.port);
    log_request(shared, peer, proto, &req.host, req.port, &o);
    let target = format!("{}:{}", req.host, req.port);
    let Some(mut upstream) = o.upstream else {
        if o.decision == "deny" {
            http_error(&mut stream, "403 Forbidden", &format!("{target} refused: {}", o.reason));
        } else {
            http_error(
                &mut stream,
                "502 Bad Gateway",
                &format!("{target}: {}", o.error.unwrap_or_default()),
            );
        }
        return;
    };
    let rest = &buf[req.body_start..];
    match &req.upstream_head {
        None => {
            let sent = stream
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .and_then(|_| upstream.write_all(rest));
            if sent.is_ok() {
                tunnel(stream, upstream);
            }
        }
        Some(head) => {
            let body_left = req.content_length - rest.len() as u64;
            if upstream.write_all(head).and_then(|_| upstream.write_all(rest)).is_ok() {
                one_request(stream, upstream, body_left);
            }
        }
    }
}

/// Plain HTTP: the rest of the one request's body goes up, the response comes
/// down, and nothing more the client sends is read: a second request on the
/// connection could name another host than the one checked.
fn one_request(client: TcpStream, upstream: TcpStream, body_left: u64) {
    let _ = client.set_read_timeout(None);
    let (Ok(mut c2), Ok(mut u2), Ok(down)) = (client.try_clone(), upstream.try_clone(), client.try_clone()) else {
        return;
    };
    let up = std::thread::Builder::new().stack_size(128 * 1024).spawn(move || {
        let _ = io::copy(&mut (&mut c2).take(body_left), &mut u2);
    });
    copy_then_shutdown(upstream, down);
    // The response is over: a body the client never finished ends here too.
    let _ = client.shutdown(Shutdown::Both);
    if let Ok(h) = up {
        let _ = h.join();
    }
}

fn socks_reply(stream: &mut TcpStream, code: u8) {
    let _ = stream.write_all(&[5, code, 0, 1, 0, 0, 0, 0, 0, 0]);
}

/// Reads until `parse` is done; None when the client left or sent garbage.
fn read_parsed<T>(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    parse: impl Fn(&[u8]) -> Parsed<T>,
) -> Option<Result<T, (u8, String)>> {
    let mut chunk = [0u8; 512];
    loop {
        match parse(buf) {
            Parsed::Done(v, used) => {
                buf.drain(..used);
                return Some(Ok(v));
            }
            Parsed::Bad(code, why) => return Some(Err((code, why))),
            Parsed::Incomplete if buf.len() > 1024 => return None,
            Parsed::Incomplete => {}
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn serve_socks(mut stream: TcpStream, peer: SocketAddr, shared: &Shared) {
    let mut buf = Vec::new();
    let log_bad = |why: &str| {
        shared
            .log
            .write(json!({"client": peer.to_string(), "proto": "socks5", "decision": "deny", "reason": why}));
    };
    match read_parsed(&mut stream, &mut buf, parse_greeting) {
        Some(Ok(true)) => {
            if stream.write_all(&[5, 0]).is_err() {
                return;
            }
        }
        Some(Ok(false)) => {
            log_bad("the client offers no method without authentication");
            let _ = stream.write_all(&[5, 0xff]);
            return;
        }
        Some(Err((_, why))) => {
            log_bad(&why);
            return;
        }
        None => return,
    }
    let (host, port) = match read_parsed(&mut stream, &mut buf, parse_request) {
        Some(Ok(t)) => t,
        Some(Err((code, why))) => {
            log_bad(&why);
            socks_reply(&mut stream, code);
            return;
        }
        None => return,
    };
    let o = open_upstream(shared, &host, port);
    log_request(shared, peer, "socks5", &host, port, &o);
    let Some(mut upstream) = o.upstream else {
        let code = match (&o.error, o.decision) {
            (_, "deny") => SOCKS_NOT_ALLOWED,
            (Some(e), _) if e.starts_with("resolve") => SOCKS_HOST_UNREACHABLE,
            (Some(e), _) if e.contains("refused") => SOCKS_REFUSED,
            _ => SOCKS_GENERAL_FAILURE,
        };
        socks_reply(&mut stream, code);
        return;
    };
    socks_reply(&mut stream, 0);
    if !buf.is_empty() && upstream.write_all(&buf).is_err() {
        return;
    }
    tunnel(stream, upstream);
}
