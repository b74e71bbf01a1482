//! An image whose /run, /tmp and /var/tmp hold files, as a real image's do,
//! and the check a `--read-only` user runs on it; podman and ctr both use it.

use std::path::{Path, PathBuf};
use std::process::Command;

use claude_shim_e2e::engines::*;
use claude_shim_e2e::output_of;

/// What a user of `--read-only` checks on the image from `files_rootfs`: the
/// image's files in /run, /tmp and /var/tmp (contents, modes, owners, a
/// symlink), those tmpfs writable, the root read-only.
pub(crate) const READ_ONLY_CHECK: &str = "cat /run/app.pid /tmp/hello /tmp/sub/deep/f /var/tmp/vt; \
    stat -c '%A %u:%g %n' /run /run/app.pid /run/lock /tmp /tmp/hello /tmp/sub /tmp/sub/deep /var/tmp; \
    readlink /tmp/link; touch /tmp/new /run/new /var/tmp/new && echo tmpfs-rw; \
    touch /x 2>/dev/null || echo root-ro";

/// A copy of the test rootfs whose /run, /tmp and /var/tmp hold files, as a
/// real image's do (pid files, lock directories, a user's private directory).
pub(crate) fn files_rootfs(dir: &Path) -> PathBuf {
    let root = dir.join("files-rootfs");
    let out = Command::new("cp")
        .arg("-a")
        .arg(claude_shim_e2e::rootfs())
        .arg(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "cp: {}", text(&out.stderr));
    let script = "set -e; cd \"$1\"; mkdir -p run/lock tmp/sub/deep; echo 4242 > run/app.pid; \
        chown 1000:1000 run/app.pid; chmod 0640 run/app.pid; echo hello > tmp/hello; chmod 0600 tmp/hello; \
        ln -s hello tmp/link; echo deep > tmp/sub/deep/f; chown 1000:1000 tmp/sub; chmod 0700 tmp/sub; \
        echo vt > var/tmp/vt";
    let out = Command::new("sh")
        .args(["-c", script, "sh"])
        .arg(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "files rootfs: {}", text(&out.stderr));
    root
}

/// Imports `rootfs` into the test's podman as `tag`, as hack/podman imports
/// the test image (under its lock, removing the blob cache that
/// containers/image writes to /var/lib/containers whatever the storage root).
pub(crate) fn import_image(pm: &Podman, rootfs: &Path, tag: &str) {
    let tar = pm.dir.path().join("files-rootfs.tar");
    let out = Command::new("tar")
        .arg("-C")
        .arg(rootfs)
        .arg("--numeric-owner")
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .output()
        .unwrap();
    assert!(out.status.success(), "tar: {}", text(&out.stderr));
    let script = "c=/var/lib/containers/cache; had=0; [ -e $c/blob-info-cache-v1.boltdb ] && had=1; \
        hadvar=0; [ -e /var/lib/containers ] && hadvar=1; \
        podman import -q --change 'ENV=PATH=/usr/sbin:/usr/bin:/sbin:/bin' \"$1\" \"$2\" >/dev/null; s=$?; \
        if [ $had = 0 ]; then rm -f $c/blob-info-cache-v1.boltdb; rmdir $c 2>/dev/null; \
        [ $hadvar = 1 ] || rmdir /var/lib/containers 2>/dev/null; fi; exit $s";
    let hack_podman = claude_shim_e2e::workspace().join("hack/podman");
    let mut c = Command::new("flock");
    c.arg(&hack_podman)
        .args(["sh", "-c", script, "sh"])
        .arg(&tar)
        .arg(tag)
        .env("CONTAINERS_CONF", pm.dir.path().join("containers.conf"))
        .env("CONTAINERS_STORAGE_CONF", pm.dir.path().join("storage.conf"));
    let out = output_of(c, pm.dir.path());
    assert!(out.status.success(), "podman import: {}", text(&out.stderr));
    std::fs::remove_file(&tar).unwrap();
}
