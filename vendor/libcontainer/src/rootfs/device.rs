use std::fs::Permissions;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::io::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use libc;
use nix::fcntl::{OFlag, open};
use nix::sys::stat::{FileStat, Mode, fstat, umask};
use oci_spec::runtime::{LinuxDevice, LinuxDeviceType};
use pathrs::flags::OpenFlags;
use pathrs::{InodeType, Root};

use crate::syscall::syscall::create_syscall;
use crate::syscall::{Syscall, linux};
use crate::utils::PathBufExt;

#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("{0:?} is not a valid device path")]
    InvalidDevicePath(std::path::PathBuf),
    #[error("failed syscall to create device")]
    Syscall(#[from] crate::syscall::SyscallError),
    #[error(transparent)]
    Nix(#[from] nix::Error),
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync>),
    #[error("{0}")]
    Custom(String),
    #[error(transparent)]
    Pathrs(#[from] pathrs::error::Error),
}

type Result<T> = std::result::Result<T, DeviceError>;

pub(crate) fn open_device_fd(dev_path: &Path) -> nix::Result<(OwnedFd, FileStat)> {
    let fd = open(
        dev_path,
        OFlag::O_PATH | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o000),
    )?;
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let stat = fstat(owned.as_raw_fd())?;
    Ok((owned, stat))
}

pub(crate) fn verify_dev_null(stat: &FileStat) -> Result<()> {
    if stat.st_mode & libc::S_IFMT != libc::S_IFCHR {
        return Err(DeviceError::Custom(
            "device is not a character device".to_string(),
        ));
    }

    let actual_major = libc::major(stat.st_rdev) as i64;
    let actual_minor = libc::minor(stat.st_rdev) as i64;
    if actual_major != 1 || actual_minor != 3 {
        return Err(DeviceError::Custom(format!(
            "device dev null major/minor mismatch: expected 1/3, actual {}/{}",
            actual_major, actual_minor
        )));
    }
    Ok(())
}

pub struct Device {
    syscall: Box<dyn Syscall>,
}

impl Default for Device {
    fn default() -> Self {
        Self::new()
    }
}

impl Device {
    pub fn new() -> Device {
        Device {
            syscall: create_syscall(),
        }
    }

    pub fn new_with_syscall(syscall: Box<dyn Syscall>) -> Device {
        Device { syscall }
    }

    pub fn create_devices<'a, I>(&self, rootfs: &Path, devices: I, bind: bool) -> Result<()>
    where
        I: IntoIterator<Item = &'a LinuxDevice>,
    {
        let old_mode = umask(Mode::from_bits_truncate(0o000));
        devices
            .into_iter()
            .map(|dev| {
                if !dev.path().starts_with("/dev") {
                    tracing::error!(
                        "{:?} is not a valid device path starting with /dev",
                        dev.path()
                    );
                    return Err(DeviceError::InvalidDevicePath(dev.path().to_path_buf()));
                }

                if bind {
                    self.bind_dev(rootfs, dev)
                } else {
                    self.mknod_dev(rootfs, dev)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        umask(old_mode);

        Ok(())
    }

    // Every step below goes through a handle rooted at the rootfs (pathrs), so
    // a symlink in the rootfs, or one flipped by another container sharing a
    // bind-mounted /dev, cannot point the new node or its mount at the host.
    fn bind_dev(&self, rootfs: &Path, dev: &LinuxDevice) -> Result<()> {
        let root = Root::open(rootfs)?;
        let dest = create_container_dev_path(&root, dev)?;
        tracing::debug!("bind_dev with container path {:?}", dest);

        // An empty file to mount onto; an existing entry is reused only if it
        // is not a symlink, and is never opened for I/O (it may be a device).
        let target: OwnedFd = match root.create_file(
            &dest,
            OpenFlags::O_EXCL | OpenFlags::O_CREAT | OpenFlags::O_NOFOLLOW | OpenFlags::O_CLOEXEC,
            &Permissions::from_mode(0o644),
        ) {
            Ok(file) => file.into(),
            Err(create_err) => {
                let handle: OwnedFd = root.resolve_nofollow(&dest).map_err(|_| create_err)?.into();
                let stat = fstat(handle.as_raw_fd())?;
                if stat.st_mode & libc::S_IFMT == libc::S_IFLNK {
                    return Err(DeviceError::Custom(format!(
                        "device path {} in the rootfs is a symlink",
                        dev.path().display()
                    )));
                }
                handle
            }
        };
        let source = dev
            .path()
            .to_str()
            .ok_or_else(|| DeviceError::InvalidDevicePath(dev.path().to_path_buf()))?;
        let tree = self.syscall.open_tree(
            libc::AT_FDCWD,
            Some(source),
            (libc::OPEN_TREE_CLONE | libc::OPEN_TREE_CLOEXEC) as u32,
        )?;
        self.syscall
            .move_mount(
                tree.as_fd(),
                None,
                target.as_fd(),
                None,
                linux::MOVE_MOUNT_T_EMPTY_PATH | linux::MOVE_MOUNT_F_EMPTY_PATH,
            )
            .map_err(|err| {
                tracing::error!(?err, path = ?dest, "failed to mount bind dev");
                err
            })?;

        Ok(())
    }

    fn mknod_dev(&self, rootfs: &Path, dev: &LinuxDevice) -> Result<()> {
        fn makedev(major: i64, minor: i64) -> u64 {
            ((minor & 0xff)
                | ((major & 0xfff) << 8)
                | ((minor & !0xff) << 12)
                | ((major & !0xfff) << 32)) as u64
        }

        let root = Root::open(rootfs)?;
        let dest = create_container_dev_path(&root, dev)?;
        let perm = Permissions::from_mode(dev.file_mode().unwrap_or(0o666));
        let rdev = makedev(dev.major(), dev.minor());
        let inode = match dev.typ() {
            LinuxDeviceType::B => InodeType::BlockDevice(perm, rdev),
            LinuxDeviceType::C | LinuxDeviceType::U => InodeType::CharacterDevice(perm, rdev),
            LinuxDeviceType::P => InodeType::Fifo(perm),
            LinuxDeviceType::A => {
                return Err(DeviceError::Custom(format!(
                    "device {} has type a, which names no node to create",
                    dev.path().display()
                )));
            }
        };
        match root.create(&dest, &inode) {
            // Without a /dev mount the nodes land in the rootfs itself: the
            // next container on it finds them, and runc keeps what is there.
            Err(e) if e.kind() == pathrs::error::ErrorKind::OsError(Some(libc::EEXIST)) => {
                tracing::debug!(path = ?dest, "device node already present, kept");
                return Ok(());
            }
            other => other,
        }
        .map_err(|err| {
            tracing::error!(
                ?err,
                path = ?dest,
                major = ?dev.major(),
                minor = ?dev.minor(),
                "failed to mknod device"
            );
            err
        })?;
        // By the handle, never following a symlink swapped in since mknod.
        let node: OwnedFd = root.resolve_nofollow(&dest)?.into();
        let res = unsafe {
            libc::fchownat(
                node.as_raw_fd(),
                c"".as_ptr(),
                dev.uid().unwrap_or(u32::MAX),
                dev.gid().unwrap_or(u32::MAX),
                libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        nix::errno::Errno::result(res).map_err(|err| {
            tracing::error!(
                path = ?dest,
                ?err,
                uid = ?dev.uid(),
                gid = ?dev.gid(),
                "failed to chown device"
            );
            err
        })?;

        Ok(())
    }
}

/// The device's path inside the container, with its parent directories
/// created through `root`.
fn create_container_dev_path(root: &Root, dev: &LinuxDevice) -> Result<PathBuf> {
    let dest = Path::new("/").join(dev.path().as_relative().map_err(|err| {
        tracing::error!(
            "failed to convert {:?} to relative path: {}",
            dev.path(),
            err
        );
        DeviceError::Other(err.into())
    })?);
    if let Some(parent) = dest.parent() {
        root.mkdir_all(parent, &Permissions::from_mode(0o755))
            .map_err(|err| {
                tracing::error!("failed to create parent dir of {:?}: {}", dest, err);
                err
            })?;
    }
    Ok(dest)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileTypeExt;
    use std::path::PathBuf;

    use anyhow::Result;
    use oci_spec::runtime::{LinuxDeviceBuilder, LinuxDeviceType};

    use super::*;
    use crate::syscall::test::TestHelperSyscall;

    fn fifo(path: &str) -> LinuxDevice {
        LinuxDeviceBuilder::default()
            .path(PathBuf::from(path))
            .typ(LinuxDeviceType::P)
            .file_mode(0o644u32)
            .uid(nix::unistd::getuid().as_raw())
            .gid(nix::unistd::getgid().as_raw())
            .build()
            .unwrap()
    }

    #[test]
    fn test_bind_dev() -> Result<()> {
        let tmp_dir = tempfile::tempdir()?;
        let device = Device::new_with_syscall(Box::<TestHelperSyscall>::default());
        let null = LinuxDeviceBuilder::default()
            .path(PathBuf::from("/dev/null"))
            .build()
            .unwrap();
        device.bind_dev(tmp_dir.path(), &null)?;

        let helper = device
            .syscall
            .as_any()
            .downcast_ref::<TestHelperSyscall>()
            .unwrap();
        let moves = helper.get_move_mount_args();
        assert_eq!(1, moves.len());
        assert_eq!(
            Some(tmp_dir.path().join("dev/null")),
            moves[0].to_dirfd_path
        );
        Ok(())
    }

    #[test]
    fn test_mknod_dev() -> Result<()> {
        let tmp_dir = tempfile::tempdir()?;
        let device = Device::new();
        device.mknod_dev(tmp_dir.path(), &fifo("/dev/sub/fifo"))?;
        let meta = std::fs::symlink_metadata(tmp_dir.path().join("dev/sub/fifo"))?;
        assert!(meta.file_type().is_fifo());
        // The same rootfs again (no /dev mount): the node is kept.
        device.mknod_dev(tmp_dir.path(), &fifo("/dev/sub/fifo"))?;
        Ok(())
    }

    // A symlink in the rootfs that points outside it (absolute or climbing)
    // is resolved inside the rootfs: nothing is created outside.
    #[test]
    fn test_devices_stay_in_rootfs() -> Result<()> {
        let rootfs = tempfile::tempdir()?;
        let outside = tempfile::tempdir()?;
        std::fs::create_dir(rootfs.path().join("dev"))?;
        std::os::unix::fs::symlink(outside.path(), rootfs.path().join("dev/abs"))?;
        std::os::unix::fs::symlink("../../../../../../..", rootfs.path().join("dev/up"))?;
        let device = Device::new();
        device.mknod_dev(rootfs.path(), &fifo("/dev/abs/fifo"))?;
        device.mknod_dev(rootfs.path(), &fifo("/dev/up/fifo"))?;
        assert_eq!(0, std::fs::read_dir(outside.path())?.count());
        assert!(
            std::fs::symlink_metadata(rootfs.path().join(outside.path().strip_prefix("/")?).join("fifo"))?
                .file_type()
                .is_fifo()
        );
        assert!(std::fs::symlink_metadata(rootfs.path().join("fifo"))?.file_type().is_fifo());

        let binder = Device::new_with_syscall(Box::<TestHelperSyscall>::default());
        std::os::unix::fs::symlink(outside.path().join("x"), rootfs.path().join("dev/tty9"))?;
        let tty9 = LinuxDeviceBuilder::default()
            .path(PathBuf::from("/dev/tty9"))
            .build()
            .unwrap();
        assert!(binder.bind_dev(rootfs.path(), &tty9).is_err());
        assert_eq!(0, std::fs::read_dir(outside.path())?.count());
        Ok(())
    }
}
