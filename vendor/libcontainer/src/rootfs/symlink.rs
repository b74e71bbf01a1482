use std::path::{Path, PathBuf};

use pathrs::{InodeType, Root};

use crate::syscall::Syscall;
use crate::syscall::syscall::create_syscall;

#[derive(Debug, thiserror::Error)]
pub enum SymlinkError {
    #[error("syscall failed")]
    Syscall {
        source: crate::syscall::SyscallError,
    },
    #[error("failed symlink: {msg}")]
    Other { msg: String },
    #[error(transparent)]
    Pathrs(#[from] pathrs::error::Error),
}

type Result<T> = std::result::Result<T, SymlinkError>;

// Every link below is made through a handle rooted at the rootfs (pathrs): a
// symlink already in the rootfs (say /dev, when it is bind-mounted from a
// directory another container shares) cannot redirect it onto the host.
pub struct Symlink {
    #[allow(dead_code)]
    syscall: Box<dyn Syscall>,
}

impl Default for Symlink {
    fn default() -> Self {
        Self::new()
    }
}

fn link(root: &Root, target: &str, at: &Path) -> Result<()> {
    root.create(at, &InodeType::Symlink(PathBuf::from(target)))
        .map_err(|err| {
            tracing::error!(?err, ?at, "failed to symlink {target}");
            err.into()
        })
}

/// A /dev link that something already holds is left as it is, as runc does:
/// without a /dev mount the links land in the rootfs itself, and the second
/// run of the same rootfs found them there ("symlinkat ... File exists").
fn link_unless_present(root: &Root, target: &str, at: &Path) -> Result<()> {
    match root.create(at, &InodeType::Symlink(PathBuf::from(target))) {
        Err(e) if e.kind() == pathrs::error::ErrorKind::OsError(Some(libc::EEXIST)) => {
            tracing::debug!(?at, "already present, kept");
            Ok(())
        }
        Err(err) => {
            tracing::error!(?err, ?at, "failed to symlink {target}");
            Err(err.into())
        }
        Ok(_) => Ok(()),
    }
}

impl Symlink {
    pub fn new() -> Symlink {
        Symlink::with_syscall(create_syscall())
    }

    fn with_syscall(syscall: Box<dyn Syscall>) -> Symlink {
        Symlink { syscall }
    }

    // Create symlinks for subsystems that have been comounted e.g. cpu -> cpu,cpuacct, cpuacct -> cpu,cpuacct
    // `cgroup_dest` is the cgroup mount's destination inside `rootfs`.
    #[cfg(feature = "v1")]
    pub fn setup_comount_symlinks(
        &self,
        rootfs: &Path,
        cgroup_dest: &Path,
        subsystem_name: &str,
    ) -> Result<()> {
        if !subsystem_name.contains(',') {
            return Ok(());
        }

        let root = Root::open(rootfs)?;
        for comount in subsystem_name.split_terminator(',') {
            link(&root, subsystem_name, &cgroup_dest.join(comount))?;
        }

        Ok(())
    }

    pub fn setup_ptmx(&self, rootfs: &Path) -> Result<()> {
        let root = Root::open(rootfs)?;
        let ptmx = Path::new("/dev/ptmx");
        if let Err(e) = root.remove_file(ptmx) {
            if e.kind() != pathrs::error::ErrorKind::OsError(Some(libc::ENOENT)) {
                tracing::error!(err = ?e, "could not delete /dev/ptmx");
                return Err(SymlinkError::Other {
                    msg: "could not delete /dev/ptmx".into(),
                });
            }
        }
        link(&root, "pts/ptmx", ptmx)
    }

    // separating kcore symlink out from setup_default_symlinks for a better way to do the unit test,
    // since not every architecture has /proc/kcore file.
    pub fn setup_kcore_symlink(&self, rootfs: &Path) -> Result<()> {
        if Path::new("/proc/kcore").exists() {
            link_unless_present(&Root::open(rootfs)?, "/proc/kcore", Path::new("/dev/kcore"))?;
        }
        Ok(())
    }

    pub fn setup_default_symlinks(&self, rootfs: &Path) -> Result<()> {
        let defaults = [
            ("/proc/self/fd", "/dev/fd"),
            ("/proc/self/fd/0", "/dev/stdin"),
            ("/proc/self/fd/1", "/dev/stdout"),
            ("/proc/self/fd/2", "/dev/stderr"),
        ];
        let root = Root::open(rootfs)?;
        for (src, dst) in defaults {
            link_unless_present(&root, src, Path::new(dst))?;
        }

        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::PathBuf;

    #[cfg(feature = "v1")]
    use anyhow::{Context, Result};

    use super::*;
    #[cfg(feature = "v1")]
    use crate::syscall::linux::LinuxSyscall;

    #[test]
    fn test_setup_ptmx() {
        {
            let tmp_dir = tempfile::tempdir().unwrap();
            fs::create_dir(tmp_dir.path().join("dev")).unwrap();
            let symlink = Symlink::new();
            assert!(symlink.setup_ptmx(tmp_dir.path()).is_ok());
            assert_eq!(
                PathBuf::from("pts/ptmx"),
                fs::read_link(tmp_dir.path().join("dev/ptmx")).unwrap()
            );
        }
        // make remove_file goes into the bail! path
        {
            let tmp_dir = tempfile::tempdir().unwrap();
            fs::write(tmp_dir.path().join("dev"), b"").unwrap();
            let symlink = Symlink::new();
            assert!(symlink.setup_ptmx(tmp_dir.path()).is_err());
        }
    }

    #[test]
    fn test_setup_default_symlinks() {
        let tmp_dir = tempfile::tempdir().unwrap();
        fs::create_dir(tmp_dir.path().join("dev")).unwrap();
        let symlink = Symlink::new();
        assert!(symlink.setup_default_symlinks(tmp_dir.path()).is_ok());
        for (target, at) in [
            ("/proc/self/fd", "dev/fd"),
            ("/proc/self/fd/0", "dev/stdin"),
            ("/proc/self/fd/1", "dev/stdout"),
            ("/proc/self/fd/2", "dev/stderr"),
        ] {
            assert_eq!(
                PathBuf::from(target),
                fs::read_link(tmp_dir.path().join(at)).unwrap()
            );
        }
        // A second container on the same rootfs (no /dev mount) finds them.
        assert!(symlink.setup_default_symlinks(tmp_dir.path()).is_ok());
    }

    // /dev in the rootfs pointing at a host directory: the links land inside
    // the rootfs, the host directory stays empty.
    #[test]
    fn test_symlinks_stay_in_rootfs() {
        let rootfs = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), rootfs.path().join("dev")).unwrap();
        let symlink = Symlink::new();
        let _ = symlink.setup_ptmx(rootfs.path());
        let _ = symlink.setup_default_symlinks(rootfs.path());
        assert_eq!(0, fs::read_dir(outside.path()).unwrap().count());
    }

    #[test]
    #[cfg(feature = "v1")]
    fn setup_comounted_symlinks_success() -> Result<()> {
        // arrange
        let tmp = tempfile::tempdir().unwrap();
        let cpu = tmp.path().join("cpu");
        let cpuacct = tmp.path().join("cpuacct");
        let cpu_cpuacct = tmp.path().join("cpu,cpuacct");
        fs::create_dir_all(cpu_cpuacct)?;
        let symlink = Symlink::with_syscall(Box::new(LinuxSyscall));

        // act
        symlink
            .setup_comount_symlinks(tmp.path(), Path::new("/"), "cpu,cpuacct")
            .context("failed to setup symlinks")?;

        // assert
        assert!(cpu.exists(), "cpu symlink does not exist");
        assert!(cpuacct.exists(), "cpuacct symlink does not exist");

        assert!(
            fs::symlink_metadata(&cpu)?.file_type().is_symlink(),
            "cpu is not a symlink"
        );
        assert!(
            fs::symlink_metadata(&cpuacct)?.file_type().is_symlink(),
            "cpuacct is not a symlink"
        );

        assert_eq!(
            fs::read_link(cpu)?,
            PathBuf::from("cpu,cpuacct"),
            "cpu does not link to cpu,cpuacct"
        );
        assert_eq!(
            fs::read_link(cpuacct)?,
            PathBuf::from("cpu,cpuacct"),
            "cpuacct does not link to cpu,cpuacct"
        );

        Ok(())
    }

    #[test]
    #[cfg(feature = "v1")]
    fn setup_comounted_symlinks_no_comounts() -> Result<()> {
        // arrange
        let tmp = tempfile::tempdir().unwrap();
        let symlink = Symlink::with_syscall(Box::new(LinuxSyscall));

        // act
        let result = symlink
            .setup_comount_symlinks(tmp.path(), Path::new("/"), "memory,task")
            .context("failed to setup symlinks");

        // assert
        assert!(result.is_ok());
        Ok(())
    }
}
