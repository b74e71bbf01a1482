//! Policy -> bundle -> container for one command: `claude-shim sandbox` and
//! `claude-shim bundle`. The policy is compiled by the bundle crate against
//! this machine (`host`), written as a bundle, and run by the runtime like any
//! other; everything made for the run is removed on the way out.

pub mod denials;
pub mod host;
pub mod lease;

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use claude_shim_bundle::{compile, write_bundle, Compiled, Invocation, Placeholder, Policy, WriteOptions};

/// `$XDG_STATE_HOME/claude-shim` (default `~/.local/state/claude-shim`):
/// what claude-shim keeps for the user (logs of the last runs, the agent's
/// configuration of `claude`).
pub fn state_home() -> Result<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_STATE_HOME").filter(|x| Path::new(x).is_absolute()) {
        return Ok(PathBuf::from(x).join("claude-shim"));
    }
    let home = std::env::var_os("HOME").context("find the state directory: HOME is not set")?;
    Ok(PathBuf::from(home).join(".local/state/claude-shim"))
}

/// `--policy`: a path, or the name of an embedded policy (`agent`, `offline`).
pub fn load_policy(arg: Option<&str>) -> Result<Policy> {
    match arg {
        None | Some("agent") => Ok(Policy::embedded_default()),
        Some("offline") => Ok(Policy::embedded_offline()),
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("read policy {path}"))?;
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

pub fn compile_policy(policy: &Policy, inv: &Invocation) -> Result<Compiled> {
    compile(policy, &host::StdHost, inv).map_err(|e| anyhow!("{e}"))
}

/// Protected paths missing from the working directory are created empty so
/// they can be mounted read-only (the sandbox cannot plant a git hook or an
/// MCP config there). For `bundle`, which leaves them; a run uses `lease`.
pub fn create_placeholders(placeholders: &[Placeholder]) -> Result<Vec<Placeholder>> {
    let mut made = Vec::new();
    for p in placeholders {
        if create_placeholder(p)? {
            made.push(p.clone());
        }
    }
    Ok(made)
}

/// Creates one placeholder unless something is at its path; true if it did.
pub fn create_placeholder(p: &Placeholder) -> Result<bool> {
    if p.path.symlink_metadata().is_ok() {
        return Ok(false);
    }
    let r = if p.dir {
        std::fs::create_dir(&p.path)
    } else {
        std::fs::File::create_new(&p.path).map(|_| ())
    };
    r.with_context(|| format!("create placeholder {}", p.path.display()))?;
    Ok(true)
}

pub fn write(out: &Path, compiled: &Compiled, overwrite: bool) -> Result<()> {
    write_bundle(out, compiled, WriteOptions { overwrite }).map_err(|e| anyhow!("{e}"))
}
