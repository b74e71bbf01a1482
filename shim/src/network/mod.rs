//! Processes claude-shim runs beside a container (pasta, the egress proxy):
//! recorded in the container's meta.json at create, stopped at delete.

use std::fs;

use crate::runtime::Meta;

/// Whether `pid` is still the helper we started: a recycled pid must not be signalled.
fn is_ours(name: &str, pid: i32) -> bool {
    let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
    let exe = fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
    let base = |s: &[u8]| {
        String::from_utf8_lossy(s)
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    let want = name.split(':').next().unwrap_or(name);
    base(argv0).starts_with(want) || exe.to_string_lossy().contains(want)
}

/// Ends every helper recorded for the container.
pub fn stop_helpers(meta: &Meta) {
    for (name, pid) in &meta.helpers {
        if *pid > 0 && is_ours(name, *pid) {
            tracing::debug!("stopping helper {name} (pid {pid})");
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid), nix::sys::signal::Signal::SIGTERM);
        }
    }
}

/// Helper names and pids for `state`, with whether each is still running.
pub fn describe_helpers(meta: &Meta) -> String {
    let mut parts: Vec<String> = meta
        .helpers
        .iter()
        .map(|(name, pid)| {
            let alive = is_ours(name, *pid);
            format!("{name}={pid}{}", if alive { "" } else { "(exited)" })
        })
        .collect();
    parts.sort();
    parts.join(",")
}
