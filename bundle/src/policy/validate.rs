//! The checks across fields, what a single value cannot tell: opt-outs of
//! built-ins that exist, binds that neither repeat nor hide in a hidden
//! path, modes and lists that agree. `load` runs them after parsing.

use std::path::Path;

use super::builtin::{builtin_protected, BUILTIN_HIDDEN};
use super::env::{self, is_secret_name};
use super::schema::Policy;
use super::values::{BindPath, ByteSize, HostPath, NetworkMode, PolicyPath};

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
            for (other, ob) in &binds[..i] {
                if ob.path == b.path {
                    return err(path, format!("{} is already listed in {other}", b.path));
                }
            }
            for h in fs.hidden_paths() {
                if same_base_under(&b.path, &h) {
                    return err(
                        path,
                        format!(
                            "{} is a hidden path or lies under one ({h}); list it in filesystem.unhidden first",
                            b.path
                        ),
                    );
                }
            }
        }
        for (i, b) in fs.unix_sockets.iter().enumerate() {
            let field = format!("filesystem.unix_sockets[{i}]");
            if let PolicyPath::Absolute(p) = &b.path {
                if p == Path::new("/") || PSEUDO.iter().any(|ps| under(p, Path::new(ps))) {
                    return err(field, format!("{} is not a host socket path", b.path));
                }
                // A socket in a masked directory would need a mount point in
                // its read-only tmpfs.
                if let Some(m) = fs.masked_paths().into_iter().find(|m| under(p, m)) {
                    return err(field, format!("{} lies under the masked path {}", b.path, m.display()));
                }
            }
            if fs.unix_sockets[..i].iter().any(|o| o.path == b.path) {
                return err(field, format!("{} is listed twice", b.path));
            }
            if let Some(h) = fs.hidden_paths().into_iter().find(|h| same_base_under(&b.path, h)) {
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
        let mut seen = Vec::new();
        for (i, s) in self.seccomp.allow.iter().enumerate() {
            if seen.contains(&&s.0) {
                return err(format!("seccomp.allow[{i}]"), format!("{:?} is listed twice", s.0));
            }
            seen.push(&s.0);
        }
        Ok(())
    }
}

/// `a` equals `b` or lies under it, when both are written from the same base.
fn same_base_under(a: &PolicyPath, b: &PolicyPath) -> bool {
    match (a, b) {
        (PolicyPath::Absolute(x), PolicyPath::Absolute(y)) | (PolicyPath::Home(x), PolicyPath::Home(y)) => {
            x.starts_with(y)
        }
        _ => false,
    }
}
