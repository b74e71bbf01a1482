//! Where an external program is: the first executable file of that name on
//! PATH, then in the system directories (a root shell's PATH may lack the
//! sbin ones). One search for the runtime's tools (pasta, nft), `claude`,
//! and the engines `doctor` looks for.

use std::path::{Path, PathBuf};

const SYSTEM_DIRS: [&str; 6] = [
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

pub fn is_executable(p: &Path) -> bool {
    p.is_file() && nix::unistd::access(p, nix::unistd::AccessFlags::X_OK).is_ok()
}

/// On PATH only.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

/// On PATH, then in the system directories.
pub fn find(name: &str) -> Option<PathBuf> {
    on_path(name).or_else(|| {
        SYSTEM_DIRS
            .iter()
            .map(|d| Path::new(d).join(name))
            .find(|p| is_executable(p))
    })
}
