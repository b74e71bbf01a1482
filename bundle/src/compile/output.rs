//! What a compile gives back: the spec with the skeleton and placeholders
//! the binary creates beside it, or a `CompileError` in one line.

use std::path::PathBuf;

use oci_spec::runtime::Spec;

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
    /// The host-run entries (`host_run`) under the working directory at
    /// start, as `host_run::present` lists them: what the quarantine at exit
    /// leaves alone. None: the run cannot make any (a read-only working
    /// directory).
    pub host_run: Option<Vec<PathBuf>>,
    /// Every loosening the policy spelled out, one line each (also in the
    /// `run.claude-shim.opt-outs` annotation), for `verify` to report.
    pub opt_outs: Vec<String>,
}

/// A policy that cannot be compiled for this invocation, in one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    #[error("use policy {origin}: {field}: {message}")]
    Field {
        origin: String,
        field: String,
        message: String,
    },
    /// A problem of the invocation or of the machine, not of one field.
    #[error("{0}")]
    Invocation(String),
}
