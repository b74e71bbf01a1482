//! The helpers recorded in a container's meta.json, after `attach`: whether
//! each is still the process started, stopping them at delete, and what
//! `state` says of them.

use std::fs;
use std::path::Path;
use std::time::Duration;

use super::process;
use crate::state::Meta;

/// Whether the recorded helper is still the process we started.
fn is_ours(meta: &Meta, name: &str, pid: i32) -> Option<std::os::fd::OwnedFd> {
    match meta.helper_starts.get(name) {
        Some(start) => process::open_verified(pid, *start),
        // A meta.json without start times: fall back to the program's name.
        None => {
            let fd = process::pidfd_open(pid).ok()?;
            let cmdline = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            let want = if name == "pasta" { "pasta" } else { "__network" };
            text.contains(want).then_some(fd)
        }
    }
}

/// The order helpers are stopped in: the watcher first, so that it does not
/// report the others' ends as failures.
fn stop_order(meta: &Meta) -> Vec<(&String, &i32)> {
    let mut v: Vec<(&String, &i32)> = meta.helpers.iter().collect();
    v.sort_by_key(|(n, _)| (n.as_str() != "watch", n.to_string()));
    v
}

/// Ends every helper recorded for the container.
pub fn stop_helpers(meta: &Meta) {
    for (name, pid) in stop_order(meta) {
        match is_ours(meta, name, *pid) {
            Some(fd) => {
                tracing::debug!("stopping helper {name} (pid {pid})");
                process::terminate(&fd, Duration::from_secs(2));
            }
            None => tracing::debug!("helper {name} (pid {pid}) had already exited"),
        }
    }
}

/// Helper names and pids for `state`, with whether each is still running.
pub fn describe_helpers(meta: &Meta) -> String {
    let mut parts: Vec<String> = meta
        .helpers
        .iter()
        .map(|(name, pid)| {
            let alive = is_ours(meta, name, *pid).is_some();
            format!("{name}={pid}{}", if alive { "" } else { "(exited)" })
        })
        .collect();
    parts.sort();
    parts.join(",")
}

/// Annotations `state` adds for a container with networking: its helpers
/// and the logs they write.
pub fn state_annotations(meta: &Meta, state_dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if meta.helpers.is_empty() {
        return out;
    }
    out.push(("run.claude-shim.helpers".to_owned(), describe_helpers(meta)));
    for (key, file) in [
        ("run.claude-shim.network.log", "network.log"),
        ("run.claude-shim.proxy.log", "proxy.log"),
    ] {
        let p = state_dir.join(file);
        if p.exists() {
            out.push((key.to_owned(), p.to_string_lossy().into_owned()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watcher_stops_first() {
        let mut meta = Meta::default();
        meta.helpers.insert("pasta".into(), 3);
        meta.helpers.insert("watch".into(), 2);
        meta.helpers.insert("proxy".into(), 4);
        let names: Vec<&str> = stop_order(&meta).into_iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["watch", "pasta", "proxy"]);
    }
}
