//! The built-in lists a policy extends and may only shrink by an opt-out:
//! protected, hidden and masked paths, and the variables that always pass.

/// Paths inside the working directory that stay read-only although it is
/// writable: code that runs outside the sandbox later (git hooks, git config,
/// the agent's own settings and MCP servers, shell start-up files, IDE
/// settings, direnv) must not be planted from inside it. A trailing `/`
/// marks a directory.
pub const BUILTIN_PROTECTED: &[&str] = &[
    ".git/hooks/",
    ".git/config",
    ".claude/",
    ".mcp.json",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".gitconfig",
    ".gitmodules",
    ".vscode/",
    ".idea/",
    ".envrc",
];

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
