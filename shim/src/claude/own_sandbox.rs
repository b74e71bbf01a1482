//! Claude Code's own sandbox (`"sandbox": {"enabled": true}` in its
//! settings: bwrap around each Bash command) under claude-shim. Inside a
//! claude-shim sandbox bwrap cannot make its namespaces (the seccomp profile
//! refuses a new user namespace), so every Bash call failed with `bwrap:
//! Creating new namespace failed`; around `claude-shim-shell` it would nest
//! claude-shim in bwrap, where it cannot make the call's cgroup or state,
//! and sandbox each command twice. claude-shim is the sandbox in both modes,
//! so `claude` is started with a settings layer that turns Claude Code's off.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::hostfs::Dir;

/// `--settings` outranks the user's, the project's and the local settings
/// (only managed settings come first), so no seeded or project file turns
/// bwrap back on. A JSON string: no file for the sandbox to replace.
pub const SETTINGS_ARGS: [&str; 2] = ["--settings", r#"{"sandbox":{"enabled":false}}"#];

/// A settings file is small; a larger one is not Claude Code's.
const LIMIT: u64 = 1 << 20;

/// The first of the settings files Claude Code reads from `project` and
/// `config_dir` that turns its sandbox on, for the one line telling the
/// user. The project's files are read through a handle that follows no
/// link (the sandbox writes the project).
pub fn enabled_in(project: &Path, config_dir: &Path) -> Option<PathBuf> {
    let candidates = [
        (project, ".claude/settings.local.json"),
        (project, ".claude/settings.json"),
        (config_dir, "settings.json"),
    ];
    candidates.into_iter().find_map(|(dir, rel)| {
        let raw = Dir::open(dir).ok()?.read(Path::new(rel), LIMIT).ok()?;
        let v: Value = serde_json::from_slice(&raw).ok()?;
        (v["sandbox"]["enabled"] == Value::Bool(true)).then(|| dir.join(rel))
    })
}

/// The line the user gets once.
pub fn notice(file: &Path) -> String {
    format!(
        "claude-shim: Claude Code's own sandbox (sandbox.enabled in {}) is off for this session: claude-shim sandboxes every command",
        file.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_file_that_enables_it_is_named() {
        let t = tempfile::tempdir().unwrap();
        let (proj, conf) = (t.path().join("p"), t.path().join("c"));
        std::fs::create_dir_all(proj.join(".claude")).unwrap();
        std::fs::create_dir_all(&conf).unwrap();
        assert_eq!(enabled_in(&proj, &conf), None);
        std::fs::write(conf.join("settings.json"), r#"{"sandbox": {"enabled": true}}"#).unwrap();
        assert_eq!(enabled_in(&proj, &conf), Some(conf.join("settings.json")));
        std::fs::write(proj.join(".claude/settings.json"), r#"{"sandbox": {"enabled": true}}"#).unwrap();
        assert_eq!(enabled_in(&proj, &conf), Some(proj.join(".claude/settings.json")));
        // A link the sandbox planted is not read through.
        std::fs::remove_file(proj.join(".claude/settings.json")).unwrap();
        std::os::unix::fs::symlink(conf.join("settings.json"), proj.join(".claude/settings.local.json")).unwrap();
        assert_eq!(enabled_in(&proj, &conf), Some(conf.join("settings.json")));
        let v: Value = serde_json::from_str(SETTINGS_ARGS[1]).unwrap();
        assert_eq!(v["sandbox"]["enabled"], false);
    }
}
