//! `allow --save` / `deny --save`: the change made to a running sandbox,
//! written into the policy file the run started from, as the same change of
//! its `[network]` lists (network::policy::change), the rest of the file and
//! its comments kept (toml_edit). The result must still be a valid policy.
//! A policy file in the project is one the sandbox could write: it is read
//! and replaced through a handle on the project that follows no link, and
//! read as untrusted text.

use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use toml_edit::{Array, DocumentMut, Item, Table, Value};

use crate::hostfs::{Dir, Kind};
use crate::network::policy::change::{self, Op};
use crate::network::policy::RawPolicy;

/// `list` made to hold `want` (strings as the file spells them): what is no
/// longer wanted goes, what is new is appended in the layout of the last item.
fn edit_list(list: &mut Array, want: &[String]) {
    let mut left: Vec<&String> = want.iter().collect();
    list.retain(|v| match v.as_str().and_then(|s| left.iter().position(|w| *w == s)) {
        Some(i) => {
            left.remove(i);
            true
        }
        None => false,
    });
    // One item a line goes on a line of its own, indented as the last;
    // otherwise after a space.
    let prefix = list
        .iter()
        .last()
        .and_then(|v| v.decor().prefix())
        .and_then(|p| p.as_str())
        .filter(|p| p.contains('\n'))
        .unwrap_or(" ")
        .to_owned();
    for w in left {
        let mut v = Value::from(w.as_str());
        v.decor_mut().set_prefix(if list.is_empty() { "" } else { &prefix });
        list.push_formatted(v);
    }
}

fn strings(list: Option<&Array>) -> Vec<String> {
    list.map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// The text of a policy with `op entry` applied to its `[network]` lists,
/// checked to be a valid policy; `origin` names it in errors.
pub fn changed(text: &str, op: Op, entry: &str, origin: &str) -> Result<String> {
    let mut doc: DocumentMut = text.parse().map_err(|e| anyhow!("parse {origin}: {e}"))?;
    let network = doc
        .entry("network")
        .or_insert_with(|| Item::Table(Table::new()))
        .as_table_like_mut()
        .ok_or_else(|| anyhow!("change {origin}: [network] is not a table"))?;
    let lists = RawPolicy {
        allow: strings(network.get("allow").and_then(Item::as_array)),
        deny: strings(network.get("deny").and_then(Item::as_array)),
        allow_cidrs: Vec::new(),
    };
    let new = change::apply(&lists, op, entry).map_err(|e| anyhow!("{e}"))?;
    for (key, want) in [("allow", &new.lists.allow), ("deny", &new.lists.deny)] {
        let item = network.entry(key).or_insert(Item::Value(Value::Array(Array::new())));
        let list = item
            .as_array_mut()
            .ok_or_else(|| anyhow!("change {origin}: network.{key} is not a list"))?;
        edit_list(list, want);
    }
    let out = doc.to_string();
    claude_shim_bundle::Policy::from_toml_str(&out, origin).map_err(|e| anyhow!("{e}"))?;
    Ok(out)
}

/// Applies `op entry` to the policy file `file`. `workdir`: the run's
/// working directory, which the sandbox could write.
pub fn save(file: &Path, workdir: Option<&Path>, op: Op, entry: &str) -> Result<()> {
    let (Some(parent), Some(name)) = (file.parent(), file.file_name()) else {
        bail!("save the change in {}: it is not a file's path", file.display());
    };
    let inside = workdir.and_then(|w| parent.strip_prefix(w).ok().map(|rel| (w, rel)));
    let dir = match inside {
        Some((w, rel)) if rel.as_os_str().is_empty() => Dir::open(w)?,
        Some((w, rel)) => Dir::open(w)?.sub(rel)?,
        None => Dir::open(parent)?,
    };
    let rel = Path::new(name);
    let st = match dir.stat(rel)? {
        Some(st) if st.kind == Kind::File => st,
        Some(_) => bail!("save the change in {}: it is not a regular file", file.display()),
        None => bail!("save the change in {}: it does not exist any more", file.display()),
    };
    let text = dir.read(rel, crate::bounded::POLICY_LIMIT)?;
    let text = String::from_utf8(text).with_context(|| format!("read {}", file.display()))?;
    let out = changed(&text, op, entry, &file.display().to_string())?;
    dir.replace(rel, out.as_bytes(), st.mode)?;
    // As root, a user's policy stays the user's.
    if nix::unistd::geteuid().is_root() && st.uid != 0 {
        dir.chown(rel, st.uid, st.gid)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"version = 1
name = "mine"

[network]
mode = "allowlist"
allow = [
  "pub.test",   # the one we need
  "*.github.com",
]
deny = []
"#;

    #[test]
    fn an_allow_is_appended_and_the_comments_stay() {
        let out = changed(FILE, Op::Allow, "wild.test", "p.toml").unwrap();
        assert!(out.contains("\"pub.test\",   # the one we need"), "{out}");
        let p = claude_shim_bundle::Policy::from_toml_str(&out, "p.toml").unwrap();
        let allow: Vec<&str> = p.network.allow.iter().map(|h| h.0.as_str()).collect();
        assert_eq!(allow, ["pub.test", "*.github.com", "wild.test"]);
        // And undone by a deny: the file as it was but for the layout.
        let back = changed(&out, Op::Deny, "wild.test", "p.toml").unwrap();
        assert_eq!(back, FILE);
    }

    #[test]
    fn a_deny_under_a_wildcard_lands_on_deny() {
        let out = changed(FILE, Op::Deny, "gist.github.com", "p.toml").unwrap();
        assert!(out.contains("deny = [\"gist.github.com\"]"), "{out}");
    }

    #[test]
    fn a_change_that_makes_the_policy_invalid_is_refused() {
        let offline = "version = 1\n[network]\nmode = \"none\"\n";
        let e = changed(offline, Op::Allow, "wild.test", "o.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("network.allow"), "{e}");
        assert!(changed("version = 1\nnetwork = 3\n", Op::Allow, "x.test", "o.toml").is_err());
    }

    #[test]
    fn a_planted_link_is_not_written_through() {
        let t = tempfile::tempdir().unwrap();
        let victim = t.path().join("victim.toml");
        std::fs::write(&victim, FILE).unwrap();
        let proj = t.path().join("proj");
        std::fs::create_dir(&proj).unwrap();
        std::os::unix::fs::symlink(&victim, proj.join("policy.toml")).unwrap();
        assert!(save(&proj.join("policy.toml"), Some(&proj), Op::Allow, "wild.test").is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), FILE);
        std::fs::remove_file(proj.join("policy.toml")).unwrap();
        std::fs::write(proj.join("policy.toml"), FILE).unwrap();
        save(&proj.join("policy.toml"), Some(&proj), Op::Allow, "wild.test").unwrap();
        assert!(std::fs::read_to_string(proj.join("policy.toml"))
            .unwrap()
            .contains("\"wild.test\""));
    }
}
