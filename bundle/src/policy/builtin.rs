//! The built-in lists a policy extends and may only shrink by an opt-out:
//! protected, hidden and masked paths, and the variables that always pass.

use std::path::PathBuf;

use super::values::WorkdirPath;
use crate::host_run::{Shape, HOST_RUN};

/// Paths inside the working directory that stay read-only although it is
/// writable: the names of the host-run list (`crate::host_run`), whose code
/// runs outside the sandbox later (git's repository, the agent's settings and
/// MCP servers, editor tasks, direnv, shell start-up files). Derived, so the
/// two never drift. A directory (and `.git`) is written with a trailing `/`.
pub fn builtin_protected() -> Vec<WorkdirPath> {
    HOST_RUN
        .iter()
        .map(|h| WorkdirPath {
            path: PathBuf::from(h.name),
            dir: h.shape != Shape::File,
        })
        .collect()
}

/// Secrets of the caller that read as empty inside the sandbox.
pub const BUILTIN_HIDDEN: &[&str] = &[
    "~/.ssh",
    "~/.aws",
    "~/.gnupg",
    "~/.config/gcloud",
    "~/.azure",
    "~/.netrc",
    "~/.Xauthority",
    "~/.docker/config.json",
    "~/.kube",
    "~/.git-credentials",
    "~/.config/gh/hosts.yml",
    "~/.npmrc",
    "~/.pypirc",
    "~/.cargo/credentials.toml",
    "~/.claude/.credentials.json",
];

/// Host paths covered with an empty tmpfs: per-user runtime directories
/// (D-Bus, agent and IDE sockets) and secrets injected by engines.
pub const BUILTIN_MASKED: &[&str] = &["/run/user", "/run/secrets", "/var/run/secrets"];

/// Variables that always pass (when set) whatever `environment.allow` says.
pub const FIXED_ENV: &[&str] = &["PATH", "HOME", "TERM", "LANG"];
