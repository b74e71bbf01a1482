//! Policy + invocation -> OCI spec. One pass per concern, in the order of the
//! spec: filesystem (`mounts`: root, skeleton, mounts, masked and read-only
//! paths), process (`process`: user, capabilities, no_new_privileges,
//! rlimits, environment), kernel isolation (`linux`: namespaces, id maps,
//! seccomp, resources) and the network annotations (`network`). Everything
//! about the machine comes through `HostView`, so the passes are pure and
//! unit-tested against a fake host.

mod linux;
mod mounts;
mod network;
mod process;

/// The kernel paths every sandbox masks and keeps read-only, and the CPU
/// period of its quota: the runtime's admin policy applies them to specs an
/// engine wrote.
pub use linux::CPU_PERIOD;
pub use mounts::{MASKED_PATHS, READONLY_PATHS};

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use oci_spec::runtime::{Spec, SpecBuilder};

use crate::annotations;
use crate::policy::Policy;

/// What `lstat` says of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathKind {
    Dir,
    File,
    /// A symlink and its target as stored (relative or absolute).
    Symlink(PathBuf),
    /// A socket, fifo or device.
    Other,
}

/// The machine as the compiler needs to see it; the binary implements it with
/// std::fs (and a fake implements it in tests).
pub trait HostView {
    /// `lstat(path)`; None when it does not exist (or cannot be reached).
    fn kind(&self, path: &Path) -> Option<PathKind>;
    /// The entries of a directory (for the host's `/`), without `.` and `..`.
    fn read_dir(&self, path: &Path) -> std::io::Result<Vec<(OsString, PathKind)>>;
    /// Files under `root` whose name satisfies `matches`, at most `max_depth`
    /// levels down and at most `max_entries` of them, not descending into
    /// `.git`, `node_modules` or `target` and not following symlinks.
    fn find(
        &self,
        root: &Path,
        matches: &dyn Fn(&str) -> bool,
        max_depth: usize,
        max_entries: usize,
    ) -> std::io::Result<Vec<PathBuf>>;
    /// The content of a file (a custom seccomp profile).
    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>>;
}

/// Who runs what, where: everything of one run that is not in the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The working directory: absolute, symlinks resolved; writable inside.
    pub workdir: PathBuf,
    /// The caller's home (what `~` means in the policy).
    pub home: PathBuf,
    /// The ids the process runs as (for root invoked through sudo, root: 0).
    pub uid: u32,
    pub gid: u32,
    /// The caller has no root privileges (decides `user_namespace = "auto"`).
    pub unprivileged: bool,
    /// The caller's environment; the policy decides what passes.
    pub env: Vec<(String, String)>,
    /// The command to run.
    pub args: Vec<String>,
    /// Give the process a new pseudo-terminal.
    pub terminal: bool,
    /// `--rootfs`: overrides the policy's `filesystem.root`.
    pub rootfs: Option<PathBuf>,
}

/// Something `write_bundle` creates under `<bundle>/rootfs` so mounts have
/// a mount point there (host root only). Paths are relative to the rootfs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkeletonEntry {
    Dir(PathBuf),
    /// An empty file.
    File(PathBuf),
    Symlink {
        path: PathBuf,
        target: PathBuf,
    },
}

/// A protected path missing from the working directory: the binary creates
/// it empty on the host before the run, so it can be mounted read-only and
/// the sandbox cannot plant it (a git hook, an MCP config...). It may remove
/// it after the run if it is still empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholder {
    pub path: PathBuf,
    /// A directory (else an empty file).
    pub dir: bool,
}

/// The result: a spec to write as config.json and what to create with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Compiled {
    pub spec: Spec,
    pub skeleton: Vec<SkeletonEntry>,
    pub placeholders: Vec<Placeholder>,
    /// Every loosening the policy spelled out, one line each (also in the
    /// `run.claude-shim.opt-outs` annotation), for `verify` to report.
    pub opt_outs: Vec<String>,
}

/// A policy that cannot be compiled for this invocation, in one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    #[error("policy {origin}: {field}: {message}")]
    Field {
        origin: String,
        field: String,
        message: String,
    },
    /// A problem of the invocation or of the machine, not of one field.
    #[error("{0}")]
    Invocation(String),
}

/// What every pass reads.
pub(crate) struct Ctx<'a> {
    pub policy: &'a Policy,
    pub host: &'a dyn HostView,
    pub inv: &'a Invocation,
    /// The user namespace applies.
    pub userns: bool,
}

impl Ctx<'_> {
    pub fn field_error(&self, field: impl Into<String>, message: impl Into<String>) -> CompileError {
        CompileError::Field {
            origin: self.policy.origin.clone(),
            field: field.into(),
            message: message.into(),
        }
    }
}

fn check_invocation(inv: &Invocation) -> Result<(), CompileError> {
    let bad = |m: String| Err(CompileError::Invocation(m));
    if !inv.workdir.is_absolute() {
        return bad(format!("working directory {} is not absolute", inv.workdir.display()));
    }
    if !inv.home.is_absolute() {
        return bad(format!("home directory {} is not absolute", inv.home.display()));
    }
    if inv.args.is_empty() || inv.args[0].is_empty() {
        return bad("no command to run".to_owned());
    }
    if let Some(r) = &inv.rootfs {
        if !r.is_absolute() {
            return bad(format!("rootfs {} is not absolute", r.display()));
        }
    }
    Ok(())
}

/// Compiles `policy` for one run.
pub fn compile(policy: &Policy, host: &dyn HostView, inv: &Invocation) -> Result<Compiled, CompileError> {
    check_invocation(inv)?;
    let userns = linux::wants_user_namespace(policy, inv).map_err(|m| CompileError::Field {
        origin: policy.origin.clone(),
        field: "identity.user_namespace".into(),
        message: m,
    })?;
    let ctx = Ctx {
        policy,
        host,
        inv,
        userns,
    };

    let fs = mounts::compile(&ctx)?;
    let mut env = process::environment(&ctx);
    network::environment(&ctx, &mut env);
    let proc = process::process(&ctx, env)?;
    let linux = linux::linux(&ctx, fs.masked_paths, fs.readonly_paths)?;

    let opt_outs = policy.opt_outs();
    let mut ann = HashMap::new();
    ann.insert(annotations::POLICY.to_owned(), policy.name().to_owned());
    network::annotations(&ctx, &mut ann);
    if policy.resources.best_effort {
        ann.insert(annotations::BEST_EFFORT_RESOURCES.to_owned(), "true".to_owned());
    }
    ann.insert(
        annotations::OPT_OUTS.to_owned(),
        serde_json::to_string(&opt_outs).expect("strings serialize"),
    );

    let spec = SpecBuilder::default()
        .version(oci_spec::runtime::VERSION)
        .root(fs.root)
        .mounts(fs.mounts)
        .process(proc)
        .hostname("sandbox")
        .annotations(ann)
        .linux(linux)
        .build()
        .map_err(|e| CompileError::Invocation(format!("build the spec: {e}")))?;
    Ok(Compiled {
        spec,
        skeleton: fs.skeleton,
        placeholders: fs.placeholders,
        opt_outs,
    })
}

pub(crate) fn depth(p: &Path) -> usize {
    p.components().count()
}

#[cfg(test)]
mod tests;
