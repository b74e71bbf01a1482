//! What claude-shim makes on the host for a run and the sandbox writes (the
//! whole agent's configuration directory, the per-command temp directory)
//! belongs to whoever the sandbox runs as (`RunAs`): as root in a user's
//! project, that user. The tree is walked through directory descriptors and
//! never follows a link: what an earlier run left in it is the sandbox's.

use std::ffi::CStr;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::{bail, Context, Result};
use claude_shim_bundle::RunAs;
use rustix::fs::{AtFlags, FileType, Gid, Mode, OFlags, Uid};

/// How deep and how many entries are walked; more is refused.
const MAX_DEPTH: usize = 32;
const MAX_ENTRIES: usize = 200_000;

const OPEN_DIR: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Gives `dir` and everything in it to the host ids `run_as` runs as, unless
/// that is this process (whatever it made is then already theirs).
/// The directory is reached through its handle: a link planted above it
/// since the handle was taken is not followed.
pub fn hand_over(dir: &crate::hostfs::Dir, run_as: RunAs) -> Result<()> {
    let (uid, gid) = run_as.host_ids();
    if uid == rustix::process::geteuid().as_raw() {
        return Ok(());
    }
    let fd = dir.open_fd()?;
    let mut seen = 0;
    walk(fd, dir.path(), (Uid::from_raw(uid), Gid::from_raw(gid)), 0, &mut seen)
        .with_context(|| format!("give {} to uid {uid}", dir.path().display()))
}

/// Refuses a directory handed over to `run_as` that it could not reach:
/// one of the directories above it (root's home, 0700) is closed to it. A
/// bind does not open the path to it.
pub fn check_reachable(dir: &Path, run_as: RunAs, empty_home: Option<&Path>) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let (uid, gid) = run_as.host_ids();
    if uid == 0 {
        return Ok(());
    }
    for a in dir.ancestors().skip(1) {
        // Under an empty home the sandbox's own tmpfs stands there, not the host's folder.
        if empty_home.is_some_and(|h| a.starts_with(h)) {
            continue;
        }
        let Ok(m) = std::fs::metadata(a) else { continue };
        let bits = if m.uid() == uid {
            m.mode() >> 6
        } else if m.gid() == gid {
            m.mode() >> 3
        } else {
            m.mode()
        };
        if bits & 0o1 == 0 {
            bail!(
                "give {} to uid {uid}: it cannot enter {} (mode {:o}, owner {}); set XDG_STATE_HOME to a directory it can reach",
                dir.display(),
                a.display(),
                m.mode() & 0o7777,
                m.uid()
            );
        }
    }
    Ok(())
}

fn owned_by(st: &rustix::fs::Stat, (uid, gid): (Uid, Gid)) -> bool {
    st.st_uid == uid.as_raw() && st.st_gid == gid.as_raw()
}

fn walk(fd: OwnedFd, path: &Path, ids: (Uid, Gid), depth: usize, seen: &mut usize) -> Result<()> {
    let st = rustix::fs::fstat(&fd)?;
    if !owned_by(&st, ids) {
        rustix::fs::fchown(&fd, Some(ids.0), Some(ids.1))?;
    }
    if depth >= MAX_DEPTH {
        bail!("{} lies more than {MAX_DEPTH} directories deep", path.display());
    }
    for entry in rustix::fs::Dir::read_from(&fd)? {
        let entry = entry?;
        let name: &CStr = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        *seen += 1;
        if *seen > MAX_ENTRIES {
            bail!("more than {MAX_ENTRIES} entries");
        }
        let child = path.join(std::ffi::OsStr::from_bytes(name.to_bytes()));
        if entry.file_type() == FileType::Directory {
            match rustix::fs::openat(&fd, name, OPEN_DIR, Mode::empty()) {
                Ok(sub) => walk(sub, &child, ids, depth + 1, seen)?,
                // Replaced by a link or a file meanwhile: given as what it is now.
                Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => lchown_at(&fd, name, &child, ids)?,
                Err(rustix::io::Errno::NOENT) => {}
                Err(e) => return Err(e).with_context(|| format!("open {}", child.display())),
            }
        } else {
            lchown_at(&fd, name, &child, ids)?;
        }
    }
    Ok(())
}

/// One entry that is not entered: a link is given as a link, never its
/// target; a file with other names elsewhere is left alone (giving it would
/// give those too).
fn lchown_at(dir: &OwnedFd, name: &CStr, path: &Path, ids: (Uid, Gid)) -> Result<()> {
    let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(rustix::io::Errno::NOENT) => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("stat {}", path.display())),
    };
    if owned_by(&st, ids) {
        return Ok(());
    }
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory && st.st_nlink > 1 {
        tracing::debug!("leave {}: it has {} names", path.display(), st.st_nlink);
        return Ok(());
    }
    rustix::fs::chownat(dir, name, Some(ids.0), Some(ids.1), AtFlags::SYMLINK_NOFOLLOW)
        .with_context(|| format!("change the owner of {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn gives_the_tree_and_never_what_a_link_names() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("agent");
        let outside = t.path().join("outside");
        std::fs::create_dir_all(dir.join("a/b")).unwrap();
        std::fs::write(dir.join("a/b/f"), "x").unwrap();
        std::fs::write(&outside, "host").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("link")).unwrap();
        std::os::unix::fs::symlink(t.path(), dir.join("a/dirlink")).unwrap();
        std::fs::hard_link(&outside, dir.join("hard")).unwrap();
        let who = RunAs::Owner { uid: 4242, gid: 4343 };
        let handle = crate::hostfs::Dir::open(&dir).unwrap();
        hand_over(&handle, who).unwrap();
        for p in ["", "a", "a/b", "a/b/f"] {
            let m = std::fs::symlink_metadata(dir.join(p)).unwrap();
            assert_eq!((m.uid(), m.gid()), (4242, 4343), "{p}");
        }
        let link = std::fs::symlink_metadata(dir.join("link")).unwrap();
        assert_eq!(link.uid(), 4242, "the link itself");
        for p in [&outside, t.path()] {
            assert_eq!(std::fs::symlink_metadata(p).unwrap().uid(), 0, "{}", p.display());
        }
        // Twice is once; and giving it to ourselves changes nothing.
        hand_over(&handle, who).unwrap();
        hand_over(&handle, RunAs::RootMasked).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().uid(), 4242);
        // Reachable through its parents, or refused in one line.
        std::fs::set_permissions(t.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        check_reachable(&dir, who, None).unwrap();
        std::fs::set_permissions(t.path(), std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let e = check_reachable(&dir, who, None).unwrap_err().to_string();
        assert!(e.contains("it cannot enter") && !e.contains('\n'), "{e}");
        check_reachable(&dir, RunAs::RootMasked, None).unwrap();
        // A link in place of the directory is refused, not followed: no
        // handle is had through it.
        let l = t.path().join("l");
        std::os::unix::fs::symlink(&dir, &l).unwrap();
        let parent = crate::hostfs::Dir::open(t.path()).unwrap();
        assert!(parent.sub(std::path::Path::new("l")).is_err());
    }
}
