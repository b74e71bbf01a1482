//! The containment group: what each sandbox stops, by one yardstick. The
//! expectations `claude-shim verify` derives from the agent policy are run,
//! unchanged, inside every peer (`verify --peers`): the bare host, runc,
//! crun, runsc and `claude-shim run` on the bundle `runc spec` makes and on
//! the engines' default seccomp profile, bwrap with Claude Code's flags, srt,
//! Codex's sandbox, and `claude-shim sandbox` with the agent and offline
//! policies, root-run here and as an unprivileged user in
//! `containment_user`. The launcher gives the probe a terminal, so TIOCSTI is tried,
//! and holds an open directory, so a descriptor leak shows.
//! Cells are read in `containment_table`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use serde_json::{json, Value};

use crate::bundle::{self, Layout, Variant};
use crate::case::{err_text, Ctx};
use crate::plan::Support;
use crate::runtimes::{Availability, Kind, CODEX_FLAGS};

/// The policy whose expectations are the yardstick.
pub const POLICY: &str = "agent";

/// One sandbox's column before it ran: how verify launches it, or why not.
#[derive(Debug, Clone, Serialize)]
pub struct Peer {
    pub name: String,
    pub kind: Kind,
    /// The variant of the start-up row it matches, for the plot ("" default).
    pub variant: String,
    #[serde(skip)]
    pub launch: Option<Value>,
    /// Why the column is empty: the peer is missing or cannot run here.
    pub reason: Option<String>,
    /// A column run as the unprivileged user: the root column it is the
    /// counterpart of (its escapes count against the user's own host).
    pub pair: Option<String>,
}

/// What the verify runs printed, side by side, with the columns that could not run.
pub struct Raw {
    pub peers: Vec<Peer>,
    /// verify's side-by-side JSON for the agent policy (host and peers included).
    pub agent: Value,
    /// verify's JSON for the offline policy (its own sandbox only).
    pub offline: Result<Value, String>,
    /// The same, run as the unprivileged user.
    pub user: UserRaw,
}

/// What verify printed when run as the unprivileged user, whose own host
/// column is the baseline of the others.
pub struct UserRaw {
    pub peers: Vec<Peer>,
    pub agent: Result<Value, String>,
    pub offline: Result<Value, String>,
}

/// The unprivileged user verify runs as, and what it owns.
pub struct AsUser {
    pub uid: u32,
    pub gid: u32,
    pub home: PathBuf,
    /// Its copy of the source tree: the sandboxes' working directory.
    pub tree: PathBuf,
    /// verify's state root and XDG_RUNTIME_DIR.
    pub state: PathBuf,
}

pub const AGENT_COLUMN: &str = "claude-shim sandbox (agent)";
pub const OFFLINE_COLUMN: &str = "claude-shim sandbox (offline)";

pub fn unavailable(a: &Availability) -> Option<String> {
    match a {
        Availability::Present => None,
        Availability::Missing(r) | Availability::Fails(r) => Some(r.clone()),
        Availability::NotSelected => Some("not selected (--runtimes)".into()),
    }
}

/// A bundle's seccomp profile: none, one, or why it is not on this machine.
type SeccompOf<'a> = Result<Option<&'a Value>, String>;

/// The peers of this machine, in column order.
pub fn peers(ctx: &Ctx, layout: &Layout, support: &Support) -> Result<Vec<Peer>> {
    let dir = ctx.work.join("containment");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let tree = ctx.tree.display().to_string();
    let mut out = vec![Peer {
        name: "host".into(),
        kind: Kind::Host,
        variant: String::new(),
        launch: Some(json!({"name": "host", "argv": []})),
        reason: None,
        pair: None,
    }];
    // The engines' default profile: containers-common's seccomp.json (podman's,
    // and moby's own profile as Debian's docker.io embeds it, in substance).
    let bundles: Vec<(&str, &str, SeccompOf<'_>)> = vec![
        ("runc spec", "", Ok(None)),
        (
            "default seccomp",
            "default seccomp",
            support.default_seccomp.as_ref().map(Some).map_err(Clone::clone),
        ),
    ];
    let mut n = 0;
    for rt in &ctx.rts {
        let base = |variant: &str| Peer {
            name: String::new(),
            kind: rt.kind,
            variant: variant.to_owned(),
            launch: None,
            reason: unavailable(&rt.availability),
            pair: None,
        };
        match rt.kind {
            Kind::Host | Kind::Sandbox => {}
            Kind::Runc | Kind::Crun | Kind::Runsc | Kind::ClaudeShim => {
                for (label, variant, seccomp) in &bundles {
                    n += 1;
                    let mut p = base(variant);
                    p.name = crate::plan::label_of(&rt.name, label);
                    if p.reason.is_none() {
                        match seccomp {
                            Err(e) => p.reason = Some(e.clone()),
                            Ok(s) => {
                                let b = dir.join(format!("bundle-{n}"));
                                let mut v = Variant::new(vec!["/bin/true".into()]);
                                v.cwd = tree.clone();
                                v.seccomp = *s;
                                bundle::write(&b, layout, &v)?;
                                p.launch = Some(oci_launch(rt, &p.name, &b, s.is_some()));
                            }
                        }
                    }
                    out.push(p);
                }
            }
            Kind::Bwrap | Kind::Srt | Kind::Codex => {
                let mut p = base("");
                p.name = match rt.kind {
                    Kind::Bwrap => "bwrap (Claude Code's flags)".into(),
                    _ => rt.name.clone(),
                };
                if p.reason.is_none() {
                    let path = rt.path.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
                    let mut argv = vec![path];
                    match rt.kind {
                        Kind::Bwrap => {
                            argv.extend(ctx.bwrap_flags.iter().cloned());
                            argv.extend(["--chdir".into(), tree.clone(), "--".into()]);
                        }
                        Kind::Srt => argv.extend(["-s".into(), rt.srt_settings().display().to_string()]),
                        _ => {
                            argv.extend(CODEX_FLAGS.iter().map(|s| s.to_string()));
                            argv.extend(["-C".into(), tree.clone(), "--".into()]);
                        }
                    }
                    p.launch = Some(json!({"name": p.name, "argv": argv}));
                }
                out.push(p);
            }
        }
    }
    Ok(out)
}

/// verify's peer entry for an OCI runtime; crun on a hybrid host runs in a
/// mount namespace without the unified hierarchy, as its start-up row does.
pub fn oci_launch(rt: &crate::runtimes::Runtime, name: &str, bundle: &Path, seccomp: bool) -> Value {
    let path = rt.path.clone().unwrap_or_default();
    let mut args: Vec<String> = Vec::new();
    if let Some(p) = &rt.platform {
        args.push(format!("--platform={p}"));
    }
    if rt.kind == Kind::Runsc {
        args.push("--network=none".into());
        // runsc applies a spec's seccomp profile only when asked to.
        if seccomp {
            args.push("--oci-seccomp".into());
        }
    }
    if rt.hide_cgroup2 {
        let mut wrapped = vec![
            "-m".to_owned(),
            "--propagation".into(),
            "private".into(),
            "sh".into(),
            "-c".into(),
            "umount -l /sys/fs/cgroup/unified && exec \"$0\" \"$@\"".into(),
            path.display().to_string(),
        ];
        wrapped.extend(args);
        return json!({"name": name, "runtime": "/usr/bin/unshare", "runtime_args": wrapped, "bundle": bundle});
    }
    json!({"name": name, "runtime": path, "runtime_args": args, "bundle": bundle})
}

/// Runs verify for the agent policy with every peer beside it, and for the
/// offline policy alone, each with a fresh terminal on its stdin.
pub fn measure(ctx: &Ctx, claude_shim: &Path, peers: Vec<Peer>, user: UserRaw) -> Result<Raw> {
    let dir = ctx.work.join("containment");
    let list: Vec<&Value> = peers.iter().filter_map(|p| p.launch.as_ref()).collect();
    let peers_file = dir.join("peers.json");
    fs::write(&peers_file, serde_json::to_vec_pretty(&list)?)
        .with_context(|| format!("write {}", peers_file.display()))?;
    let agent = verify(ctx, claude_shim, POLICY, Some(&peers_file), &dir, None)?;
    let offline = verify(ctx, claude_shim, "offline", None, &dir, None).map_err(|e| err_text(&e));
    Ok(Raw {
        peers,
        agent,
        offline,
        user,
    })
}

/// Runs `claude-shim verify` for `policy` (beside `peers`, if any), as root
/// or as `user` in that user's tree.
pub fn verify(
    ctx: &Ctx,
    claude_shim: &Path,
    policy: &str,
    peers: Option<&PathBuf>,
    dir: &Path,
    user: Option<&AsUser>,
) -> Result<Value> {
    let pty = nix::pty::openpty(None, None).context("open a pseudo-terminal")?;
    // An open directory of the host without close-on-exec, as a launcher may
    // hold one: a sandbox that passes it on lets the command leave through it.
    let leak = nix::fcntl::open(
        dir,
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY,
        nix::sys::stat::Mode::empty(),
    )
    .with_context(|| format!("open {}", dir.display()))?;
    // SAFETY: a descriptor just opened here and owned by nothing else.
    let leak = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(leak) };
    let mut c = match user {
        None => {
            let mut c = Command::new(claude_shim);
            c.arg("--root").arg(dir.join("state"));
            c
        }
        Some(u) => {
            // The terminal becomes the user's controlling one, as a login's
            // is: without CAP_SYS_ADMIN, TIOCSTI works on that one only.
            let mut c = Command::new("setsid");
            c.args(["--ctty", "--wait", "setpriv"])
                .args([format!("--reuid={}", u.uid), format!("--regid={}", u.gid)])
                .args(["--clear-groups", "--"])
                .arg(claude_shim)
                .arg("--root")
                .arg(&u.state)
                .env("HOME", &u.home)
                .env("XDG_RUNTIME_DIR", &u.state)
                .current_dir(&u.tree);
            c
        }
    };
    let tree = user.map_or(&ctx.tree, |u| &u.tree);
    c.args(["verify", "--json", "--policy", policy, "--workdir"]).arg(tree);
    if let Some(p) = peers {
        c.arg("--peers").arg(p);
    }
    let out = c
        .stdin(Stdio::from(pty.slave))
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .output()
        .with_context(|| format!("run {} verify", claude_shim.display()))?;
    // The master is held until verify ended: TIOCSTI had a terminal to type into.
    drop(pty.master);
    drop(leak);
    let text = String::from_utf8_lossy(&out.stdout);
    match serde_json::from_str::<Value>(&text) {
        Ok(v) => Ok(v),
        Err(e) => bail!(
            "read verify --policy {policy}'s JSON ({e}); it exited with {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    }
}

/// verify's rows by check id, for one column of its side-by-side JSON (or of
/// a single report's JSON when `runtime` is None).
pub fn column_of(v: &Value, runtime: Option<&str>) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for row in v.as_array().into_iter().flatten() {
        let cell = match runtime {
            None => Some(row.clone()),
            Some(name) => row["runs"]
                .as_array()
                .and_then(|runs| runs.iter().find(|r| r["runtime"] == name))
                .and_then(|r| r.get("row").cloned()),
        };
        if let (Some(check), Some(cell)) = (row["check"].as_str(), cell) {
            out.insert(check.to_owned(), cell);
        }
    }
    out
}
