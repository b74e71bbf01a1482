//! Kernel features the runtime and its sandboxes rely on, each tried for real:
//! an unprivileged user namespace (with the sysctls and the AppArmor switch
//! that restrict them), seccomp filters, pidfd_open, openat2, mount_setattr
//! (idmapped mounts) and Landlock.

use std::ffi::CString;

use super::check::Check;

pub fn checks() -> Vec<Check> {
    vec![
        user_namespaces(),
        seccomp(),
        pidfd_open(),
        openat2(),
        idmapped_mounts(),
        landlock(),
    ]
}

/// The sysctls that switch unprivileged user namespaces off or restrict them.
const USERNS_SYSCTLS: &[(&str, &str)] = &[
    (
        "kernel.unprivileged_userns_clone",
        "/proc/sys/kernel/unprivileged_userns_clone",
    ),
    ("user.max_user_namespaces", "/proc/sys/user/max_user_namespaces"),
    (
        "kernel.apparmor_restrict_unprivileged_userns",
        "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
    ),
];

/// Creates a user namespace in a child and maps the caller's uid into it: the
/// map write is what fails where AppArmor restricts unprivileged user
/// namespaces (Ubuntu 24.04+), while the unshare itself succeeds there.
fn user_namespaces() -> Check {
    let sysctls: Vec<String> = USERNS_SYSCTLS
        .iter()
        .filter_map(|(name, path)| {
            std::fs::read_to_string(path)
                .ok()
                .map(|v| format!("{name}={}", v.trim()))
        })
        .collect();
    let mut sysctls = if sysctls.is_empty() {
        String::from("no restricting sysctl")
    } else {
        sysctls.join(", ")
    };
    // The profile doctor runs under is the one the runtime gets at the same
    // path: it is what decides the user namespace where AppArmor mediates it.
    if let Ok(label) = std::fs::read_to_string("/proc/self/attr/apparmor/current") {
        sysctls.push_str(&format!("; AppArmor: {}", label.trim_end_matches(['\n', '\0'])));
    }
    match try_user_namespace() {
        Ok(()) => Check::ok("user namespaces", format!("created one and mapped uid {} ({sysctls})", nix::unistd::geteuid())),
        Err(step) => Check::fail(
            "user namespaces",
            format!("{step} ({sysctls})"),
            "set user.max_user_namespaces above 0 and kernel.unprivileged_userns_clone=1; where AppArmor restricts them, install claude-shim with hack/install (its AppArmor profile allows userns for the runtime)",
        ),
    }
}

fn try_user_namespace() -> Result<(), String> {
    let uid = nix::unistd::geteuid().as_raw();
    let gid = nix::unistd::getegid().as_raw();
    // Prepared before fork: the child only makes system calls.
    let setgroups = CString::new("/proc/self/setgroups").expect("no NUL");
    let uid_map = CString::new("/proc/self/uid_map").expect("no NUL");
    let gid_map = CString::new("/proc/self/gid_map").expect("no NUL");
    let uid_line = format!("0 {uid} 1");
    let gid_line = format!("0 {gid} 1");
    // SAFETY: doctor is single-threaded when this runs (it is the first
    // check), and the child calls only async-signal-safe functions before _exit.
    match unsafe { nix::unistd::fork() } {
        Err(e) => Err(format!("fork a child to try: {e}")),
        Ok(nix::unistd::ForkResult::Child) => {
            let code =
                unsafe { userns_child(&setgroups, &uid_map, &gid_map, uid_line.as_bytes(), gid_line.as_bytes()) };
            unsafe { libc::_exit(code) }
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => match nix::sys::wait::waitpid(child, None) {
            Ok(nix::sys::wait::WaitStatus::Exited(_, 0)) => Ok(()),
            Ok(nix::sys::wait::WaitStatus::Exited(_, code)) => {
                let (step, errno) = (code / 64, code % 64);
                let what = match step {
                    0 => "unshare(CLONE_NEWUSER)",
                    1 => "write /proc/self/setgroups in a new user namespace",
                    2 => "write /proc/self/uid_map in a new user namespace",
                    _ => "write /proc/self/gid_map in a new user namespace",
                };
                Err(format!("{what} failed: {}", crate_io_text(errno)))
            }
            Ok(other) => Err(format!("the child that tried ended with {other:?}")),
            Err(e) => Err(format!("wait for the child that tried: {e}")),
        },
    }
}

/// Returns 0, or 64 * step + errno (errnos that matter here are below 64).
pub(super) unsafe fn userns_child(
    setgroups: &CString,
    uid_map: &CString,
    gid_map: &CString,
    uid: &[u8],
    gid: &[u8],
) -> i32 {
    let errno = || {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
            .min(63)
    };
    if libc::unshare(libc::CLONE_NEWUSER) != 0 {
        return errno();
    }
    let write = |path: &CString, data: &[u8]| -> bool {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        libc::close(fd);
        n == data.len() as isize
    };
    if !write(setgroups, b"deny") {
        return 64 + errno();
    }
    if !write(uid_map, uid) {
        return 128 + errno();
    }
    if !write(gid_map, gid) {
        return 192 + errno();
    }
    0
}

pub(super) fn crate_io_text(errno: i32) -> String {
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    text.split(" (os error").next().unwrap_or_default().to_lowercase()
}

/// The seccomp filter mode and the return actions the runtime's profiles use.
fn seccomp() -> Check {
    let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP) };
    if mode < 0 {
        return Check::fail(
            "seccomp",
            format!("prctl(PR_GET_SECCOMP) failed: {}", std::io::Error::last_os_error()),
            "run a kernel built with CONFIG_SECCOMP_FILTER",
        );
    }
    let actions = [
        ("errno", libc::SECCOMP_RET_ERRNO),
        ("kill_process", libc::SECCOMP_RET_KILL_PROCESS),
        ("log", libc::SECCOMP_RET_LOG),
    ];
    let mut missing = Vec::new();
    for (name, action) in actions {
        let action: u32 = action;
        // SAFETY: SECCOMP_GET_ACTION_AVAIL reads one u32 from the pointer.
        let r = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_GET_ACTION_AVAIL,
                0,
                &action as *const u32,
            )
        };
        if r != 0 {
            missing.push(name);
        }
    }
    let nested = if mode == 2 {
        "; this process already runs under a filter (a sandbox?)"
    } else {
        ""
    };
    if missing.is_empty() {
        Check::ok(
            "seccomp",
            format!("filter mode available, actions errno, kill_process, log{nested}"),
        )
    } else {
        Check::fail(
            "seccomp",
            format!("filter actions not available: {}{nested}", missing.join(", ")),
            "run a kernel of 4.14 or later with CONFIG_SECCOMP_FILTER",
        )
    }
}

/// The runtime waits on processes through pidfds (no pid reuse race).
fn pidfd_open() -> Check {
    // SAFETY: pidfd_open takes a pid and flags; the fd returned is closed.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
    if fd >= 0 {
        unsafe { libc::close(fd as i32) };
        Check::ok("pidfd_open", "works")
    } else {
        Check::fail(
            "pidfd_open",
            format!("failed: {}", std::io::Error::last_os_error()),
            "run Linux 5.3 or later",
        )
    }
}

/// The runtime resolves paths in a container's rootfs with openat2's RESOLVE_* flags.
fn openat2() -> Check {
    // "." below the working directory: RESOLVE_BENEATH refuses an absolute path.
    let root = CString::new(".").expect("no NUL");
    // open_how is non-exhaustive in libc: zeroed, then the fields set.
    // SAFETY: open_how is plain integers; all-zero is a valid value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_BENEATH;
    // SAFETY: openat2 reads the path and `how` (of the size passed); the fd is closed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            root.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd >= 0 {
        unsafe { libc::close(fd as i32) };
        Check::ok("openat2", "works with RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS")
    } else {
        Check::fail(
            "openat2",
            format!("failed: {}", std::io::Error::last_os_error()),
            "run Linux 5.6 or later (paths in a rootfs are resolved without following its links)",
        )
    }
}

/// mount_setattr exists (idmapped mounts need it); called with a bad fd so it
/// changes nothing: EBADF means present, ENOSYS absent.
fn idmapped_mounts() -> Check {
    let empty = CString::new("").expect("no NUL");
    // SAFETY: fd -1 and a null attr: the kernel refuses before reading anything.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            -1,
            empty.as_ptr(),
            0,
            std::ptr::null::<u8>(),
            0,
        )
    };
    let err = std::io::Error::last_os_error();
    if r == 0 || err.raw_os_error() != Some(libc::ENOSYS) {
        Check::ok("idmapped mounts", "mount_setattr is available")
    } else {
        Check::warn(
            "idmapped mounts",
            "mount_setattr is not available",
            "run Linux 5.12 or later for idmapped mounts; containers without them still run",
        )
    }
}

/// The Landlock ABI version, if the kernel has Landlock enabled.
fn landlock() -> Check {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: with the VERSION flag the kernel reads no attribute and returns a number.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v > 0 {
        Check::ok("landlock", format!("ABI version {v}"))
    } else {
        let err = std::io::Error::last_os_error();
        Check::warn(
            "landlock",
            format!("not available: {err}"),
            "add landlock to the lsm= kernel parameter for a second layer; claude-shim's sandbox does not need it",
        )
    }
}
