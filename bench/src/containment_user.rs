//! The containment group's unprivileged-user columns: every peer that can
//! run without root, run by the user hack/setup makes, on that user's copy
//! of the source tree: the bare host as that user (the baseline of these
//! columns), bwrap, srt, Codex's sandbox, runc, crun and runsc rootless on
//! the bundle `runc spec --rootless` makes, `claude-shim run` on it, and
//! `claude-shim sandbox` with the agent and offline policies. A peer that
//! cannot run as a user keeps its column, with the reason. Above
//! `containment`, whose verify runs it uses; read in `containment_table`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::bundle::{self, Layout, Variant};
use crate::case::{err_text, Ctx};
use crate::containment::{unavailable, verify, AsUser, Peer, UserRaw, POLICY};
use crate::runtimes::{bwrap_flags, Kind, Runtime, CODEX_FLAGS};

/// Where verify binds its probe into an OCI peer's rootfs (shim's
/// `verify::spec::PROBE_PATH`), relative to the rootfs.
const PROBE_MOUNT_POINT: &str = "dev/.claude-shim-probe";

/// The unprivileged user (hack/setup creates it, as for the rootless tests).
pub const USER: &str = "claude-shim-test";

/// What a user column's name adds to its root column's.
pub const SUFFIX: &str = " as user";

/// runc's `spec --rootless` bundle, as the OCI columns' label says.
const ROOTLESS: &str = "runc spec --rootless";

/// crun refuses a hybrid cgroup layout; as root the harness hides the
/// unified hierarchy in a mount namespace, which a user can only make
/// inside a user namespace of its own: there crun runs as rootless podman
/// runs it, as root of that namespace, with the unified hierarchy covered.
const HIDE_CGROUP2: &str = "mount -t tmpfs none /sys/fs/cgroup/unified && exec \"$0\" \"$@\"";

/// The user's columns in the order of the root ones, and the user with its
/// directories (or why there is none: every column then says so).
pub fn peers(ctx: &Ctx, layout: &Layout) -> (Vec<Peer>, Result<AsUser, String>) {
    let user = prepare(ctx, layout).map_err(|e| err_text(&e));
    let mut out = vec![column("host", Kind::Host, None)];
    out[0].launch = Some(json!({"name": out[0].name, "argv": []}));
    let mut n = 0;
    for rt in &ctx.rts {
        match rt.kind {
            Kind::Host | Kind::Sandbox => {}
            Kind::Runc | Kind::Crun | Kind::Runsc | Kind::ClaudeShim => {
                n += 1;
                let wrapped = needs_own_userns(rt);
                let label = if wrapped {
                    format!("{ROOTLESS}, inside unshare -Ur")
                } else {
                    ROOTLESS.to_owned()
                };
                let mut p = column(&crate::plan::label_of(&rt.name, &label), rt.kind, Some(rt));
                p.pair = Some(crate::plan::label_of(&rt.name, "runc spec"));
                if let (None, Ok(u)) = (&p.reason, &user) {
                    match oci_peer(rt, &p.name, u, layout, n, wrapped) {
                        Ok(v) => p.launch = Some(v),
                        Err(e) => p.reason = Some(err_text(&e)),
                    }
                }
                out.push(p);
            }
            Kind::Bwrap | Kind::Srt | Kind::Codex => {
                let root_name = match rt.kind {
                    Kind::Bwrap => "bwrap (Claude Code's flags)".to_owned(),
                    _ => rt.name.clone(),
                };
                let mut p = column(&root_name, rt.kind, Some(rt));
                if let (None, Ok(u)) = (&p.reason, &user) {
                    p.launch = Some(launcher(rt, &p.name, u));
                }
                out.push(p);
            }
        }
    }
    if let Err(e) = &user {
        for p in &mut out {
            p.launch = None;
            p.reason.get_or_insert_with(|| e.clone());
        }
    }
    (out, user)
}

fn column(root_name: &str, kind: Kind, rt: Option<&Runtime>) -> Peer {
    Peer {
        name: format!("{root_name}{SUFFIX}"),
        kind,
        variant: String::new(),
        launch: None,
        reason: rt.and_then(|rt| unavailable(&rt.availability)),
        pair: Some(root_name.to_owned()),
    }
}

/// crun on a hybrid host, and runsc, whose `--rootless` cannot start its
/// gofer without one here ("fork/exec /proc/self/exe: operation not
/// permitted"), run inside a user namespace the user made.
fn needs_own_userns(rt: &Runtime) -> bool {
    rt.kind == Kind::Runsc || rt.kind == Kind::Crun && rt.hide_cgroup2
}

/// The user, its home, state root and copy of the tree, all its own; the
/// rootfs gets the mount point of that tree (it is root's and read-only).
fn prepare(ctx: &Ctx, layout: &Layout) -> Result<AsUser> {
    let Some(user) = nix::unistd::User::from_name(USER).with_context(|| format!("look up user {USER}"))? else {
        bail!("no user {USER} here (hack/setup creates it)");
    };
    let dir = ctx.work.join("containment-user");
    let _ = fs::remove_dir_all(&dir);
    let u = AsUser {
        uid: user.uid.as_raw(),
        gid: user.gid.as_raw(),
        home: dir.join("home"),
        tree: dir.join("tree"),
        state: dir.join("state"),
    };
    for d in [&u.home, &u.state] {
        fs::create_dir_all(d).with_context(|| format!("create {}", d.display()))?;
    }
    let copy = Command::new("cp")
        .arg("-a")
        .arg(&ctx.tree)
        .arg(&u.tree)
        .status()
        .context("run cp")?;
    if !copy.success() {
        bail!(
            "copy {} to {}: cp exited with {copy}",
            ctx.tree.display(),
            u.tree.display()
        );
    }
    let owner = format!("{}:{}", u.uid, u.gid);
    let chown = Command::new("chown")
        .args(["-R", "--no-dereference", &owner])
        .args([&u.home, &u.state, &u.tree])
        .status()
        .context("run chown")?;
    if !chown.success() {
        bail!("give {} to {USER}: chown exited with {chown}", dir.display());
    }
    let inside = layout.rootfs.join(u.tree.strip_prefix("/").unwrap_or(&u.tree));
    fs::create_dir_all(&inside).with_context(|| format!("create {}", inside.display()))?;
    // runsc's gofer makes a bind mount's target in the rootfs on the host,
    // which a rootless gofer cannot do in this root-owned skeleton: the
    // probe's mount point (verify's PROBE_PATH) is made here.
    let probe = layout.rootfs.join(PROBE_MOUNT_POINT);
    if !probe.exists() {
        fs::write(&probe, b"").with_context(|| format!("create {}", probe.display()))?;
    }
    Ok(u)
}

/// verify's entry for bwrap, srt or Codex, launched by the user on its tree.
fn launcher(rt: &Runtime, name: &str, u: &AsUser) -> Value {
    let tree = u.tree.display().to_string();
    let mut argv = vec![rt.path.as_ref().map(|p| p.display().to_string()).unwrap_or_default()];
    match rt.kind {
        Kind::Bwrap => {
            argv.extend(bwrap_flags(&u.tree, &u.home));
            argv.extend(["--chdir".into(), tree, "--".into()]);
        }
        Kind::Srt => argv.extend(["-s".into(), rt.srt_settings().display().to_string()]),
        _ => {
            argv.extend(CODEX_FLAGS.iter().map(|s| s.to_string()));
            argv.extend(["-C".into(), tree, "--".into()]);
        }
    }
    json!({"name": name, "argv": argv})
}

/// verify's entry for a rootless OCI runtime on `runc spec --rootless`'s
/// bundle, whose root is the user (or, inside the user's own namespace,
/// that namespace's root, which is the user).
fn oci_peer(rt: &Runtime, name: &str, u: &AsUser, layout: &Layout, n: usize, wrapped: bool) -> Result<Value> {
    let user_layout = Layout {
        rootfs: layout.rootfs.clone(),
        ro_dirs: layout.ro_dirs.clone(),
        tree: u.tree.clone(),
        bin_dir: layout.bin_dir.clone(),
    };
    let mut v = Variant::new(vec!["/bin/true".into()]);
    v.cwd = u.tree.display().to_string();
    let mut config = bundle::config(&user_layout, &v);
    let (uid, gid) = if wrapped { (0, 0) } else { (u.uid, u.gid) };
    bundle::rootless(&mut config, uid, gid);
    let dir = u.state.parent().unwrap_or(&u.state).join(format!("bundle-{n}"));
    bundle::write_config(&dir, &config)?;
    let path = rt.path.clone().unwrap_or_default().display().to_string();
    let mut args: Vec<String> = Vec::new();
    match rt.kind {
        Kind::Runc => args.extend(["--rootless".into(), "true".into()]),
        Kind::Runsc => {
            args.extend(["--rootless".into(), "--network=none".into()]);
            args.extend(rt.platform.iter().map(|p| format!("--platform={p}")));
        }
        _ => {}
    }
    if !wrapped {
        return Ok(json!({"name": name, "runtime": path, "runtime_args": args, "bundle": dir}));
    }
    let mut wrapper: Vec<String> = vec!["-Ur".into()];
    if rt.kind == Kind::Crun {
        wrapper.extend(["-m", "--propagation", "private", "sh", "-c", HIDE_CGROUP2].map(String::from));
    }
    wrapper.push(path);
    wrapper.extend(args);
    Ok(json!({"name": name, "runtime": "/usr/bin/unshare", "runtime_args": wrapper, "bundle": dir}))
}

/// Runs verify as the user: the agent policy with every user peer beside
/// its own sandbox, and the offline policy alone. Check names that carry
/// the user's tree are renamed to root's, so both land on the same rows.
pub fn measure(ctx: &Ctx, claude_shim: &Path, peers: Vec<Peer>, user: Result<AsUser, String>) -> UserRaw {
    let u = match user {
        Ok(u) => u,
        Err(e) => {
            return UserRaw {
                peers,
                agent: Err(e.clone()),
                offline: Err(e),
            }
        }
    };
    let dir = u.state.parent().map_or_else(|| u.state.clone(), PathBuf::from);
    let rename = |v: Result<Value>| -> Result<Value, String> {
        let text = v.map_err(|e| err_text(&e))?.to_string();
        let text = text.replace(&u.tree.display().to_string(), &ctx.tree.display().to_string());
        serde_json::from_str(&text).map_err(|e| e.to_string())
    };
    let list: Vec<&Value> = peers.iter().filter_map(|p| p.launch.as_ref()).collect();
    let file = dir.join("peers.json");
    let agent = serde_json::to_vec_pretty(&list)
        .map_err(anyhow::Error::from)
        .and_then(|t| fs::write(&file, t).with_context(|| format!("write {}", file.display())))
        .and_then(|()| verify(ctx, claude_shim, POLICY, Some(&file), &dir, Some(&u)));
    let offline = verify(ctx, claude_shim, "offline", None, &dir, Some(&u));
    UserRaw {
        peers,
        agent: rename(agent),
        offline: rename(offline),
    }
}
