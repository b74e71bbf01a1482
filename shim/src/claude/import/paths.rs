//! The paths of settings, resolved as Claude Code resolves them, and where
//! each kind of path setting lands in the policy.

use std::path::{Component, Path, PathBuf};

use super::{q, Env, Imported, Source, HOST_CONFIG};

pub(super) fn has_glob(s: &str) -> bool {
    s.contains(['*', '?', '[', ']', '{', '}'])
}

/// `a/b/../c` -> `a/c`, as Node's path.resolve does.
pub(super) fn lexical(p: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(n) => out.push(n),
            // As path.resolve: ".." at the root stays at the root.
            Component::ParentDir => {
                out.pop();
            }
            Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// An absolute path as the policy writes it: `~/...` under the home.
pub(super) fn policy_form(p: &Path, env: &Env) -> String {
    match p.strip_prefix(&env.home) {
        Ok(rel) if rel.as_os_str().is_empty() => "~".to_owned(),
        Ok(rel) => format!("~/{}", rel.display()),
        Err(_) => p.display().to_string(),
    }
}

/// How a path of the settings is resolved.
#[derive(Clone, Copy)]
pub(super) enum Syntax {
    /// `sandbox.filesystem.*` (and additionalDirectories): `//x` and `/x`
    /// absolute, `~/x` the home, others relative to the settings' root.
    Sandbox,
    /// A Read/Edit rule: `//x` absolute, `/x` relative to the settings'
    /// root, `~/x` the home, others relative to the working directory.
    Rule,
    /// srt: absolute, `~/x`, others relative to the working directory.
    Srt,
}

/// What a setting's path names: an absolute host path, with a trailing
/// `/**` (everything below a directory) taken as the directory.
pub(super) fn resolve(raw: &str, syntax: Syntax, root: &Path, env: &Env) -> Result<PathBuf, String> {
    let p = raw.trim();
    let p = p.strip_suffix("/**").unwrap_or(p);
    if p.is_empty() {
        return Err("an empty path".into());
    }
    if has_glob(p) {
        return Err("a glob pattern; a policy names paths, not patterns".into());
    }
    let joined = if let Some(rest) = p.strip_prefix("//") {
        PathBuf::from("/").join(rest)
    } else if p == "~" {
        env.home.clone()
    } else if let Some(rest) = p.strip_prefix("~/") {
        env.home.join(rest)
    } else if p.starts_with('~') {
        return Err("only the caller's own home (~/...) can be named".into());
    } else if let Some(rest) = p.strip_prefix('/') {
        match syntax {
            Syntax::Rule => root.join(rest),
            Syntax::Sandbox | Syntax::Srt => PathBuf::from(p),
        }
    } else {
        match syntax {
            Syntax::Sandbox => root.join(p),
            Syntax::Rule | Syntax::Srt => env.cwd.join(p),
        }
    };
    if joined.as_os_str().as_encoded_bytes().contains(&0) {
        return Err("a NUL byte".into());
    }
    lexical(&joined).ok_or_else(|| "not a Unix path".to_owned())
}

/// `Tool(specifier)` -> (tool, specifier).
pub(super) fn rule_parts(rule: &str) -> (&str, Option<&str>) {
    match rule.split_once('(') {
        Some((t, rest)) if rest.ends_with(')') => (t, Some(&rest[..rest.len() - 1])),
        _ => (rule, None),
    }
}

impl Imported {
    /// `at` names the setting and its value.
    pub(super) fn deny_read(&mut self, raw: &str, syntax: Syntax, src: &Source, env: &Env, at: &str) {
        let p = match resolve(raw, syntax, &src.root, env) {
            Ok(p) => p,
            Err(e) => return self.note(at, format!("{e}; not translated")),
        };
        if p == Path::new("/") {
            return self.note(at, "the whole filesystem cannot be hidden; not translated");
        }
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if p.starts_with(&env.cwd) && (name == ".env" || name.starts_with(".env.")) {
            return self.did(at, "filesystem.hide_env_files (on)");
        }
        let h = policy_form(&p, env);
        self.did(at, format!("filesystem.hidden {}", q(&h)));
        self.hidden.insert(h);
    }

    /// `at` names the setting and its value.
    pub(super) fn allow_write(&mut self, raw: &str, syntax: Syntax, src: &Source, env: &Env, at: &str) {
        let p = match resolve(raw, syntax, &src.root, env) {
            Ok(p) => p,
            Err(e) => return self.note(at, format!("{e}; not translated")),
        };
        if p.starts_with(&env.cwd) {
            return self.did(at, "the working directory (writable already)");
        }
        for c in HOST_CONFIG {
            let cp = resolve(c, Syntax::Srt, &src.root, env).expect("a fixed path");
            if cp.starts_with(&p) {
                return self.note(
                    at,
                    format!("would make {c} writable, and code there runs unsandboxed later; not translated"),
                );
            }
            // Below it too: ~/.claude/agents, ~/.claude/commands and the
            // like are read by the host's claude as much as ~/.claude is.
            if p.starts_with(&cp) {
                return self.note(
                    at,
                    format!("lies in {c}, which the host runs unsandboxed later, so it stays read-only; dropped"),
                );
            }
        }
        let w = policy_form(&p, env);
        self.did(at, format!("filesystem.writable {}", q(&format!("?{w}"))));
        self.writable.insert(w);
    }

    pub(super) fn deny_write(&mut self, raw: &str, syntax: Syntax, src: &Source, env: &Env, at: &str) {
        match resolve(raw, syntax, &src.root, env) {
            Ok(p) => self.deny_write.push((at.to_owned(), p)),
            Err(e) => self.note(at, format!("{e}; not translated")),
        }
    }

    /// Places the write denials, now that every grant is known.
    pub(super) fn settle_deny_write(&mut self, env: &Env) {
        for (at, p) in std::mem::take(&mut self.deny_write) {
            if let Ok(rel) = p.strip_prefix(&env.cwd) {
                if rel.as_os_str().is_empty() {
                    self.note(
                        &at,
                        "the whole working directory: use filesystem.workdir = \"ro\" by hand",
                    );
                    continue;
                }
                let r = rel.display().to_string();
                self.did(&at, format!("filesystem.protected {}", q(&r)));
                self.protected.insert(r);
                continue;
            }
            let form = policy_form(&p, env);
            if self.writable.remove(&form) {
                self.did(&at, format!("denied, so not filesystem.writable {}", q(&form)));
                continue;
            }
            let under_grant = self.writable.iter().any(|w| {
                resolve(w, Syntax::Srt, &env.cwd, env)
                    .map(|wp| p.starts_with(wp))
                    .unwrap_or(false)
            });
            if under_grant {
                self.did(&at, format!("filesystem.readonly {}", q(&format!("?{form}"))));
                self.readonly.insert(form);
            } else {
                self.did(&at, "outside the working directory the host is read-only already");
            }
        }
    }
}
