//! Whether `--review` works here, tried for real: an overlay mounted where
//! a review run's would be (its upper layer on the filesystem of
//! claude-shim's state), in a user namespace with `userxattr` when
//! unprivileged, and a file written through it landing in the upper layer
//! and not in the lower one.

use std::ffi::CString;
use std::path::Path;

use super::check::Check;

const NAME: &str = "review workspace";

pub fn check() -> Check {
    match try_overlay() {
        Ok(where_) => Check::ok(NAME, format!("an overlay with its upper layer in {where_} took a write")),
        Err(e) => Check::fail(
            NAME,
            e,
            "--review needs overlayfs (Linux 5.11+ in a user namespace) and extended attributes on the filesystem of $XDG_STATE_HOME (ext4, xfs, btrfs, tmpfs); set XDG_STATE_HOME to such a folder",
        ),
    }
}

fn try_overlay() -> Result<String, String> {
    let root = crate::sandbox::review::store::root().map_err(|e| format!("make the state folder: {e:#}"))?;
    let name = format!(".doctor-{}", std::process::id());
    let base = root.join(&name);
    let _ = std::fs::remove_dir_all(&base);
    for d in ["lower", "upper", "work", "merged"] {
        std::fs::create_dir_all(base.join(d)).map_err(|e| format!("make {}: {e}", base.join(d).display()))?;
    }
    let r = in_child(&base);
    let _ = remove(&root, &name);
    r.map(|()| root.path().display().to_string())
}

/// The work folder overlayfs leaves (mode 000) is ours: removed by lending access.
fn remove(root: &crate::hostfs::Dir, name: &str) -> std::io::Result<()> {
    let fd = root.open_fd().map_err(|e| std::io::Error::other(e.to_string()))?;
    crate::sandbox::review::fds::remove_all_at(std::os::fd::AsFd::as_fd(&fd), std::ffi::OsStr::new(name))
}

fn in_child(base: &Path) -> Result<(), String> {
    let c = |p: &str| CString::new(base.join(p).into_os_string().into_encoded_bytes()).map_err(|e| e.to_string());
    let (merged, probe) = (c("merged")?, c("merged/probe")?);
    let unprivileged = !nix::unistd::geteuid().is_root();
    let data = format!(
        "lowerdir={},upperdir={},workdir={}{}",
        base.join("lower").display(),
        base.join("upper").display(),
        base.join("work").display(),
        if unprivileged { ",userxattr" } else { "" }
    );
    let data = CString::new(data).map_err(|e| e.to_string())?;
    let (uid, gid) = (nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw());
    let paths =
        ["/proc/self/setgroups", "/proc/self/uid_map", "/proc/self/gid_map"].map(|p| CString::new(p).expect("no NUL"));
    let (uid_line, gid_line) = (format!("0 {uid} 1"), format!("0 {gid} 1"));
    // SAFETY: doctor is single-threaded here, and the child makes only
    // system calls before _exit.
    match unsafe { nix::unistd::fork() } {
        Err(e) => Err(format!("fork a child to try: {e}")),
        Ok(nix::unistd::ForkResult::Child) => {
            let code = unsafe {
                let errno = || {
                    std::io::Error::last_os_error()
                        .raw_os_error()
                        .unwrap_or(libc::EIO)
                        .min(63)
                };
                if unprivileged {
                    let r = super::kernel::userns_child(
                        &paths[0],
                        &paths[1],
                        &paths[2],
                        uid_line.as_bytes(),
                        gid_line.as_bytes(),
                    );
                    if r != 0 {
                        libc::_exit(r);
                    }
                }
                if libc::unshare(libc::CLONE_NEWNS) != 0 {
                    libc::_exit(4 * 64 + errno());
                }
                let none = c"none";
                let slash = c"/";
                if libc::mount(
                    none.as_ptr(),
                    slash.as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ) != 0
                {
                    libc::_exit(4 * 64 + errno());
                }
                let ov = c"overlay";
                if libc::mount(ov.as_ptr(), merged.as_ptr(), ov.as_ptr(), 0, data.as_ptr().cast()) != 0 {
                    libc::_exit(5 * 64 + errno());
                }
                let fd = libc::open(probe.as_ptr(), libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC, 0o600);
                if fd < 0 {
                    libc::_exit(6 * 64 + errno());
                }
                libc::close(fd);
                0
            };
            unsafe { libc::_exit(code) }
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => match nix::sys::wait::waitpid(child, None) {
            Ok(nix::sys::wait::WaitStatus::Exited(_, 0)) => {
                if !base.join("upper/probe").exists() || base.join("lower/probe").exists() {
                    return Err("a write through the overlay did not land in its upper layer".into());
                }
                Ok(())
            }
            Ok(nix::sys::wait::WaitStatus::Exited(_, code)) => {
                let (step, errno) = (code / 64, code % 64);
                let what = match step {
                    0 => "unshare(CLONE_NEWUSER)",
                    1..=3 => "map the caller in a new user namespace",
                    4 => "make a mount namespace of its own",
                    5 => "mount an overlay (userxattr as an ordinary user)",
                    _ => "write through the overlay",
                };
                Err(format!("{what} failed: {}", super::kernel::crate_io_text(errno)))
            }
            Ok(other) => Err(format!("the child that tried ended with {other:?}")),
            Err(e) => Err(format!("wait for the child that tried: {e}")),
        },
    }
}
