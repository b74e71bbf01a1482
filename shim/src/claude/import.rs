//! `policy import`: Claude Code's sandbox settings (the `sandbox` and
//! `permissions` sections of its settings files) or an srt settings file
//! (`@anthropic-ai/sandbox-runtime`) as a claude-shim policy (TOML). What
//! maps is translated the way Claude Code 2.1 hands it to srt (Read deny
//! rules are read denials, Edit rules write grants and denials, WebFetch
//! domains network lists); every setting without an equivalent and every
//! key it does not know becomes a comment. Everything the settings do not
//! speak to is the default agent policy's. Pure: documents in, text out;
//! the caller finds and reads the files.

mod paths;
mod sections;

use std::collections::BTreeSet;
use std::path::PathBuf;

use claude_shim_bundle::policy::AGENT_TOML;
use claude_shim_bundle::Policy;
use serde_json::{Map, Value};

/// Where a settings document came from; decides what its relative paths mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `/etc/claude-code/managed-settings.json` and `managed-settings.d/`.
    Managed,
    /// `.claude/settings.local.json` of the project.
    Local,
    /// `.claude/settings.json` of the project.
    Project,
    /// `settings.json` of the user's configuration directory.
    User,
    /// A file named on the command line (as Claude Code's `--settings`).
    Named,
    /// An srt settings file.
    Srt,
}

impl Scope {
    fn label(self) -> &'static str {
        match self {
            Scope::Managed => "managed",
            Scope::Local => "project local",
            Scope::Project => "project",
            Scope::User => "user",
            Scope::Named => "named",
            Scope::Srt => "srt",
        }
    }
}

/// One settings document.
#[derive(Debug, Clone)]
pub struct Source {
    /// For comments: the file's path.
    pub name: String,
    pub scope: Scope,
    /// What a relative sandbox path is relative to: the project for managed
    /// and project settings, the configuration directory for user settings,
    /// the file's directory for a named file, the working directory for srt.
    pub root: PathBuf,
    pub value: Value,
}

/// The caller's side of paths.
#[derive(Debug, Clone)]
pub struct Env {
    pub home: PathBuf,
    /// Where the import runs; Claude Code's project directory.
    pub cwd: PathBuf,
}

/// Where Claude Code on Linux reads managed settings.
pub const MANAGED_DIR: &str = "/etc/claude-code";

/// Paths a writable grant must never reach: configuration that runs as the
/// user outside the sandbox later (Claude Code's hooks and MCP servers,
/// shell start-up files, git's configuration). Claude Code's own sandbox
/// denies writes to them whatever allowWrite says; so does the import.
const HOST_CONFIG: &[&str] = &[
    "~/.claude",
    "~/.claude.json",
    "~/.bashrc",
    "~/.bash_profile",
    "~/.bash_login",
    "~/.bash_logout",
    "~/.bash_aliases",
    "~/.profile",
    "~/.zshrc",
    "~/.zprofile",
    "~/.zshenv",
    "~/.zlogin",
    "~/.zlogout",
    "~/.gitconfig",
    "~/.config/git",
    "~/.npmrc",
];

/// The translation so far. Paths are kept as the policy writes them.
#[derive(Default, Debug)]
pub struct Imported {
    allow: BTreeSet<String>,
    deny: BTreeSet<String>,
    writable: BTreeSet<String>,
    readonly: BTreeSet<String>,
    hidden: BTreeSet<String>,
    protected: BTreeSet<String>,
    /// One line each: a setting and what it became.
    pub translated: Vec<String>,
    /// One line each: a setting that was not translated, and why.
    pub notes: Vec<String>,
    /// Denials whose place is only known once every grant is (a denyWrite
    /// under an allowWrite path becomes a read-only bind).
    deny_write: Vec<(String, PathBuf)>,
    /// Highest-precedence `sandbox.enabled` seen.
    enabled: Option<(bool, String)>,
}

/// JSON of a value, for comments: quoted and escaped, on one line.
fn js(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn q(s: &str) -> String {
    js(&Value::String(s.to_owned()))
}

impl Imported {
    fn note(&mut self, at: &str, what: impl std::fmt::Display) {
        self.notes.push(format!("{at}: {what}"));
    }

    fn did(&mut self, at: &str, what: impl std::fmt::Display) {
        self.translated.push(format!("{at} -> {what}"));
    }

    fn unknown(&mut self, obj: &Map<String, Value>, known: &[&str], at: &str) {
        for k in obj.keys() {
            if !known.contains(&k.as_str()) {
                self.note(&format!("{at}.{k}"), "unknown key; not translated");
            }
        }
    }

    /// The strings of a list; anything else is named and skipped.
    fn strings(&mut self, v: Option<&Value>, at: &str) -> Vec<String> {
        match v {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(|x| match x.as_str() {
                    Some(s) => Some(s.to_owned()),
                    None => {
                        self.note(at, format!("{} is not a string; skipped", js(x)));
                        None
                    }
                })
                .collect(),
            Some(other) => {
                self.note(at, format!("{} is not a list; skipped", js(other)));
                Vec::new()
            }
        }
    }

    /// What is only known once every file is read: where write denials go,
    /// grants the policy would refuse (under a hidden path), the effective
    /// `sandbox.enabled`.
    pub fn finish(&mut self, env: &Env) {
        self.settle_deny_write(env);
        // The agent policy's read-only binds stay (unless a hidden path
        // takes them, below): with its empty home they bring the tools back.
        for b in Policy::embedded_default().filesystem.readonly {
            self.readonly.insert(b.path.to_string());
        }
        let hidden: Vec<toml::Value> = self.hidden.iter().map(|h| toml::Value::String(h.clone())).collect();
        for field in ["writable", "readonly"] {
            let set = if field == "writable" {
                &self.writable
            } else {
                &self.readonly
            };
            let mut refused = Vec::new();
            for w in set {
                // The policy's own cross-field check, on this entry alone.
                let mut fs = toml::Table::new();
                fs.insert(
                    field.into(),
                    toml::Value::Array(vec![toml::Value::String(format!("?{w}"))]),
                );
                fs.insert("hidden".into(), toml::Value::Array(hidden.clone()));
                let mut doc = toml::Table::new();
                doc.insert("version".into(), toml::Value::Integer(1));
                doc.insert("filesystem".into(), toml::Value::Table(fs));
                let text = toml::to_string(&doc).unwrap_or_default();
                if let Err(e) = Policy::from_toml_str(&text, "imported") {
                    refused.push((w.clone(), e.to_string()));
                }
            }
            for (w, e) in refused {
                if field == "writable" {
                    self.writable.remove(&w);
                } else {
                    self.readonly.remove(&w);
                }
                let why = e.split_once(": ").map(|(_, m)| m.to_owned()).unwrap_or(e);
                // One verdict per setting: the settings that made this entry
                // are moved from the translated list to the dropped one.
                let made = format!(" -> filesystem.{field} {}", q(&format!("?{w}")));
                let (from, kept): (Vec<String>, Vec<String>) = std::mem::take(&mut self.translated)
                    .into_iter()
                    .partition(|t| t.ends_with(&made));
                self.translated = kept;
                if from.is_empty() {
                    self.note(&format!("filesystem.{field} {}", q(&w)), format!("dropped: {why}"));
                }
                for t in from {
                    let at = t[..t.len() - made.len()].to_owned();
                    self.note(&at, format!("filesystem.{field} {}: dropped: {why}", q(&w)));
                }
            }
        }
        match self.enabled.clone() {
            Some((false, at)) => self.note(&format!("{at}.enabled = false"), "claude-shim sandboxes anyway"),
            Some((true, at)) => self.note(
                &format!("{at}.enabled = true"),
                "claude-shim is the sandbox: `claude-shim claude` turns Claude Code's own sandbox off in the agent's copy of the settings (its bwrap cannot start inside, and would only sandbox twice); keep it on for claude run without claude-shim",
            ),
            None => {}
        }
    }

    /// The policy: the agent policy with the translated lists, as TOML,
    /// after a comment of what became what and what did not.
    pub fn render(&self, sources: &[Source]) -> Result<String, String> {
        let mut doc: toml::Table = toml::from_str(AGENT_TOML).map_err(|e| format!("the agent policy: {e}"))?;
        let list = |s: &BTreeSet<String>, prefix: &str| -> toml::Value {
            toml::Value::Array(s.iter().map(|x| toml::Value::String(format!("{prefix}{x}"))).collect())
        };
        doc.insert("name".into(), toml::Value::String("imported".into()));
        let fs = doc
            .get_mut("filesystem")
            .and_then(toml::Value::as_table_mut)
            .ok_or("the agent policy has no [filesystem]")?;
        // Grants and read-only binds of paths that may be missing on another machine are optional.
        fs.insert("writable".into(), list(&self.writable, "?"));
        fs.insert("readonly".into(), list(&self.readonly, "?"));
        fs.insert("protected".into(), list(&self.protected, ""));
        fs.insert("hidden".into(), list(&self.hidden, ""));
        let net = doc
            .get_mut("network")
            .and_then(toml::Value::as_table_mut)
            .ok_or("the agent policy has no [network]")?;
        net.insert("mode".into(), toml::Value::String("allowlist".into()));
        net.insert("allow".into(), list(&self.allow, ""));
        net.insert("deny".into(), list(&self.deny, ""));
        let body = toml::to_string(&doc).map_err(|e| format!("write the policy: {e}"))?;

        let mut out = String::from("# Imported by `claude-shim policy import` from (highest precedence first):\n");
        for s in sources {
            out.push_str(&format!("#   {} ({} settings)\n", s.name, s.scope.label()));
        }
        out.push_str(
            "# Lists of all files are merged, as Claude Code merges them. Everything else is the\n\
             # default agent policy's (specs/policies/agent.toml). Claude Code asks before an\n\
             # unlisted host; the sandbox refuses it.\n",
        );
        if self.allow.is_empty() {
            out.push_str("# No host is allowed: the settings list none.\n");
        }
        if !self.translated.is_empty() {
            out.push_str("# Translated:\n");
            for t in &self.translated {
                out.push_str(&format!("#   {}\n", one_line(t)));
            }
        }
        if !self.notes.is_empty() {
            out.push_str("# Not translated:\n");
            for n in &self.notes {
                out.push_str(&format!("#   {}\n", one_line(n)));
            }
        }
        out.push('\n');
        out.push_str(&body);
        Ok(out)
    }
}

/// A comment line holds no line break, whatever a file name held.
fn one_line(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

/// Whether a JSON document is an srt settings file rather than Claude Code's settings.
pub fn looks_like_srt(v: &Value) -> bool {
    v.get("sandbox").is_none()
        && v.get("permissions").is_none()
        && (v.get("network").is_some() || v.get("filesystem").is_some())
}

/// Translates `sources` (highest precedence first) into a policy. The text
/// parses as a policy; the notes are also returned for stderr.
pub fn import(sources: &[Source], env: &Env) -> Result<(String, Vec<String>), String> {
    let managed_only = sources.iter().any(|s| {
        s.scope == Scope::Managed
            && s.value
                .pointer("/sandbox/network/allowManagedDomainsOnly")
                .and_then(Value::as_bool)
                == Some(true)
    });
    let mut i = Imported::default();
    for s in sources {
        match s.scope {
            Scope::Srt => i.srt(s, env),
            _ => i.settings(s, env, managed_only),
        }
    }
    i.finish(env);
    let text = i.render(sources)?;
    Policy::from_toml_str(&text, "imported").map_err(|e| format!("the imported policy does not load: {e}"))?;
    Ok((text, i.notes))
}

#[cfg(test)]
mod tests;
