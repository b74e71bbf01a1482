//! Paths the runtime creates inside a rootfs stay inside it, and mounts that a
//! symlink would redirect onto /proc or /sys are refused. Each rootfs here is
//! a private scratch copy holding the symlinks under test; the "host" paths
//! they point at are scratch directories that must stay untouched.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use claude_shim_e2e::*;
use serde_json::{json, Value};

/// A writable busybox rootfs in the test's scratch directory.
fn private_rootfs(env: &Env, name: &str) -> PathBuf {
    let dir = env.dir.path().join(name);
    for d in ["bin", "proc", "sys", "dev", "tmp"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    std::fs::copy(rootfs().join("bin/busybox"), dir.join("bin/busybox")).unwrap();
    for tool in ["sh", "cat", "ls"] {
        symlink("busybox", dir.join("bin").join(tool)).unwrap();
    }
    dir
}

fn push_mount(v: &mut Value, m: Value) {
    v["mounts"].as_array_mut().unwrap().push(m);
}

fn bind(dest: &str, source: &Path) -> Value {
    json!({"destination": dest, "type": "bind", "source": source, "options": ["rbind", "rw"]})
}

/// A bundle whose image has `/data -> target` and a volume at /data.
fn volume_through_link(env: &Env, name: &str, target: &str) -> (PathBuf, PathBuf) {
    let rootfs = private_rootfs(env, name);
    symlink(target, rootfs.join("data")).unwrap();
    let volume = env.dir.path().join(format!("{name}-volume"));
    std::fs::create_dir(&volume).unwrap();
    let bundle = env.bundle(name, |v| {
        v["root"] = json!({"path": rootfs, "readonly": false});
        push_mount(v, bind("/data", &volume));
        set_args(v, &["true"]);
    });
    (bundle, volume)
}

/// Empties a shared /dev but for `sub`, so the next run makes its nodes
/// afresh (an existing node is an error).
fn reset_dev(shared: &Path) {
    for e in std::fs::read_dir(shared).unwrap().flatten() {
        if e.file_name() != "sub" {
            let p = e.path();
            let _ = std::fs::remove_dir_all(&p).or_else(|_| std::fs::remove_file(&p));
        }
    }
}

/// The reproducer: `/data -> /proc` in the image and a volume at
/// /data would put the volume over procfs, with the masked and read-only
/// paths landing in the volume.
#[test]
fn volume_redirected_onto_proc_by_an_image_symlink_is_refused() {
    let env = Env::new();
    let (bundle, volume) = volume_through_link(&env, "proc-link", "/proc");
    let id = unique_id("proc-link");
    let line = env.fails(&["run", "--bundle", bundle.to_str().unwrap(), &id]);
    assert!(
        line.contains("mount on /data") && line.contains("resolves to /proc"),
        "{line}"
    );
    assert_eq!(
        std::fs::read_dir(&volume).unwrap().count(),
        0,
        "the volume was written to"
    );
    env.assert_no_leaks(&id);
}

/// A config mount inside /proc is refused as runc refuses it; the files
/// lxcfs emulates stay allowed.
#[test]
fn mounts_inside_proc_follow_runc() {
    let env = Env::new();
    let bundle = env.bundle("proc-sys", |v| {
        push_mount(
            v,
            json!({"destination": "/proc/sys", "type": "tmpfs", "source": "tmpfs", "options": ["rw"]}),
        );
        set_args(v, &["true"]);
    });
    let id = unique_id("proc-sys");
    let line = env.fails(&["run", "--bundle", bundle.to_str().unwrap(), &id]);
    assert!(
        line.contains("mount on /proc/sys") && line.contains("inside /proc"),
        "{line}"
    );
    env.assert_no_leaks(&id);

    let uptime = env.dir.path().join("uptime");
    std::fs::write(&uptime, "42.00 1.00\n").unwrap();
    let bundle = env.bundle("lxcfs", |v| {
        push_mount(
            v,
            json!({"destination": "/proc/uptime", "type": "bind", "source": uptime, "options": ["bind", "ro"]}),
        );
        set_args(v, &["cat", "/proc/uptime"]);
    });
    let id = unique_id("lxcfs");
    assert_eq!(
        env.ok(&["run", "--bundle", bundle.to_str().unwrap(), &id]),
        "42.00 1.00\n"
    );
    env.assert_no_leaks(&id);
}

/// A symlink that redirects a mount into /sys is refused; /sys/fs/cgroup
/// named by the config itself (as every engine does) still mounts.
#[test]
fn mount_redirected_into_sys_is_refused() {
    let env = Env::new();
    let (bundle, _) = volume_through_link(&env, "sys-link", "/sys/kernel");
    let id = unique_id("sys-link");
    let line = env.fails(&["run", "--bundle", bundle.to_str().unwrap(), &id]);
    assert!(line.contains("redirects it to /sys/kernel"), "{line}");
    env.assert_no_leaks(&id);

    let bundle = env.bundle("sys-cgroup", |v| {
        let mounts = v["mounts"].as_array().unwrap();
        assert!(
            mounts.iter().any(|m| m["destination"] == "/sys/fs/cgroup"),
            "the default spec mounts /sys/fs/cgroup"
        );
        set_args(v, &["ls", "/sys/fs/cgroup"]);
    });
    let id = unique_id("sys-cgroup");
    assert!(!env.ok(&["run", "--bundle", bundle.to_str().unwrap(), &id]).is_empty());
    env.assert_no_leaks(&id);
}

/// A rootfs whose /dev is bind-mounted from `shared` (as if another
/// container shared it), listing the device /dev/sub/null2, and a scratch
/// `host` directory that stands for the host.
struct DevSetup {
    rootfs: PathBuf,
    shared: PathBuf,
    host: PathBuf,
    bundle: PathBuf,
}

fn dev_setup(env: &Env, name: &str, args: &[&str]) -> DevSetup {
    let rootfs = private_rootfs(env, name);
    let shared = env.dir.path().join(format!("{name}-shared-dev"));
    std::fs::create_dir(&shared).unwrap();
    let host = env.dir.path().join(format!("{name}-host-dir"));
    std::fs::create_dir(&host).unwrap();
    let bundle = env.bundle(name, |v| {
        v["root"] = json!({"path": rootfs, "readonly": false});
        let mounts = v["mounts"].as_array_mut().unwrap();
        mounts.retain(|m| m["destination"] != "/dev");
        mounts.insert(1, bind("/dev", &shared));
        v["linux"]["devices"] = json!([
            {"path": "/dev/sub/null2", "type": "c", "major": 1, "minor": 3, "fileMode": 438, "uid": 0, "gid": 0}
        ]);
        set_args(v, args);
    });
    DevSetup {
        rootfs,
        shared,
        host,
        bundle,
    }
}

/// The device-node race from the issue: /dev is bind-mounted from a directory
/// that another party shares, and flips `/dev/sub` between a directory and a
/// symlink to a host directory while the runtime creates `/dev/sub/null2`.
/// Whatever the timing, nothing may appear in the host directory.
#[test]
fn device_nodes_under_a_flipping_symlink_stay_in_the_rootfs() {
    let env = Env::new();
    let DevSetup {
        shared, host, bundle, ..
    } = dev_setup(&env, "dev-race", &["true"]);
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (stop, sub, host) = (stop.clone(), shared.join("sub"), host.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let _ = std::fs::remove_dir_all(&sub);
                let _ = std::fs::remove_file(&sub);
                let _ = std::fs::create_dir(&sub);
                std::thread::yield_now();
                let _ = std::fs::remove_dir_all(&sub);
                let _ = symlink(&host, &sub);
                std::thread::yield_now();
            }
        })
    };
    for i in 0..20 {
        let id = unique_id(&format!("dev-race{i}"));
        // Success or a clean failure are both fine; touching the host is not.
        let _ = env.run(&["run", "--bundle", bundle.to_str().unwrap(), &id]);
        env.assert_no_leaks(&id);
        let found: Vec<_> = std::fs::read_dir(&host).unwrap().flatten().map(|e| e.path()).collect();
        assert!(found.is_empty(), "run {i} created {found:?} outside the rootfs");
        reset_dev(&shared);
    }
    stop.store(true, Ordering::SeqCst);
    flipper.join().unwrap();
}

/// A static symlink in a bind-mounted /dev pointing at a host directory: the
/// link is resolved inside the rootfs. Where that path is missing there, the
/// runtime refuses (it creates no directory through a dangling symlink);
/// where it exists, the device node is made there. The host is never touched.
#[test]
fn device_node_under_an_escaping_symlink_stays_in_the_rootfs() {
    let env = Env::new();
    let DevSetup {
        rootfs,
        shared,
        host,
        bundle,
    } = dev_setup(&env, "dev-link", &["sh", "-c", "echo x > /dev/sub/null2 && echo ok"]);
    symlink(&host, shared.join("sub")).unwrap();
    let id = unique_id("dev-link");
    env.fails(&["run", "--bundle", bundle.to_str().unwrap(), &id]);
    env.assert_no_leaks(&id);
    assert_eq!(
        std::fs::read_dir(&host).unwrap().count(),
        0,
        "a node was made on the host"
    );

    let in_rootfs = rootfs.join(host.strip_prefix("/").unwrap());
    std::fs::create_dir_all(&in_rootfs).unwrap();
    reset_dev(&shared);
    let id = unique_id("dev-link");
    assert_eq!(env.ok(&["run", "--bundle", bundle.to_str().unwrap(), &id]), "ok\n");
    env.assert_no_leaks(&id);
    assert_eq!(
        std::fs::read_dir(&host).unwrap().count(),
        0,
        "a node was made on the host"
    );
    let inside = in_rootfs.join("null2");
    let meta = std::fs::symlink_metadata(&inside).unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_char_device(&meta.file_type()));
}

fn copy_up_tmpfs(dest: &str) -> Value {
    json!({"destination": dest, "type": "tmpfs", "source": "tmpfs",
           "options": ["rw", "rprivate", "nosuid", "nodev", "tmpcopyup"]})
}

/// The permissions, owner, size and mtime of a path and, for a directory,
/// the names in it: what a copy that followed a link could have changed.
fn fingerprint(p: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p).unwrap();
    let mut names: Vec<String> = if m.is_dir() {
        std::fs::read_dir(p)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    } else {
        vec![]
    };
    names.sort();
    format!(
        "{:o} {}:{} {} {} {names:?}",
        m.mode(),
        m.uid(),
        m.gid(),
        m.size(),
        m.mtime()
    )
}

/// A hostile image for `tmpcopyup` (podman's `--read-only` and `--tmpfs`):
/// under the copied /data, symlinks point at a host directory, at a host file
/// and up out of the rootfs, and the destination /cache is itself a link to
/// the host directory's path. Each link under /data is copied as a link and
/// never followed; /cache resolves inside the rootfs (as the container reads
/// it), so what is copied there is the rootfs's directory of that path, not
/// the host's. The host directory's file is seen nowhere; nothing on the host
/// changes.
#[test]
fn tmpcopyup_copies_escaping_symlinks_as_symlinks() {
    let env = Env::new();
    let rootfs = private_rootfs(&env, "copyup-links");
    for tool in ["readlink", "echo", "touch"] {
        symlink("busybox", rootfs.join("bin").join(tool)).unwrap();
    }
    let host_dir = env.dir.path().join("copyup-host-dir");
    std::fs::create_dir(&host_dir).unwrap();
    std::fs::write(host_dir.join("host-secret"), "secret\n").unwrap();
    let host_file = env.dir.path().join("copyup-host-file");
    std::fs::write(&host_file, "host\n").unwrap();
    std::fs::set_permissions(&host_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let data = rootfs.join("data");
    std::fs::create_dir_all(data.join("sub")).unwrap();
    symlink(&host_dir, data.join("dir-link")).unwrap();
    symlink(&host_file, data.join("sub/file-link")).unwrap();
    symlink("../../../../../../..", data.join("up")).unwrap();
    std::fs::write(data.join("plain"), "image\n").unwrap();
    symlink(&host_dir, rootfs.join("cache")).unwrap();
    let in_rootfs = rootfs.join(host_dir.strip_prefix("/").unwrap());
    std::fs::create_dir_all(&in_rootfs).unwrap();
    std::fs::write(in_rootfs.join("rootfs-file"), "").unwrap();
    let before = (fingerprint(&host_dir), fingerprint(&host_file));

    let bundle = env.bundle("copyup-links", |v| {
        v["root"] = json!({"path": rootfs, "readonly": true});
        push_mount(v, copy_up_tmpfs("/data"));
        push_mount(v, copy_up_tmpfs("/cache"));
        set_args(
            v,
            &[
                "sh",
                "-c",
                "for l in dir-link sub/file-link up; do readlink /data/$l; done; cat /data/plain; \
                 ls -A /cache; ls -A /data/dir-link/; cat /data/sub/file-link 2>/dev/null || echo dangles; \
                 touch /cache/x /data/y && echo writable",
            ],
        );
    });
    let id = unique_id("copyup-links");
    let out = env.ok(&["run", "--bundle", bundle.to_str().unwrap(), &id]);
    env.assert_no_leaks(&id);
    assert_eq!(
        out,
        format!(
            "{}\n{}\n../../../../../../..\nimage\nrootfs-file\nrootfs-file\ndangles\nwritable\n",
            host_dir.display(),
            host_file.display()
        )
    );
    assert_eq!((fingerprint(&host_dir), fingerprint(&host_file)), before);
    assert_eq!(std::fs::read_to_string(&host_file).unwrap(), "host\n");
}

/// A hostile image cannot make the copy run long or fill memory: past the
/// byte limit (here one sparse 2 GiB file) the run is refused with one line
/// naming the mount, and nothing is left behind.
#[test]
fn tmpcopyup_past_its_limit_is_refused_naming_the_mount() {
    let env = Env::new();
    let rootfs = private_rootfs(&env, "copyup-big");
    let big = std::fs::File::create(rootfs.join("tmp/big")).unwrap();
    big.set_len(2 << 30).unwrap();
    let bundle = env.bundle("copyup-big", |v| {
        v["root"] = json!({"path": rootfs, "readonly": true});
        push_mount(v, copy_up_tmpfs("/tmp"));
        set_args(v, &["true"]);
    });
    let id = unique_id("copyup-big");
    let line = env.fails(&["run", "--bundle", bundle.to_str().unwrap(), &id]);
    assert!(
        line.contains("tmpcopyup of /tmp at big: refused: more than 1073741824 bytes to copy"),
        "{line}"
    );
    env.assert_no_leaks(&id);
}
