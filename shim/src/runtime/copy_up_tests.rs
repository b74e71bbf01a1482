//! Unit tests of tmpcopyup, the copy that vendor/libcontainer's
//! rootfs/copy_up.rs makes before a tmpfs covers a directory (the vendored
//! crate is outside the workspace, so its own tests would not run in CI).

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};

    use std::fs::File;
    use std::io;
    use std::os::fd::AsFd;
    use std::path::{Path, PathBuf};

    use libcontainer::rootfs::copy_up::{copy_up, Limits, LIMITS};
    use nix::sys::stat::Mode;

    fn dirs() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        let dst = tmp.path().join("dst");
        fs::create_dir(&src).unwrap();
        fs::create_dir(&dst).unwrap();
        (tmp, src, dst)
    }

    fn run(src: &Path, dst: &Path, limits: Limits) -> io::Result<()> {
        let s = File::open(src).unwrap();
        let d = File::open(dst).unwrap();
        copy_up(s.as_fd(), d.as_fd(), Path::new("/tmp"), limits)
    }

    #[test]
    fn copies_files_dirs_symlinks_and_fifos_with_their_modes() {
        let (tmp, src, dst) = dirs();
        fs::create_dir_all(src.join("sub/deep")).unwrap();
        fs::write(src.join("sub/deep/f"), "deep").unwrap();
        fs::set_permissions(src.join("sub"), fs::Permissions::from_mode(0o1750)).unwrap();
        fs::write(src.join("secret"), "s").unwrap();
        fs::set_permissions(src.join("secret"), fs::Permissions::from_mode(0o4600)).unwrap();
        symlink("secret", src.join("rel")).unwrap();
        nix::unistd::mkfifo(&src.join("fifo"), Mode::from_bits_truncate(0o640)).unwrap();
        // Pointing out of the copied tree (and of any rootfs): copied as a
        // link; the directory it names is neither read nor changed.
        let outside = tmp.path().join("outside");
        fs::create_dir(&outside).unwrap();
        fs::write(outside.join("host-file"), "host").unwrap();
        fs::set_permissions(&outside, fs::Permissions::from_mode(0o700)).unwrap();
        symlink(&outside, src.join("escape")).unwrap();

        run(&src, &dst, LIMITS).unwrap();

        assert_eq!(fs::read_to_string(dst.join("sub/deep/f")).unwrap(), "deep");
        let mode = |p: &str| fs::symlink_metadata(dst.join(p)).unwrap().mode() & 0o7777;
        assert_eq!(mode("sub"), 0o1750);
        assert_eq!(mode("secret"), 0o4600);
        assert_eq!(mode("fifo"), 0o640);
        assert!(fs::symlink_metadata(dst.join("fifo"))
            .unwrap()
            .file_type()
            .is_fifo_like());
        assert_eq!(fs::read_link(dst.join("rel")).unwrap(), Path::new("secret"));
        assert_eq!(fs::read_link(dst.join("escape")).unwrap(), outside);
        assert!(fs::symlink_metadata(dst.join("escape"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::metadata(&outside).unwrap().mode() & 0o7777, 0o700);
        let uid = fs::metadata(&src).unwrap().uid();
        assert_eq!(fs::symlink_metadata(dst.join("secret")).unwrap().uid(), uid);
    }

    trait FifoLike {
        fn is_fifo_like(&self) -> bool;
    }
    impl FifoLike for fs::FileType {
        fn is_fifo_like(&self) -> bool {
            use std::os::unix::fs::FileTypeExt;
            self.is_fifo()
        }
    }

    #[test]
    fn refuses_beyond_the_limits_naming_the_mount() {
        let (_tmp, src, dst) = dirs();
        fs::write(src.join("big"), vec![0u8; 4096]).unwrap();
        let err = run(&src, &dst, Limits { bytes: 4095, ..LIMITS }).unwrap_err();
        assert_eq!(
            err.to_string(),
            "tmpcopyup of /tmp at big: refused: more than 4095 bytes to copy"
        );

        let (_tmp, src, dst) = dirs();
        for i in 0..5 {
            fs::write(src.join(i.to_string()), "").unwrap();
        }
        let err = run(&src, &dst, Limits { entries: 4, ..LIMITS }).unwrap_err();
        assert!(
            err.to_string().contains("refused: more than 4 entries to copy"),
            "{err}"
        );

        let (_tmp, src, dst) = dirs();
        fs::create_dir_all(src.join("a/b/c")).unwrap();
        let err = run(&src, &dst, Limits { depth: 2, ..LIMITS }).unwrap_err();
        assert_eq!(
            err.to_string(),
            "tmpcopyup of /tmp at a/b/c: refused: directories nested deeper than 2"
        );
    }
}
