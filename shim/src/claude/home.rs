//! What of the host's home `claude`'s sandboxes still need when the policy
//! empties the home (`filesystem.home = "empty"`), added read-only to the
//! policy before it is compiled: the directory `claude` is installed in
//! (the whole agent runs it inside) and Claude Code's shell snapshots (each
//! per-command call sources one: the user's PATH, aliases and functions).

use std::path::{Component, Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use claude_shim_bundle::policy::values::{BindPath, HomeMode};
use claude_shim_bundle::Policy;

/// Where the `claude` found on PATH lives, as far as it must show inside:
/// the PATH directory holding it (a link there must resolve) and the
/// installation its link resolves to (an npm package: the package's
/// directory, for its vendored tools; otherwise the directory of the file).
pub fn install_dirs(exe: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(d) = exe.parent() {
        out.push(d.to_path_buf());
    }
    if let Ok(real) = std::fs::canonicalize(exe) {
        out.push(package_dir(&real));
    }
    out.dedup();
    out
}

/// `.../node_modules/@scope/name/...` -> `.../node_modules/@scope/name`;
/// anything else: the file's directory.
fn package_dir(file: &Path) -> PathBuf {
    let parts: Vec<Component> = file.components().collect();
    if let Some(i) = parts.iter().rposition(|c| c.as_os_str() == "node_modules") {
        let scoped = parts
            .get(i + 1)
            .is_some_and(|c| c.as_os_str().to_string_lossy().starts_with('@'));
        let end = i + 2 + usize::from(scoped);
        if end < parts.len() {
            return parts[..end].iter().collect();
        }
    }
    file.parent().unwrap_or(Path::new("/")).to_path_buf()
}

/// Adds each of `dirs` that lies in the (empty) home to the policy's
/// read-only binds.
pub fn keep_visible(policy: &mut Policy, home: &Path, dirs: &[PathBuf], optional: bool) -> Result<()> {
    if policy.filesystem.home != HomeMode::Empty || home == Path::new("/") {
        return Ok(());
    }
    // Compared resolved (a home reached through a link, /home -> /var/home),
    // added as found: the compiler resolves binds itself.
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let home = real(home);
    for d in dirs {
        let r = real(d);
        if !r.starts_with(&home) || r == home {
            continue;
        }
        let s = d
            .to_str()
            .with_context(|| format!("bind {}: the path is not UTF-8", d.display()))?;
        let entry = if optional { format!("?{s}") } else { s.to_owned() };
        let b = BindPath::try_from(entry).map_err(|e| anyhow!("bind {}: {e}", d.display()))?;
        if !policy.filesystem.readonly.contains(&b) {
            policy.filesystem.readonly.push(b);
        }
    }
    Ok(())
}

/// Claude Code's shell snapshots, in its configuration directory.
pub fn snapshots_dir(config_dir: &Path) -> PathBuf {
    config_dir.join("shell-snapshots")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_package_of_an_npm_install_is_kept_whole() {
        for (file, want) in [
            (
                "/h/.nvm/versions/node/v22/lib/node_modules/@anthropic-ai/claude-code/cli.js",
                "/h/.nvm/versions/node/v22/lib/node_modules/@anthropic-ai/claude-code",
            ),
            (
                "/usr/lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe",
                "/usr/lib/node_modules/@anthropic-ai/claude-code",
            ),
            ("/x/node_modules/tool/bin/t", "/x/node_modules/tool"),
            (
                "/h/.local/share/claude/versions/2.1.0",
                "/h/.local/share/claude/versions",
            ),
        ] {
            assert_eq!(package_dir(Path::new(file)), Path::new(want), "{file}");
        }
    }

    #[test]
    fn only_what_lies_in_an_empty_home_is_added() {
        let mut p = Policy::embedded_default();
        let before = p.filesystem.readonly.len();
        let dirs = [
            PathBuf::from("/h/.local/share/claude/versions"),
            PathBuf::from("/usr/bin"),
        ];
        keep_visible(&mut p, Path::new("/h"), &dirs, false).unwrap();
        keep_visible(&mut p, Path::new("/h"), &dirs, false).unwrap();
        assert_eq!(p.filesystem.readonly.len(), before + 1);
        assert_eq!(
            p.filesystem.readonly.last().unwrap(),
            &BindPath::try_from("/h/.local/share/claude/versions".to_owned()).unwrap()
        );
        let mut host = Policy::embedded_default();
        host.filesystem.home = HomeMode::Host;
        keep_visible(&mut host, Path::new("/h"), &dirs, false).unwrap();
        assert_eq!(host.filesystem.readonly.len(), before);
    }
}
