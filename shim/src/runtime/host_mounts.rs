//! A container without a mount namespace of its own (linux.namespaces has no
//! "mount") gets its mounts in the runtime's namespace, under its rootfs, as
//! under runc, and runc leaves them there after `delete`. claude-shim notes
//! which mounts were at or under the rootfs before `create` and, at `delete`,
//! detaches only the ones that came after: the container's own.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// One line of /proc/self/mountinfo: its id, its parent's id, where it is.
struct MountLine {
    id: u64,
    parent: u64,
    point: PathBuf,
}

/// mountinfo escapes space, tab, newline and backslash as \ooo.
fn unescape(field: &str) -> PathBuf {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .and_then(|o| std::str::from_utf8(o).ok())
            .and_then(|o| u8::from_str_radix(o, 8).ok());
        match (bytes[i], octal) {
            (b'\\', Some(b)) => {
                out.push(b);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    use std::os::unix::ffi::OsStringExt;
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

fn parse(text: &str) -> Vec<MountLine> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(' ');
            let id = f.next()?.parse().ok()?;
            let parent = f.next()?.parse().ok()?;
            let point = unescape(f.nth(2)?);
            Some(MountLine { id, parent, point })
        })
        .collect()
}

fn under(rootfs: &Path) -> Result<Vec<MountLine>> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").context("read /proc/self/mountinfo")?;
    Ok(parse(&text)
        .into_iter()
        .filter(|m| m.point.starts_with(rootfs))
        .collect())
}

/// The ids of the mounts at or under `rootfs` now.
pub fn snapshot(rootfs: &Path) -> Result<Vec<u64>> {
    Ok(under(rootfs)?.into_iter().map(|m| m.id).collect())
}

/// Detaches every mount at or under `rootfs` that is not in `before` and
/// whose parent is (the roots of what the container added; MNT_DETACH takes
/// each one's subtree with it).
pub fn detach_new(rootfs: &Path, before: &[u64]) -> Result<()> {
    let now = under(rootfs)?;
    let new: Vec<&MountLine> = now.iter().filter(|m| !before.contains(&m.id)).collect();
    for m in new.iter().filter(|m| !new.iter().any(|p| p.id == m.parent)).rev() {
        nix::mount::umount2(&m.point, nix::mount::MntFlags::MNT_DETACH)
            .with_context(|| format!("unmount {}", m.point.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_and_escapes() {
        let text =
            "50 27 254:0 /x /tmp/a\\040b rw - ext4 /dev/vda rw\n51 50 0:42 / /tmp/a\\040b/proc rw - proc proc rw\n";
        let lines = parse(text);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].point, Path::new("/tmp/a b"));
        assert_eq!((lines[1].id, lines[1].parent), (51, 50));
    }
}
