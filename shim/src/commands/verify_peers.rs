//! `verify --peers FILE`: the same probe, with the same expectations, run
//! under other sandboxes, so that what each one stops is measured by one
//! yardstick (hack/bench's containment table). A peer is either a launcher
//! (an argv the probe's own command line is appended to: the bare host,
//! bwrap, srt, Codex's sandbox) or an OCI runtime with a bundle of its own
//! (runc's `spec`, an engine's default profile), which gets the probe bound
//! in as `verify` does for claude-shim's bundle.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use oci_spec::runtime::Spec;
use serde::Deserialize;

use crate::commands::run::generated_id;
use crate::verify::report::ProbeRun;
use crate::verify::spec::probe_args_at;
use crate::verify::{prepare_spec, Expectations};

/// How long one peer may take; a peer that hangs is ended (it is our own
/// child) and reported as such.
const DEADLINE: Duration = Duration::from_secs(120);

#[derive(Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Peer {
    /// The column's name.
    pub name: String,
    /// A launcher: the probe's command line is appended to it (empty: the host).
    #[serde(default)]
    pub argv: Option<Vec<String>>,
    /// An OCI runtime (runc's command line) ...
    #[serde(default)]
    pub runtime: Option<PathBuf>,
    /// ... its global flags before the verb (runsc's --network, --platform) ...
    #[serde(default)]
    pub runtime_args: Vec<String>,
    /// ... and the bundle directory whose config.json it runs.
    #[serde(default)]
    pub bundle: Option<PathBuf>,
}

pub fn load(path: &Path) -> Result<Vec<Peer>> {
    let text = std::fs::read(path).with_context(|| format!("read peers {}", path.display()))?;
    let peers: Vec<Peer> = serde_json::from_slice(&text).with_context(|| format!("parse peers {}", path.display()))?;
    for p in &peers {
        match (&p.argv, &p.runtime, &p.bundle) {
            (Some(_), None, None) | (None, Some(_), Some(_)) => {}
            _ => bail!(
                "use peer {:?} of {}: give either argv, or runtime and bundle",
                p.name,
                path.display()
            ),
        }
    }
    Ok(peers)
}

/// Runs the probe under `peer`; `exe` is the probe binary on disk, `dir` a
/// scratch directory of this verify, `cwd` the sandbox's working directory.
pub fn run(peer: &Peer, exp: &Expectations, exe: &Path, dir: &Path, cwd: &Path, n: usize) -> Result<ProbeRun> {
    let work = dir.join(format!("peer-{n}"));
    std::fs::create_dir_all(&work).with_context(|| format!("create {}", work.display()))?;
    let (cmd, cleanup) = match (&peer.argv, &peer.runtime, &peer.bundle) {
        (Some(argv), _, _) => {
            let mut full = argv.clone();
            full.extend(probe_args_at(&exe.to_string_lossy(), exp));
            let mut c = Command::new(&full[0]);
            c.args(&full[1..]).current_dir(cwd);
            (c, None)
        }
        (None, Some(runtime), Some(bundle)) => {
            let dest = work.join("bundle");
            peer_bundle(bundle, &dest, exe, exp)?;
            let id = generated_id("verify-peer");
            let root = work.join("root");
            let mut c = Command::new(runtime);
            c.args(&peer.runtime_args).arg("--root").arg(&root);
            c.args(["run", "--bundle"]).arg(&dest).arg(&id);
            let mut d = Command::new(runtime);
            d.args(&peer.runtime_args).arg("--root").arg(&root);
            d.args(["delete", "--force", &id]);
            (c, Some(d))
        }
        _ => bail!("use peer {:?}: give either argv, or runtime and bundle", peer.name),
    };
    let result = capture(cmd, &work, &peer.name);
    if let Some(d) = cleanup {
        // Whatever happened, leave nothing of the peer's container.
        quietly(d);
    }
    result
}

/// A peer's stdin when it gets no terminal: an empty pipe of verify's own,
/// whose reads end at once as from /dev/null. Never the host's /dev/null:
/// Debian's runsc (0.0~20221219) chowns the stdin, stdout and stderr its
/// `create` and `run` are given to nobody:nogroup.
pub fn empty_stdin() -> Result<Stdio> {
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).context("make a pipe for a peer's stdin")?;
    drop(write);
    Ok(Stdio::from(read))
}

/// Runs a peer's clean-up verb, its output read and dropped.
pub fn quietly(mut cmd: Command) {
    if let Ok(stdin) = empty_stdin() {
        let _ = cmd.stdin(stdin).output();
    }
}

/// The peer's own bundle, copied with the probe bound in and as its process;
/// a relative rootfs is resolved against the bundle it came from.
fn peer_bundle(src: &Path, dest: &Path, exe: &Path, exp: &Expectations) -> Result<()> {
    let config = src.join("config.json");
    let mut spec = Spec::load(&config).map_err(|e| anyhow!("load {}: {e}", config.display()))?;
    if let Some(root) = spec.root().clone() {
        if root.path().is_relative() {
            let mut r = root.clone();
            r.set_path(src.join(root.path()));
            spec.set_root(Some(r));
        }
    }
    prepare_spec(&mut spec, exe, exp).map_err(|e| anyhow!("{e}"))?;
    std::fs::create_dir_all(dest).with_context(|| format!("create {}", dest.display()))?;
    let out = dest.join("config.json");
    spec.save(&out).map_err(|e| anyhow!("write {}: {e}", out.display()))
}

/// Runs `cmd` with this process's stdin when it is a terminal (so that
/// TIOCSTI is tried on it; hack/bench gives one of its own, as runsc chowns
/// it), else an empty pipe, and its output in files.
fn capture(mut cmd: Command, dir: &Path, name: &str) -> Result<ProbeRun> {
    let out_path = dir.join("probe.out");
    let err_path = dir.join("probe.err");
    let out = File::create(&out_path).with_context(|| format!("create {}", out_path.display()))?;
    let err = File::create(&err_path).with_context(|| format!("create {}", err_path.display()))?;
    let stdin = if nix::unistd::isatty(0).unwrap_or(false) {
        Stdio::inherit()
    } else {
        empty_stdin()?
    };
    let mut child = cmd
        .stdin(stdin)
        .stdout(out)
        .stderr(err)
        .spawn()
        .with_context(|| format!("run peer {name}"))?;
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().with_context(|| format!("wait for peer {name}"))? {
            break Some(s);
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    if status.is_none() {
        stderr.push_str(&format!("\npeer {name} did not end within {} s", DEADLINE.as_secs()));
    }
    Ok(ProbeRun {
        stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
        stderr,
        exit_code: status.and_then(|s| s.code()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_is_a_launcher_or_a_runtime_with_a_bundle() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("peers.json");
        std::fs::write(
            &p,
            r#"[{"name":"host","argv":[]},{"name":"runc","runtime":"/usr/sbin/runc","bundle":"/b"}]"#,
        )
        .unwrap();
        let peers = load(&p).unwrap();
        assert_eq!(peers.len(), 2);
        assert_eq!(peers[0].argv, Some(vec![]));
        assert_eq!(peers[1].bundle.as_deref(), Some(Path::new("/b")));
        std::fs::write(&p, r#"[{"name":"both","argv":["x"],"runtime":"/r","bundle":"/b"}]"#).unwrap();
        let e = format!("{:#}", load(&p).unwrap_err());
        assert!(e.contains("either argv, or runtime and bundle"), "{e}");
        std::fs::write(&p, r#"[{"name":"x","argv":[],"shell":true}]"#).unwrap();
        assert!(load(&p).is_err(), "unknown fields are refused");
    }
}
