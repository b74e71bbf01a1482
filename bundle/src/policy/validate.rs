//! The checks across fields, what a single value cannot tell: opt-outs of
//! built-ins that exist, binds that neither repeat nor hide in a hidden
//! path, modes and lists that agree. `load` runs them after parsing.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::builtin::{builtin_protected, BUILTIN_HIDDEN};
use super::env::{self, is_secret_name};
use super::schema::Policy;
use super::values::{Access, BindPath, ByteSize, HostPath, NetworkMode, PolicyPath, Workspace};

/// A field path and what is wrong with it, before the origin is added.
pub(crate) type FieldError = (String, String);

fn err<T>(path: impl Into<String>, msg: impl Into<String>) -> Result<T, FieldError> {
    Err((path.into(), msg.into()))
}

/// Paths the sandbox gets from the kernel, never from the host.
const PSEUDO: &[&str] = &["/proc", "/sys", "/dev"];

fn under(path: &Path, base: &Path) -> bool {
    path.starts_with(base)
}

impl Policy {
    /// Checks across fields (what a single value cannot tell).
    pub(crate) fn validate(&self) -> Result<(), FieldError> {
        let fs = &self.filesystem;
        if fs.workspace == Workspace::Review && fs.workdir == Access::Ro {
            return err(
                "filesystem.workspace",
                "\"review\" keeps the sandbox's writes to the working directory in a layer, and workdir = \"ro\" allows none: choose one",
            );
        }
        for (i, u) in fs.unprotected.iter().enumerate() {
            if !builtin_protected().iter().any(|b| b.path == u.path) {
                return err(
                    format!("filesystem.unprotected[{i}]"),
                    format!("{u} is not a built-in protected path"),
                );
            }
        }
        for (i, u) in fs.unhidden.iter().enumerate() {
            if !BUILTIN_HIDDEN
                .iter()
                .any(|b| HostPath::try_from(b.to_string()).map(|h| h == *u).unwrap_or(false))
            {
                return err(
                    format!("filesystem.unhidden[{i}]"),
                    format!("{u} is not a built-in hidden path"),
                );
            }
        }
        let mut binds: Vec<(String, &BindPath)> = Vec::new();
        for (field, list) in [("writable", &fs.writable), ("readonly", &fs.readonly)] {
            for (i, b) in list.iter().enumerate() {
                binds.push((format!("filesystem.{field}[{i}]"), b));
            }
        }
        // Lists run to thousands of paths: each check is a lookup of the
        // path or of its ancestors, not a scan of every other entry.
        let mut first_bind: HashMap<&PolicyPath, usize> = HashMap::new();
        for (i, (_, b)) in binds.iter().enumerate() {
            first_bind.entry(&b.path).or_insert(i);
        }
        let hidden = Covering::new(fs.hidden_paths());
        let masked = Covering::new(fs.masked_paths().into_iter().map(PolicyPath::Absolute).collect());
        for (i, (path, b)) in binds.iter().enumerate() {
            if let PolicyPath::Absolute(p) = &b.path {
                if p == Path::new("/") {
                    return err(
                        path,
                        "\"/\" cannot be bound; the host's root is already visible read-only",
                    );
                }
                if let Some(ps) = PSEUDO.iter().find(|ps| under(p, Path::new(ps))) {
                    return err(
                        path,
                        format!("{}: {ps} comes from the kernel, not from the host", b.path),
                    );
                }
            }
            if let Some(other) = first_bind.get(&b.path).filter(|j| **j < i) {
                return err(path, format!("{} is already listed in {}", b.path, binds[*other].0));
            }
            if let Some(h) = hidden.covering(&b.path) {
                return err(
                    path,
                    format!(
                        "{} is a hidden path or lies under one ({h}); list it in filesystem.unhidden first",
                        b.path
                    ),
                );
            }
        }
        let mut first_socket: HashMap<&PolicyPath, usize> = HashMap::new();
        for (i, b) in fs.unix_sockets.iter().enumerate() {
            first_socket.entry(&b.path).or_insert(i);
        }
        for (i, b) in fs.unix_sockets.iter().enumerate() {
            let field = format!("filesystem.unix_sockets[{i}]");
            if let PolicyPath::Absolute(p) = &b.path {
                if p == Path::new("/") || PSEUDO.iter().any(|ps| under(p, Path::new(ps))) {
                    return err(field, format!("{} is not a host socket path", b.path));
                }
                // A socket in a masked directory would need a mount point in
                // its read-only tmpfs.
                if let Some(m) = masked.covering(&b.path) {
                    return err(field, format!("{} lies under the masked path {m}", b.path));
                }
            }
            if first_socket.get(&b.path).is_some_and(|j| *j < i) {
                return err(field, format!("{} is listed twice", b.path));
            }
            if let Some(h) = hidden.covering(&b.path) {
                return err(
                    field,
                    format!(
                        "{} lies under the hidden path {h}; list it in filesystem.unhidden first",
                        b.path
                    ),
                );
            }
        }
        for (i, m) in fs.masked.iter().enumerate() {
            if m.0 == Path::new("/") || PSEUDO.iter().any(|ps| under(&m.0, Path::new(ps))) {
                return err(
                    format!("filesystem.masked[{i}]"),
                    format!("{} cannot be masked", m.0.display()),
                );
            }
        }

        let env = &self.environment;
        for (i, n) in env.pass_secrets.iter().enumerate() {
            if !is_secret_name(&n.0) {
                return err(
                    format!("environment.pass_secrets[{i}]"),
                    format!("{} is not a secret name; list it in environment.allow instead", n.0),
                );
            }
        }
        for (name, value) in &env.set {
            let path = format!("environment.set.{}", name.0);
            if value.contains('\0') {
                // It becomes an envp entry, a C string: the container's init
                // would fail on it (issue 11: it panicked).
                return err(path, "the value holds a NUL byte");
            }
            if name.0 == "IS_SANDBOX" {
                return err(path, "IS_SANDBOX is always 1 inside the sandbox");
            }
            if self.network.mode == NetworkMode::Allowlist && env::PROXY_VARS.contains(&name.0.as_str()) {
                return err(path, "the proxy variables are set by the allowlist network mode");
            }
        }

        let net = &self.network;
        for (i, p) in net.publish.iter().enumerate() {
            if net.publish[..i].iter().any(|q| q.host == p.host) {
                return err(
                    format!("network.publish[{i}]"),
                    format!("host port {} is published twice", p.host),
                );
            }
        }
        match net.mode {
            NetworkMode::None => {
                for (field, empty) in [
                    ("allow", net.allow.is_empty()),
                    ("deny", net.deny.is_empty()),
                    ("allow_cidrs", net.allow_cidrs.is_empty()),
                ] {
                    if !empty {
                        return err(
                            format!("network.{field}"),
                            "has no effect with mode = \"none\" (loopback only)",
                        );
                    }
                }
            }
            NetworkMode::Allowlist => {
                if !net.allow_cidrs.is_empty() {
                    return err("network.allow_cidrs", "is only used with mode = \"public\"");
                }
            }
            NetworkMode::Public => {
                for (field, empty) in [("allow", net.allow.is_empty()), ("deny", net.deny.is_empty())] {
                    if !empty {
                        return err(
                            format!("network.{field}"),
                            "host names are filtered only with mode = \"allowlist\"; public mode filters addresses (allow_cidrs)",
                        );
                    }
                }
            }
        }

        if let Some(ByteSize(m)) = self.resources.memory {
            if m < 16 << 20 {
                return err(
                    "resources.memory",
                    format!("{m} bytes is below 16MiB, too little to start anything"),
                );
            }
        }
        let mut seen = HashSet::new();
        for (i, s) in self.seccomp.allow.iter().enumerate() {
            if !seen.insert(&s.0) {
                return err(format!("seccomp.allow[{i}]"), format!("{:?} is listed twice", s.0));
            }
        }
        Ok(())
    }
}

/// A list of paths, asked which of them a path equals or lies under (written
/// from the same base: absolute, or from `~`). The answer is the first such
/// entry in list order, found by looking up each ancestor of the path: the
/// cost is the path's depth, not the list's length.
struct Covering {
    index: HashMap<PolicyPath, usize>,
    list: Vec<PolicyPath>,
}

impl Covering {
    fn new(list: Vec<PolicyPath>) -> Self {
        let mut index = HashMap::new();
        for (i, p) in list.iter().enumerate() {
            index.entry(p.clone()).or_insert(i);
        }
        Self { index, list }
    }

    fn covering(&self, path: &PolicyPath) -> Option<&PolicyPath> {
        let (p, wrap): (&Path, fn(PathBuf) -> PolicyPath) = match path {
            PolicyPath::Absolute(p) => (p, PolicyPath::Absolute),
            PolicyPath::Home(p) => (p, PolicyPath::Home),
        };
        p.ancestors()
            .filter_map(|a| self.index.get(&wrap(a.to_path_buf())))
            .min()
            .map(|i| &self.list[*i])
    }
}
