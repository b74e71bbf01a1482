//! Networking for the plain runtimes, the way an engine wires it: a network
//! namespace made and pinned by the harness, pasta attached to it (flags from
//! NOTES.md: no port exposed, no gateway mapped to the host's loopback), and
//! the namespace's path handed to the runtime. Also the throughput test's
//! far end: a veth peer namespace on 10.123.N.0/24 that the harness creates
//! and removes, so no traffic leaves the machine.

use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::proc::{self, Hooks, Runner};

/// A network namespace pinned by a bind mount at `path`.
pub struct NetNs {
    pub path: PathBuf,
    pub fd: Arc<OwnedFd>,
}

impl NetNs {
    /// A new namespace, made on this thread and left at once (setns back), so
    /// no process is started for it.
    pub fn create(path: &Path) -> Result<Self> {
        let own = fs::File::open("/proc/thread-self/ns/net").context("open /proc/thread-self/ns/net")?;
        fs::File::create(path).with_context(|| format!("create {}", path.display()))?;
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).context("unshare a network namespace")?;
        let pinned = nix::mount::mount(
            Some("/proc/thread-self/ns/net"),
            path,
            None::<&str>,
            nix::mount::MsFlags::MS_BIND,
            None::<&str>,
        );
        nix::sched::setns(&own, nix::sched::CloneFlags::CLONE_NEWNET)
            .context("return to the host's network namespace")?;
        pinned.with_context(|| format!("pin a network namespace at {}", path.display()))?;
        let fd = OwnedFd::from(fs::File::open(path).with_context(|| format!("open {}", path.display()))?);
        Ok(Self {
            path: path.to_path_buf(),
            fd: Arc::new(fd),
        })
    }

    /// Unpins the namespace; it goes when its last user (pasta, the container) does.
    pub fn destroy(self) {
        let _ = nix::mount::umount2(&self.path, nix::mount::MntFlags::MNT_DETACH);
        let _ = fs::remove_file(&self.path);
    }
}

/// pasta attached to a namespace.
pub struct Pasta {
    pub pid: i32,
}

impl Pasta {
    /// `pasta --config-net` on `ns`; returns once it has configured the namespace
    /// and gone to the background. `tcp_in`: a host port forwarded inside.
    pub fn attach(runner: &Runner, pasta: &Path, ns: &Path, pid_file: &Path, tcp_in: Option<u16>) -> Result<Self> {
        let _ = fs::remove_file(pid_file);
        let mut c = Command::new(pasta);
        let t = tcp_in.map_or("none".to_owned(), |p| p.to_string());
        c.args([
            "--config-net",
            "--runas",
            "0",
            "-q",
            "-t",
            &t,
            "-u",
            "none",
            "-T",
            "none",
            "-U",
            "none",
            "--no-map-gw",
        ])
        .arg("-P")
        .arg(pid_file)
        .arg("--netns")
        .arg(ns);
        let line = proc::command_line(&c);
        let f = runner.run(c, &Hooks::default(), Duration::from_secs(20))?;
        if !f.status.success() {
            bail!("run {line}: {}", f.why());
        }
        let text = fs::read_to_string(pid_file).with_context(|| format!("read {}", pid_file.display()))?;
        let pid = text
            .trim()
            .parse()
            .with_context(|| format!("read pasta's pid from {}", pid_file.display()))?;
        Ok(Self { pid })
    }

    /// SIGTERM, as claude-shim's delete does to its helpers; no waiting.
    pub fn stop(&self) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid), nix::sys::signal::SIGTERM);
    }
}

/// After a timed phase: pasta 2023-03 takes over a second to leave after
/// SIGTERM, which would only slow the run down; end it, outside the timing.
pub fn reap_pasta(pid: i32) {
    if proc::wait_gone(pid, Duration::from_millis(50)) {
        return;
    }
    if proc::comm(pid).starts_with("passt") || proc::comm(pid).starts_with("pasta") {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL);
    }
    proc::wait_gone(pid, Duration::from_secs(2));
}

/// The far end of the throughput test: a namespace behind a veth pair.
pub struct Peer {
    pub name: String,
    pub veth: String,
    pub host_ip: String,
    pub peer_ip: String,
    pub fd: Arc<OwnedFd>,
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("run ip (install iproute2)")?;
    if !out.status.success() {
        bail!(
            "run ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

impl Peer {
    pub fn create() -> Result<Self> {
        let routes = Command::new("ip")
            .args(["-4", "route", "show", "table", "all"])
            .output()
            .context("run ip (install iproute2)")?;
        let routes = String::from_utf8_lossy(&routes.stdout).into_owned();
        let n = (200..250)
            .find(|n| !routes.contains(&format!("10.123.{n}.")))
            .context("find a free 10.123.N.0/24 for the throughput peer")?;
        let tag = std::process::id() % 100000;
        let peer = Self {
            name: format!("cbench-{tag}"),
            veth: format!("cbh{tag}"),
            host_ip: format!("10.123.{n}.1"),
            peer_ip: format!("10.123.{n}.2"),
            fd: Arc::new(OwnedFd::from(fs::File::open("/proc/self/ns/net")?)),
        };
        let inner = format!("cbp{tag}");
        let setup = || -> Result<OwnedFd> {
            ip(&["netns", "add", &peer.name])?;
            ip(&["link", "add", &peer.veth, "type", "veth", "peer", "name", &inner])?;
            ip(&["link", "set", &inner, "netns", &peer.name])?;
            ip(&["addr", "add", &format!("{}/24", peer.host_ip), "dev", &peer.veth])?;
            ip(&["link", "set", &peer.veth, "up"])?;
            ip(&[
                "-n",
                &peer.name,
                "addr",
                "add",
                &format!("{}/24", peer.peer_ip),
                "dev",
                &inner,
            ])?;
            ip(&["-n", &peer.name, "link", "set", &inner, "up"])?;
            ip(&["-n", &peer.name, "link", "set", "lo", "up"])?;
            let path = format!("/run/netns/{}", peer.name);
            Ok(OwnedFd::from(
                fs::File::open(&path).with_context(|| format!("open {path}"))?,
            ))
        };
        match setup() {
            Ok(fd) => Ok(Self {
                fd: Arc::new(fd),
                ..peer
            }),
            Err(e) => {
                peer.destroy();
                Err(e)
            }
        }
    }

    pub fn hooks(&self) -> Hooks {
        Hooks {
            netns: Some(self.fd.clone()),
            ..Hooks::default()
        }
    }

    pub fn destroy(&self) {
        let _ = ip(&["netns", "del", &self.name]);
        let _ = ip(&["link", "del", &self.veth]);
    }
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_or(0, |a| a.port())
}
