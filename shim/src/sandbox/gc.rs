//! What killed sandboxes left in the state directory beside their containers
//! (which the runtime collects): the bundle of each run, half-written
//! bundles and skeletons, console sockets, and the placeholders in working
//! directories no sandbox holds any more (`lease::collect`), the temp
//! directories of `claude --per-command` calls. The shared caches stay:
//! `rootfs-<hash>` skeletons, `.env-index-*` and `.root-only-index-*` files
//! and the seccomp program cache (outside the state directory), except a
//! root-only index not walked for a week: one in use is dated again by every
//! whole walk (a minute apart at most while sandboxes start), so an older one
//! is an earlier format's or a tree's no sandbox uses now, and would only be
//! rebuilt.
//!
//! A bundle belongs to a live sandbox as long as the process whose pid is in
//! its id could have made it (`runtime::gc::maker_gone`); a half-written one
//! (`.NAME.new-<pid>`, `.NAME.old-<pid>`) and a console socket
//! (`console-<pid>.sock`) likewise.

use std::fs;
use std::path::Path;

use crate::runtime::gc::{maker_gone, Collected};

/// The pid in a name this module collects, if it is one: `sandbox-<pid>-<hex>.bundle`,
/// `sandbox-<pid>-<hex>.tmp` (claude::shell_tmp), `sandbox-<pid>-<hex>.session`
/// (a session's socket, session::start), `.NAME.new-<pid>`, `.NAME.old-<pid>`,
/// `console-<pid>.sock`.
fn maker_pid(name: &str) -> Option<i32> {
    let id = name
        .strip_suffix(".bundle")
        .or_else(|| name.strip_suffix(".tmp"))
        .or_else(|| name.strip_suffix(".session"));
    if let Some(id) = id {
        let rest = id.strip_prefix("sandbox-")?;
        let (pid, nanos) = rest.split_once('-')?;
        u32::from_str_radix(nanos, 16).ok()?;
        return pid.parse().ok();
    }
    if let Some(pid) = name.strip_prefix("console-").and_then(|n| n.strip_suffix(".sock")) {
        return pid.parse().ok();
    }
    if name.starts_with('.') && !name.starts_with(".env-index-") && !name.starts_with(super::root_only::INDEX_PREFIX) {
        let (_, pid) = name.rsplit_once(".new-").or_else(|| name.rsplit_once(".old-"))?;
        return pid.parse().ok();
    }
    None
}

/// A regular file (not followed) last written or dated more than a week ago.
fn unused_for_a_week(entry: &fs::DirEntry) -> bool {
    const WEEK: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);
    let Ok(meta) = entry.metadata() else { return false };
    let age = meta.modified().ok().and_then(|m| m.elapsed().ok());
    meta.file_type().is_file() && age.is_some_and(|a| a > WEEK)
}

/// Removes what dead sandboxes left under `state` (`<root>/.claude-shim`).
pub fn collect(state: &Path) -> Collected {
    let mut out = Collected::default();
    let Ok(entries) = fs::read_dir(state) else {
        return out;
    };
    let mut keys = std::collections::BTreeSet::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(super::root_only::INDEX_PREFIX) && unused_for_a_week(&entry) {
            match fs::remove_file(entry.path()) {
                Ok(()) => out
                    .removed
                    .push(format!("{} (not walked for a week)", entry.path().display())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => out.failed.push(format!("remove {}: {e}", entry.path().display())),
            }
            continue;
        }
        if let Some(key) = super::lease::key_of(&name) {
            keys.insert(key.to_owned());
            continue;
        }
        let Some(pid) = maker_pid(&name) else { continue };
        let path = entry.path();
        // A container's state directory has an id's name and a lock in it;
        // the runtime collects those.
        if path.join("lock").is_file() || !maker_gone(pid, &path) {
            continue;
        }
        // remove_dir_all does not follow symlinks.
        let r = match entry.file_type() {
            Ok(t) if t.is_dir() => fs::remove_dir_all(&path),
            _ => fs::remove_file(&path),
        };
        match r {
            Ok(()) => out.removed.push(format!("{} (its sandbox is gone)", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => out.failed.push(format!("remove {}: {e}", path.display())),
        }
    }
    for key in keys {
        match super::lease::collect(state, &key) {
            Ok(true) => out.removed.push(format!("placeholders and lease {key}")),
            Ok(false) => {}
            Err(e) => out
                .failed
                .push(format!("collect the placeholders of lease {key}: {e:#}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_with_a_makers_pid_are_collected() {
        assert_eq!(maker_pid("sandbox-123-0abc.bundle"), Some(123));
        assert_eq!(maker_pid("sandbox-123-0abc.tmp"), Some(123));
        assert_eq!(maker_pid(".sandbox-123-0abc.bundle.new-77"), Some(77));
        assert_eq!(maker_pid(".rootfs-0123456789abcdef.new-9"), Some(9));
        assert_eq!(maker_pid("console-5.sock"), Some(5));
        for kept in [
            "rootfs-0123456789abcdef",
            ".env-index-0123456789abcdef.json",
            ".env-index-0123456789abcdef.tmp-12",
            ".root-only-index-0123456789abcdef.json",
            "mycontainer",
            "x.bundle",
            "sandbox-1-zz.bundle",
            "x.tmp",
            ".workdir-00.lock",
        ] {
            assert_eq!(maker_pid(kept), None, "{kept}");
        }
    }

    #[test]
    fn a_dead_sandboxs_bundle_and_placeholders_go_and_the_caches_stay() {
        let t = tempfile::tempdir().unwrap();
        let state = t.path().join("state");
        let wd = t.path().join("wd");
        fs::create_dir_all(&wd).unwrap();
        let dead = 1 << 23;
        let me = std::process::id();
        for d in [
            format!("sandbox-{dead}-1f.bundle"),
            format!("sandbox-{dead}-2f.tmp"),
            format!("sandbox-{me}-1f.bundle"),
            "rootfs-0123456789abcdef".to_owned(),
            format!(".rootfs-0123456789abcdef.new-{dead}"),
        ] {
            fs::create_dir_all(state.join(d).join("sub")).unwrap();
        }
        fs::write(state.join(".env-index-0123456789abcdef.json"), "{}").unwrap();
        // Two root-only indexes: one walked now, one an earlier format's,
        // last dated eight days ago.
        let (young, old) = (
            state.join(".root-only-index-0123456789abcdef.json"),
            state.join(".root-only-index-fedcba9876543210.json"),
        );
        for p in [&young, &old] {
            fs::write(p, "{}").unwrap();
        }
        let eight_days = std::time::SystemTime::now() - std::time::Duration::from_secs(8 * 24 * 3600);
        fs::File::options()
            .write(true)
            .open(&old)
            .unwrap()
            .set_modified(eight_days)
            .unwrap();
        let lease = super::super::lease::Lease::acquire(&state, &wd).unwrap();
        let ph = claude_shim_bundle::Placeholder {
            path: wd.join(".mcp.json"),
            dir: false,
        };
        lease.create(std::slice::from_ref(&ph)).unwrap();
        drop(lease); // killed
        let got = collect(&state);
        assert!(got.failed.is_empty(), "{:?}", got.failed);
        assert_eq!(got.removed.len(), 5, "{:?}", got.removed);
        let mut left: Vec<String> = fs::read_dir(&state)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                ".env-index-0123456789abcdef.json".to_owned(),
                ".root-only-index-0123456789abcdef.json".to_owned(),
                "rootfs-0123456789abcdef".to_owned(),
                format!("sandbox-{me}-1f.bundle")
            ]
        );
        assert!(!ph.path.exists());
    }
}
