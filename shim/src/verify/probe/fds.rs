//! Descriptors the probe was started with beyond stdin, stdout and stderr:
//! what a launcher or runtime leaked into the sandbox (an open directory of
//! the host is a way out of any mount namespace: openat(fd, "..")). Read
//! once, before any check opens anything.

use std::os::fd::AsRawFd;
use std::sync::OnceLock;

use crate::verify::outcome::Finding;

static AT_START: OnceLock<Result<Vec<(i32, String)>, String>> = OnceLock::new();

/// Records the open descriptors above 2 and what each points at.
pub fn snapshot() {
    AT_START.get_or_init(|| {
        let dir = nix::dir::Dir::open(
            "/proc/self/fd",
            nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(|e| format!("cannot read /proc/self/fd: {e}"))?;
        let own = dir.as_raw_fd();
        let mut out = Vec::new();
        let mut dir = dir;
        for entry in dir.iter().flatten() {
            let Some(fd) = entry.file_name().to_str().ok().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            if fd > 2 && fd != own {
                let target = std::fs::read_link(format!("/proc/self/fd/{fd}"))
                    .map(|t| t.display().to_string())
                    .unwrap_or_else(|_| "?".into());
                out.push((fd, target));
            }
        }
        Ok(out)
    });
}

pub fn inherited() -> Finding {
    snapshot();
    match AT_START.get().expect("set by snapshot") {
        Err(why) => Finding::not_applicable("no /proc/self/fd", why.clone()),
        Ok(fds) if fds.is_empty() => Finding::pass("none"),
        Ok(fds) => Finding::fail(
            fds.iter()
                .map(|(fd, t)| format!("fd {fd} -> {t}"))
                .collect::<Vec<_>>()
                .join(", "),
        ),
    }
}
