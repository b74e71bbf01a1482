//! Policy paths resolved through the host view, symlinks followed as the
//! kernel will follow them at mount time; the filesystem pass checks every
//! path rule on the result.

use std::path::{Path, PathBuf};

use super::ctx::Ctx;
use super::input::{HostView, PathKind};

/// The kind of `path` with a final symlink followed (bounded), as a mount
/// destination would see it in host mode.
pub(super) fn resolved_kind(ctx: &Ctx<'_>, path: &Path) -> Option<PathKind> {
    let mut p = path.to_path_buf();
    for _ in 0..16 {
        match ctx.host.kind(&p)? {
            PathKind::Symlink(target) => {
                p = if target.is_absolute() {
                    target
                } else {
                    p.parent().unwrap_or(Path::new("/")).join(target)
                };
            }
            k => return Some(k),
        }
    }
    None
}

/// The most symlinks one path may pass through (Linux's MAXSYMLINKS).
const MAX_LINKS: usize = 40;

/// `path` with every symlink on the way resolved through the host view, as
/// realpath(3) would; what lies past a missing component is kept as written.
/// Every path rule of the policy (`/` and the kernel trees refused, hidden
/// paths, the working directory) is checked on this, never on the path as
/// written: a `writable` entry that is a symlink to `/` would otherwise bind
/// the host's root writable (issue 11).
pub(crate) fn resolve(host: &dyn HostView, path: &Path) -> Result<PathBuf, String> {
    let mut resolved = PathBuf::from("/");
    let mut pending: Vec<std::ffi::OsString> = path.components().rev().map(|c| c.as_os_str().to_owned()).collect();
    let mut links = 0;
    while let Some(c) = pending.pop() {
        match c.to_str() {
            Some("/") => resolved = PathBuf::from("/"),
            Some(".") => {}
            Some("..") => {
                resolved.pop();
            }
            _ => {
                let candidate = resolved.join(&c);
                match host.kind(&candidate) {
                    Some(PathKind::Symlink(target)) => {
                        links += 1;
                        if links > MAX_LINKS {
                            return Err(format!("resolve {}: too many levels of symbolic links", path.display()));
                        }
                        if target.is_absolute() {
                            resolved = PathBuf::from("/");
                        }
                        pending.extend(target.components().rev().map(|c| c.as_os_str().to_owned()));
                    }
                    _ => resolved = candidate,
                }
            }
        }
    }
    Ok(resolved)
}
