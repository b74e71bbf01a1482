//! Published ports (`--publish [HOSTPORT:]PORT`, the policy's
//! `network.publish`): a TCP server listening in the sandbox on PORT is
//! reached from the host at 127.0.0.1:HOSTPORT, in every network mode.
//!
//! `prepare` binds the host side (127.0.0.1 only, so a taken port refuses
//! the container before it exists); the watch forks this forwarder with
//! those sockets. The forwarder joins the container's network namespace
//! (its user namespace first when unprivileged), so that every socket it
//! makes from then on is made there, while the listening sockets, made
//! before, stay in the host's: it accepts on the host's loopback and
//! connects to 127.0.0.1:PORT inside, nowhere else. It is inbound only: a
//! connection starts on the host; nothing inside can make it connect out,
//! and nothing is added to the sandbox's own network.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::json;

use super::args::HelperOpts;
use super::log::Log;
use super::netns::{self, HELPER_NET_FD};
use super::plan::Plan;
use super::process;

/// At most this many published ports: each is a descriptor the watch hands on.
pub const MAX: usize = 8;
const MAX_CONNECTIONS: usize = 256;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// `HOSTPORT:PORT,...` as the annotation carries it.
pub fn parse(list: &str) -> Result<Vec<(u16, u16)>> {
    let mut out: Vec<(u16, u16)> = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let p = claude_shim_bundle::policy::values::Publish::parse(item).map_err(|e| anyhow!("{e}"))?;
        if out.iter().any(|(h, _)| *h == p.host) {
            bail!("host port {} is published twice", p.host);
        }
        out.push((p.host, p.port));
    }
    if out.len() > MAX {
        bail!("{} ports are published; at most {MAX}", out.len());
    }
    Ok(out)
}

/// The host's side of each published port: a socket listening on
/// 127.0.0.1:HOSTPORT, and on no other address.
pub fn bind(publish: &[(u16, u16)]) -> Result<Vec<OwnedFd>> {
    publish
        .iter()
        .map(|(host, port)| {
            let at = SocketAddrV4::new(Ipv4Addr::LOCALHOST, *host);
            TcpListener::bind(at).map(OwnedFd::from).map_err(|e| {
                let why = if e.kind() == std::io::ErrorKind::AddrInUse {
                    "the port is taken"
                } else {
                    "it cannot be bound"
                };
                anyhow!("publish port {port} of the sandbox on {at}: {why} ({e})")
            })
        })
        .collect()
}

/// Where the watch and the forwarder find the listening sockets: after the
/// namespaces they are handed (process::fork_helper places them in order).
pub fn first_fd(join_user: bool) -> RawFd {
    HELPER_NET_FD + 1 + RawFd::from(join_user)
}

/// Without root, the forwarder holds every capability of the container's
/// user namespace once it has joined it; it needs none of them.
fn drop_capabilities() -> Result<()> {
    // Effective first: the kernel keeps it within the permitted set.
    for set in [
        caps::CapSet::Effective,
        caps::CapSet::Permitted,
        caps::CapSet::Inheritable,
    ] {
        caps::clear(None, set).context("drop the capabilities of the user namespace")?;
    }
    nix::sys::prctl::set_no_new_privs().context("set no_new_privs")?;
    Ok(())
}

/// The forwarder (forked by the watch): joins the container's network
/// namespace, reports ready, relays until the container's init exits.
pub fn run(opts: &HelperOpts) -> Result<()> {
    let init = process::open_verified(opts.init_pid, opts.init_start)
        .ok_or_else(|| anyhow!("find the init of container {} (pid {})", opts.id, opts.init_pid))?;
    let plan = Plan::load(&opts.state_dir)?;
    let ns = netns::NsFds::inherited(plan.join_user);
    let first = first_fd(plan.join_user);
    let listeners: Vec<(TcpListener, u16, u16)> = plan
        .publish
        .iter()
        .enumerate()
        // SAFETY: the watch handed the listening sockets over at these numbers, in `publish`'s order.
        .map(|(i, (host, port))| (unsafe { TcpListener::from_raw_fd(first + i as RawFd) }, *host, *port))
        .collect();
    let log = Arc::new(Log::open(&opts.state_dir.join("network.log"), &opts.id)?);
    // Asked before joining: in the container's user namespace this user may be uid 0.
    let root = nix::unistd::geteuid().is_root();
    // Single-threaded still, as joining a user namespace requires.
    netns::join(&ns).with_context(|| format!("join the network namespace of container {}", opts.id))?;
    drop(ns);
    if root {
        process::drop_to_nobody()?;
    } else {
        drop_capabilities()?;
    }
    let sigfd = process::end_signals()?;
    let active = Arc::new(AtomicUsize::new(0));
    let mut published = Vec::new();
    for (listener, host, port) in listeners {
        published.push(format!("127.0.0.1:{host} -> {port}"));
        let (log, active) = (log.clone(), active.clone());
        std::thread::Builder::new()
            .name(format!("publish {host}"))
            .spawn(move || accept_loop(listener, port, &log, &active))
            .context("start a publishing thread")?;
    }
    log.write(json!({"event": "publishing", "pid": std::process::id(), "ports": published}));
    process::report_ready(&format!("ok {}", std::process::id()));
    process::shed_start_up_pages();
    let why = process::wait_for_end(&init, &sigfd);
    log.write(json!({"event": "stopped publishing", "reason": why}));
    Ok(())
}

fn accept_loop(listener: TcpListener, port: u16, log: &Log, active: &Arc<AtomicUsize>) {
    // Made in the container's namespace (this process joined it): its own loopback.
    let inside = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    loop {
        let (client, _) = match listener.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                log.write(json!({"event": "publish accept failed", "port": port, "error": e.to_string()}));
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::SeqCst);
            continue;
        }
        let active2 = active.clone();
        let spawned = std::thread::Builder::new().stack_size(256 * 1024).spawn(move || {
            if let Ok(upstream) = TcpStream::connect_timeout(&inside, CONNECT_TIMEOUT) {
                let _ = upstream.set_nodelay(true);
                let _ = client.set_nodelay(true);
                super::relay::tunnel(client, upstream);
            }
            // Refused (nothing listens there yet): the client's connection closes.
            active2.fetch_sub(1, Ordering::SeqCst);
        });
        if spawned.is_err() {
            active.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_annotation_reads_back() {
        assert_eq!(parse("8080:3000, 5173:5173").unwrap(), [(8080, 3000), (5173, 5173)]);
        assert_eq!(parse("").unwrap(), []);
        assert!(parse("8080:1,8080:2").unwrap_err().to_string().contains("twice"));
        assert!(parse("x").is_err());
        let many: Vec<String> = (1..=9).map(|p| p.to_string()).collect();
        assert!(parse(&many.join(",")).is_err());
    }

    #[test]
    fn a_taken_port_is_named() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let e = bind(&[(port, 3000)]).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "publish port 3000 of the sandbox on 127.0.0.1:{port}: the port is taken (Address already in use (os error 98))"
            )
        );
    }
}
