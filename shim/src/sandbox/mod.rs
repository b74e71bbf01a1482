//! Policy -> bundle -> container for one command: `claude-shim sandbox` and
//! `claude-shim bundle`. The policy is compiled by the bundle crate against
//! this machine (`host`), written as a bundle, and run by the runtime like any
//! other; everything made for the run is removed on the way out.

pub mod denials;
pub mod env_index;
pub mod follow;
pub mod gc;
pub mod hand_over;
pub mod host;
pub mod lease;
pub mod lookup;
pub mod nested;
pub mod policy_file;
pub mod quarantine;
pub mod review;
pub mod root_only;
pub mod run;
pub mod sockets;
pub mod workspace;

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use claude_shim_bundle::{compile, write_bundle, Compiled, Invocation, Placeholder, Policy, RunAs, WriteOptions};

/// `$XDG_STATE_HOME/claude-shim/NAME` (default `~/.local/state/...`): what
/// claude-shim keeps for the user (`logs` of the last runs, the agent's
/// configuration of `claude`), created where missing. A sandbox whose
/// working directory is the home can write there, so nothing below the home
/// (or below $XDG_STATE_HOME when it lies elsewhere) is followed if it is a
/// link.
pub fn state_dir(name: &str) -> Result<crate::hostfs::Dir> {
    let (anchor, rel, is_xdg) = state_anchor(name)?;
    if is_xdg {
        make_missing(&anchor)?;
    }
    Ok(crate::hostfs::Dir::create_beneath(&anchor, &rel, 0o700)?)
}

/// $XDG_STATE_HOME that does not exist yet is made, 0700, as the XDG Base
/// Directory specification says ("an attempt should be made to create it
/// with permission 0700"): failing instead left every quarantine of a run
/// undone. Its folders are the user's to name, as the variable is.
fn make_missing(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("create the state directory {} (XDG_STATE_HOME)", dir.display())),
        _ => Ok(()),
    }
}

/// Where `state_dir(name)` is, made or not.
pub fn state_path(name: &str) -> Result<PathBuf> {
    let (anchor, rel, _) = state_anchor(name)?;
    Ok(anchor.join(rel))
}

/// The trusted directory the state directory is reached from (the home, or
/// $XDG_STATE_HOME outside it), the path below it, and whether the anchor
/// is $XDG_STATE_HOME.
fn state_anchor(name: &str) -> Result<(PathBuf, PathBuf, bool)> {
    // Without $HOME (a root shell from a service, `env -i`), the user's
    // home from the password database, as glib's and Python's lookups do:
    // the quarantine is made at start, so every run needs its state.
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::geteuid())
                .ok()
                .flatten()
                .map(|u| u.dir)
        })
        .filter(|h| h.is_absolute());
    let xdg = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|x| x.is_absolute());
    let (anchor, rel, is_xdg) = match (xdg, home) {
        (Some(x), Some(h)) if x.starts_with(&h) => (h.clone(), x.strip_prefix(&h).unwrap_or(&x).to_path_buf(), false),
        (Some(x), _) => (x, PathBuf::new(), true),
        (None, Some(h)) => (h, PathBuf::from(".local/state"), false),
        (None, None) => {
            anyhow::bail!("find the state directory: HOME is not set and the user has no home in the password database")
        }
    };
    Ok((anchor, rel.join("claude-shim").join(name), is_xdg))
}

/// `--policy`: a path, or the name of an embedded policy (`agent`, `offline`).
pub fn load_policy(arg: Option<&str>) -> Result<Policy> {
    match arg {
        None | Some("agent") => Ok(Policy::embedded_default()),
        Some("offline") => Ok(Policy::embedded_offline()),
        Some(path) => {
            let text = crate::bounded::read_to_string(Path::new(path), crate::bounded::POLICY_LIMIT)
                .with_context(|| format!("read policy {path}"))?;
            Policy::from_toml_str(&text, path).map_err(|e| anyhow!("{e}"))
        }
    }
}

/// Who runs what, where, as the compiler needs to know it.
pub fn invocation(
    workdir: Option<&Path>,
    rootfs: Option<&Path>,
    args: &[String],
    terminal: bool,
) -> Result<Invocation> {
    let workdir = match workdir {
        Some(w) => w.to_path_buf(),
        None => std::env::current_dir().context("read the working directory")?,
    };
    let workdir =
        std::fs::canonicalize(&workdir).with_context(|| format!("open working directory {}", workdir.display()))?;
    if !workdir.is_dir() {
        anyhow::bail!("use working directory {}: it is not a directory", workdir.display());
    }
    let uid = nix::unistd::geteuid().as_raw();
    let gid = nix::unistd::getegid().as_raw();
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"));
    let rootfs = match rootfs {
        Some(r) => Some(std::fs::canonicalize(r).with_context(|| format!("open rootfs {}", r.display()))?),
        None => None,
    };
    Ok(Invocation {
        workdir,
        home,
        uid,
        gid,
        unprivileged: uid != 0,
        env: std::env::vars().collect(),
        args: args.to_vec(),
        terminal,
        rootfs,
    })
}

/// Who a sandbox for `inv` runs as on the host (what `compile` decides too).
pub fn run_as(inv: &Invocation) -> RunAs {
    RunAs::decide(&host::StdHost::new(None), inv)
}

/// `index_dir`: where the `.env` search keeps its index (see env_index).
/// The policy's file, when it has one, is named in an annotation
/// (`allow --save` writes there); the process has not changed directory
/// since the policy was loaded, so a relative path still names it.
pub fn compile_policy(policy: &Policy, inv: &Invocation, index_dir: Option<&Path>) -> Result<Compiled> {
    let host = host::StdHost::new(index_dir.map(Path::to_path_buf));
    let mut compiled = compile(policy, &host, inv).map_err(|e| anyhow!("{e}"))?;
    if !policy.origin.starts_with("embedded:") {
        if let Ok(file) = std::fs::canonicalize(&policy.origin) {
            let mut ann = compiled.spec.annotations().clone().unwrap_or_default();
            ann.insert(
                claude_shim_bundle::annotations::POLICY_FILE.to_owned(),
                file.to_string_lossy().into_owned(),
            );
            compiled.spec.set_annotations(Some(ann));
        }
    }
    Ok(compiled)
}

/// `--publish [HOSTPORT:]PORT` arguments added to the policy's published ports.
pub fn add_published(policy: &mut Policy, args: &[String]) -> Result<()> {
    use claude_shim_bundle::policy::values::Publish;
    for a in args {
        let p = Publish::parse(a).map_err(|e| anyhow!("use --publish {a}: {e}"))?;
        if let Some(q) = policy.network.publish.iter().find(|q| q.host == p.host) {
            anyhow::bail!("use --publish {a}: host port {} is already published ({q})", p.host);
        }
        policy.network.publish.push(p);
    }
    Ok(())
}

/// Protected paths missing from the working directory are created empty so
/// they can be mounted read-only (the sandbox cannot plant a git hook or an
/// MCP config there). For `bundle`, which leaves them; a run uses `lease`.
pub fn create_placeholders(workdir: &Path, placeholders: &[Placeholder]) -> Result<Vec<Placeholder>> {
    let wd = crate::hostfs::Dir::open(workdir)?;
    let mut made = Vec::new();
    for p in placeholders {
        if create_placeholder(&wd, p)? {
            made.push(p.clone());
        }
    }
    Ok(made)
}

/// Creates one placeholder below `wd` (a handle on the working directory:
/// a sandbox may have planted links in it) unless something is at its
/// path; true if it did.
pub fn create_placeholder(wd: &crate::hostfs::Dir, p: &Placeholder) -> Result<bool> {
    let Ok(rel) = p.path.strip_prefix(wd.path()) else {
        anyhow::bail!(
            "create placeholder {}: it is not in the working directory {}",
            p.path.display(),
            wd.path().display()
        );
    };
    if wd.stat(rel)?.is_some() {
        return Ok(false);
    }
    let r = if p.dir {
        wd.create_dir(rel, 0o755)
    } else {
        wd.write_new(rel, b"", 0o644)
    };
    match r {
        Ok(()) => {
            give_to_parents_owner(wd, rel);
            Ok(true)
        }
        Err(e) if e.is_exists() => Ok(false),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
            ) =>
        {
            let who = nix::unistd::User::from_uid(nix::unistd::geteuid())
                .ok()
                .flatten()
                .map(|u| u.name)
                .unwrap_or_else(|| format!("uid {}", nix::unistd::geteuid()));
            anyhow::bail!(
                "use {} as the project: {who} cannot write it ({e}), and the sandbox needs {} there, \
                 created empty and mounted read-only; run from a project you can write, or make it writable",
                wd.path().display(),
                rel.display()
            )
        }
        Err(e) => Err(e.into()),
    }
}

/// As root in a user's project, a placeholder is the user's like the rest of
/// it: the sandbox (which runs as that user) gets EROFS from its read-only
/// mount rather than EACCES, and the user can remove one a killed run left.
/// Through the working directory's handle: nothing on the way is followed.
fn give_to_parents_owner(wd: &crate::hostfs::Dir, rel: &Path) {
    if !nix::unistd::geteuid().is_root() {
        return;
    }
    let parent = rel.parent().unwrap_or(Path::new(""));
    let Ok(Some(st)) = wd.stat(parent) else { return };
    if st.kind == crate::hostfs::Kind::Dir && st.uid != 0 {
        if let Err(e) = wd.chown(rel, st.uid, st.gid) {
            tracing::debug!("give placeholder to uid {}: {e}", st.uid);
        }
    }
}

/// Points `compiled` at a rootfs skeleton shared by every `sandbox` run with
/// the same skeleton, in the runtime's state directory, made once: a run then
/// writes no skeleton and removes none. Removing one is slow: each directory
/// was a mount point in the container's mount namespace, which the kernel is
/// still tearing down when the run ends. Sharing is safe because the
/// container's root is read-only (checked here) and everything mounted on the
/// skeleton is mounted in the container's own mount namespace.
pub fn share_skeleton(compiled: &mut Compiled, state_dir: &Path) -> Result<()> {
    use std::hash::Hasher;
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let Some(root) = compiled.spec.root().as_ref() else {
        return Ok(());
    };
    if compiled.skeleton.is_empty() || root.path() != Path::new("rootfs") || root.readonly() != Some(true) {
        return Ok(());
    }
    let mut h = fnv::FnvHasher::default();
    h.write(format!("{:?}", compiled.skeleton).as_bytes());
    let dir = state_dir.join(format!("rootfs-{:016x}", h.finish()));
    let ours = |p: &Path| {
        std::fs::symlink_metadata(p)
            .is_ok_and(|m| m.is_dir() && m.uid() == nix::unistd::geteuid().as_raw() && m.mode() & 0o022 == 0)
    };
    if !ours(&dir) {
        let tmp = state_dir.join(format!(
            ".{}.new-{}",
            dir.file_name().unwrap_or_default().to_string_lossy(),
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(&tmp)
            .with_context(|| format!("create {}", tmp.display()))?;
        let made = claude_shim_bundle::fill_skeleton(&tmp, &tmp, &compiled.skeleton)
            .map_err(|e| anyhow!("{e}"))
            .and_then(|()| {
                std::fs::rename(&tmp, &dir).with_context(|| format!("rename {} to {}", tmp.display(), dir.display()))
            });
        if let Err(e) = made {
            let _ = std::fs::remove_dir_all(&tmp);
            // Another run made it meanwhile.
            if !ours(&dir) {
                return Err(e);
            }
        }
    }
    if let Some(r) = compiled.spec.root_mut() {
        r.set_path(dir);
    }
    compiled.skeleton.clear();
    Ok(())
}

/// `transient`: removed after one run (see WriteOptions).
pub fn write(out: &Path, compiled: &Compiled, overwrite: bool, transient: bool) -> Result<()> {
    write_bundle(out, compiled, WriteOptions { overwrite, transient }).map_err(|e| anyhow!("{e}"))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_missing_xdg_state_home_is_made_0700() {
        let t = tempfile::tempdir().unwrap();
        let x = t.path().join("a/state");
        super::make_missing(&x).unwrap();
        for d in [t.path().join("a"), x.clone()] {
            assert_eq!(
                std::fs::metadata(&d).unwrap().permissions().mode() & 0o777,
                0o700,
                "{}",
                d.display()
            );
        }
        // One that is there is left as it is.
        std::fs::set_permissions(&x, std::fs::Permissions::from_mode(0o755)).unwrap();
        super::make_missing(&x).unwrap();
        assert_eq!(std::fs::metadata(&x).unwrap().permissions().mode() & 0o777, 0o755);
    }
}
