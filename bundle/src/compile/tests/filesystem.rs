//! The filesystem pass through whole compiles: the host root's skeleton and
//! binds, kernel filesystems, masked, protected and hidden paths, symlinks,
//! placeholders, mount order, extra binds and a rootfs.

use super::*;

#[test]
fn host_root_is_a_read_only_skeleton_with_read_only_binds() {
    let c = agent();
    let root = c.spec.root().as_ref().unwrap();
    assert_eq!(root.path(), Path::new("rootfs"));
    assert_eq!(root.readonly(), Some(true));
    for name in [
        "usr",
        "etc",
        "opt",
        "var",
        "home",
        "root",
        "proc",
        "sys",
        "dev",
        "tmp",
        "run",
        "lost+found",
    ] {
        assert!(c.skeleton.contains(&SkeletonEntry::Dir(name.into())), "{name}");
    }
    assert!(c.skeleton.contains(&SkeletonEntry::Symlink {
        path: "bin".into(),
        target: "usr/bin".into()
    }));
    assert!(c.skeleton.contains(&SkeletonEntry::File("vmlinuz.old".into())));
    assert!(!c
        .skeleton
        .iter()
        .any(|e| matches!(e, SkeletonEntry::File(p) if p == Path::new("weird.sock"))));
    for dir in ["/usr", "/etc", "/opt", "/var", "/home", "/root", "/vmlinuz.old"] {
        let m = only_mount(&c, dir);
        assert_eq!(m.typ().as_deref(), Some("bind"));
        assert_eq!(m.source().as_deref(), Some(Path::new(dir)));
        assert_eq!(opts(m), ["rbind", "ro", "rro", "nosuid", "nodev"], "{dir}");
    }
    for not_bound in ["/bin", "/lost+found", "/weird.sock"] {
        assert!(mount_at(&c, not_bound).is_empty(), "{not_bound}");
    }
}

#[test]
fn kernel_filesystems_dev_and_private_tmp() {
    let c = agent();
    let proc = only_mount(&c, "/proc");
    assert_eq!(
        (proc.typ().as_deref(), opts(proc)),
        (Some("proc"), vec!["nosuid", "noexec", "nodev"])
    );
    let sys = only_mount(&c, "/sys");
    assert_eq!(sys.typ().as_deref(), Some("sysfs"));
    assert!(opts(sys).contains(&"ro"));
    assert_eq!(only_mount(&c, "/dev").typ().as_deref(), Some("tmpfs"));
    let pts = only_mount(&c, "/dev/pts");
    assert!(opts(pts).contains(&"newinstance") && opts(pts).contains(&"ptmxmode=0666"));
    assert!(!opts(pts).contains(&"gid=5"), "gid 5 is unmapped in the user namespace");
    assert_eq!(only_mount(&c, "/dev/shm").typ().as_deref(), Some("tmpfs"));
    assert_eq!(only_mount(&c, "/dev/mqueue").typ().as_deref(), Some("mqueue"));
    for t in ["/tmp", "/var/tmp", "/run"] {
        assert_eq!(only_mount(&c, t).typ().as_deref(), Some("tmpfs"), "{t}");
    }
    let root = run(
        &Policy::embedded_default(),
        &FakeHost::typical(),
        &Invocation {
            unprivileged: false,
            ..inv()
        },
    );
    assert!(opts(only_mount(&root, "/dev/pts")).contains(&"gid=5"));
    // No /var/tmp on the host: no mount point to mount on.
    let mut host = FakeHost::typical();
    host.paths.remove(Path::new("/var/tmp"));
    assert!(mount_at(&run(&Policy::embedded_default(), &host, &inv()), "/var/tmp").is_empty());
}

#[test]
fn masked_and_read_only_proc_and_sys_paths() {
    let c = agent();
    let l = c.spec.linux().as_ref().unwrap();
    let masked = l.masked_paths().as_ref().unwrap();
    for p in [
        "/proc/kcore",
        "/proc/keys",
        "/proc/timer_list",
        "/proc/sched_debug",
        "/proc/scsi",
        "/proc/acpi",
        "/sys/firmware",
        "/sys/devices/virtual/powercap",
        "/proc/latency_stats",
        "/proc/timer_stats",
        "/proc/asound",
    ] {
        assert!(masked.contains(&p.to_owned()), "{p}");
    }
    let ro = l.readonly_paths().as_ref().unwrap();
    for p in ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"] {
        assert!(ro.contains(&p.to_owned()), "{p}");
    }
}

#[test]
fn workdir_is_writable_and_ro_on_request() {
    let c = agent();
    let m = only_mount(&c, "/home/u/proj");
    assert_eq!(m.source().as_deref(), Some(Path::new("/home/u/proj")));
    assert_eq!(opts(m), ["rbind", "nosuid", "nodev"]);
    assert_eq!(c.spec.process().as_ref().unwrap().cwd(), Path::new("/home/u/proj"));
    let c = run(&policy("[filesystem]\nworkdir = \"ro\""), &FakeHost::typical(), &inv());
    assert!(opts(only_mount(&c, "/home/u/proj")).contains(&"ro"));
}

#[test]
fn protected_paths_are_read_only_and_missing_ones_get_placeholders() {
    let c = agent();
    for p in [
        "/home/u/proj/.git/hooks",
        "/home/u/proj/.git/config",
        "/home/u/proj/.bashrc",
    ] {
        let m = only_mount(&c, p);
        assert_eq!(m.source().as_deref(), Some(Path::new(p)));
        assert!(opts(m).contains(&"ro"), "{p}");
    }
    assert!(c.placeholders.contains(&Placeholder {
        path: "/home/u/proj/.claude".into(),
        dir: true
    }));
    // A file is not stood in for: one created during the run is found at exit.
    assert!(!c.placeholders.iter().any(|p| p.path.ends_with(".mcp.json")));
    assert!(mount_at(&c, "/home/u/proj/.mcp.json").is_empty());
    assert!(c.placeholders.contains(&Placeholder {
        path: "/home/u/proj/.vscode".into(),
        dir: true
    }));
    assert!(!c
        .placeholders
        .iter()
        .any(|p| p.path.ends_with(".git/hooks") || p.path.ends_with(".bashrc")));
    for p in &c.placeholders {
        assert!(opts(only_mount(&c, p.path.to_str().unwrap())).contains(&"ro"));
    }
    // A worktree's .git is a file: nothing can be created under it.
    let host = FakeHost::typical().file("/home/w/.git").dir("/home/w");
    let c = run(
        &Policy::embedded_default(),
        &host,
        &Invocation {
            workdir: "/home/w".into(),
            ..inv()
        },
    );
    assert!(!c.placeholders.iter().any(|p| p.path.starts_with("/home/w/.git")));
    // Extra protected paths and unprotected built-ins.
    let p = policy("[filesystem]\nprotected = [\"Makefile\"]\nunprotected = [\".bashrc\"]");
    let c = run(&p, &FakeHost::typical().file("/home/u/proj/Makefile"), &inv());
    assert!(opts(only_mount(&c, "/home/u/proj/Makefile")).contains(&"ro"));
    assert!(mount_at(&c, "/home/u/proj/.bashrc").is_empty());
    assert_eq!(c.opt_outs, ["filesystem.unprotected: .bashrc"]);
}

#[test]
fn twenty_thousand_protected_paths_each_get_their_one_read_only_mount() {
    // Lists this long are what the compile must take in linear time (issue
    // 36); the timing is hack/bench's row, this checks what comes out.
    let mut host = FakeHost::typical();
    let mut listed = Vec::new();
    for d in 0..200 {
        host = host.dir(&format!("/home/u/proj/p/d{d:03}"));
        for f in 0..100 {
            let rel = format!("p/d{d:03}/f{f:03}");
            // Every other one is there; the rest get stand-ins.
            if f % 2 == 0 {
                host = host.file(&format!("/home/u/proj/{rel}"));
            }
            listed.push(rel);
        }
    }
    // Listed twice, mounted once.
    listed.push("p/d000/f000".into());
    let quoted: Vec<String> = listed.iter().map(|p| format!("{p:?}")).collect();
    let p = policy(&format!("[filesystem]\nprotected = [{}]", quoted.join(", ")));
    let c = run(&p, &host, &inv());
    let mut at: BTreeMap<&Path, Vec<&Mount>> = BTreeMap::new();
    for m in c.spec.mounts().iter().flatten() {
        at.entry(m.destination().as_path()).or_default().push(m);
    }
    let placeholders: std::collections::HashSet<&Path> = c.placeholders.iter().map(|p| p.path.as_path()).collect();
    for (i, rel) in listed.iter().take(20_000).enumerate() {
        let path = Path::new("/home/u/proj").join(rel);
        let mounts = at.get(path.as_path()).map(Vec::as_slice).unwrap_or_default();
        assert_eq!(mounts.len(), 1, "{rel}: {mounts:?}");
        assert!(opts(mounts[0]).contains(&"ro"), "{rel}");
        assert_eq!(
            placeholders.contains(path.as_path()),
            i % 2 == 1,
            "{rel}: a stand-in exactly where nothing is"
        );
    }
    assert_eq!(
        c.placeholders
            .iter()
            .filter(|p| p.path.starts_with("/home/u/proj/p"))
            .count(),
        10_000
    );
}

#[test]
fn secrets_are_hidden_and_env_files_read_empty() {
    // The empty home shows no secret of the home: nothing to hide there.
    let c = agent();
    for f in ["/home/u/.ssh", "/home/u/.netrc"] {
        assert!(mount_at(&c, f).is_empty(), "{f} is behind the empty home");
    }
    assert_eq!(
        only_mount(&c, "/home/u/proj/.env").source().as_deref(),
        Some(Path::new("/dev/null"))
    );
    let c = run(&policy("[filesystem]\nhome = \"host\""), &FakeHost::typical(), &inv());
    let ssh = only_mount(&c, "/home/u/.ssh");
    assert_eq!(ssh.typ().as_deref(), Some("tmpfs"));
    assert!(opts(ssh).contains(&"ro"));
    for f in ["/home/u/.netrc", "/home/u/proj/.env", "/home/u/proj/web/.env.local"] {
        let m = only_mount(&c, f);
        assert_eq!(m.source().as_deref(), Some(Path::new("/dev/null")), "{f}");
        assert_eq!(opts(m), ["bind", "ro"]);
    }
    assert!(mount_at(&c, "/home/u/.aws").is_empty(), "absent secrets need no mount");
    let c = run(
        &policy("[filesystem]\nhide_env_files = false"),
        &FakeHost::typical(),
        &inv(),
    );
    assert!(mount_at(&c, "/home/u/proj/.env").is_empty());
    assert_eq!(c.opt_outs, ["filesystem.hide_env_files = false"]);
    // A symlinked secret is hidden by what it points to.
    let host = FakeHost::typical().link("/home/u/.aws", "/data/aws").dir("/data/aws");
    assert_eq!(
        only_mount(&run(&Policy::embedded_default(), &host, &inv()), "/data/aws")
            .typ()
            .as_deref(),
        Some("tmpfs")
    );
}

#[test]
fn path_rules_hold_through_symlinks() {
    // issue 11: a writable entry that is a symlink to / bound the host's root writable.
    let host = FakeHost::typical()
        .link("/home/u/rootlink", "/")
        .link("/home/u/proclink", "../../proc/sys")
        .link("/home/u/loop", "/home/u/loop")
        .link("/home/u/sshlink", ".ssh")
        .link("/home/u/cachelink", "/home/u/.cache");
    let cases = [
        (
            "writable = [\"~/rootlink\"]",
            "filesystem.writable[0]: /home/u/rootlink (through a symlink: it resolves to /) cannot be bound",
        ),
        (
            "readonly = [\"/home/u/proclink\"]",
            "filesystem.readonly[0]: /home/u/proclink (through a symlink: it resolves to /proc/sys) cannot be bound",
        ),
        (
            "writable = [\"~/loop/x\"]",
            "filesystem.writable[0]: resolve /home/u/loop/x: too many levels of symbolic links",
        ),
        (
            "writable = [\"~/sshlink\"]",
            "filesystem.writable[0]: /home/u/.ssh lies under the hidden path /home/u/.ssh",
        ),
        (
            "masked = [\"/home/u/rootlink\"]",
            "filesystem.masked: /home/u/rootlink (through a symlink: it resolves to /) cannot be masked",
        ),
        (
            "hidden = [\"~/proclink\"]",
            "filesystem.hidden: /home/u/proclink (through a symlink: it resolves to /proc/sys) cannot be hidden",
        ),
    ];
    for (body, want) in cases {
        let e = error(&policy(&format!("[filesystem]\n{body}")), &host, &inv());
        assert_eq!(e, format!("use policy test.toml: {want}"), "{body}");
    }
    // A link to an ordinary directory binds what it points to.
    let c = run(&policy("[filesystem]\nwritable = [\"~/cachelink\"]"), &host, &inv());
    assert_eq!(opts(only_mount(&c, "/home/u/.cache")), ["rbind", "nosuid", "nodev"]);
}

#[test]
fn placeholders_stay_inside_the_working_directory() {
    // .git is a symlink out of the working directory: .git/hooks is protected
    // where it points, and no placeholder is made there.
    let host = FakeHost::typical()
        .link("/home/u/proj2/.git", "/home/u/elsewhere")
        .dir("/home/u/elsewhere")
        .dir("/home/u/proj2");
    let mut i = inv();
    i.workdir = "/home/u/proj2".into();
    let c = run(&Policy::embedded_default(), &host, &i);
    assert!(
        c.placeholders.iter().all(|p| p.path.starts_with("/home/u/proj2/")),
        "{:?}",
        c.placeholders
    );
    assert!(!c.placeholders.iter().any(|p| p.path.starts_with("/home/u/elsewhere")));
}

#[test]
fn too_many_env_files_is_refused() {
    let mut host = FakeHost::typical();
    for i in 0..mounts::ENV_FILE_LIMIT {
        host = host.file(&format!("/home/u/proj/d{i}/.env"));
    }
    let e = error(&Policy::embedded_default(), &host, &inv());
    assert!(
        e.starts_with("use policy embedded:agent.toml: filesystem.hide_env_files: /home/u/proj holds 1000"),
        "{e}"
    );
}

#[test]
fn masked_paths_cover_host_paths_not_already_private() {
    let host = FakeHost::typical().dir("/var/lib/secrets").file("/etc/token");
    let c = run(
        &policy("[filesystem]\nmasked = [\"/var/lib/secrets\", \"/etc/token\", \"/nonexistent\"]"),
        &host,
        &inv(),
    );
    let m = only_mount(&c, "/var/lib/secrets");
    assert_eq!(m.typ().as_deref(), Some("tmpfs"));
    assert!(opts(m).contains(&"ro"));
    assert_eq!(
        only_mount(&c, "/etc/token").source().as_deref(),
        Some(Path::new("/dev/null"))
    );
    assert!(mount_at(&c, "/nonexistent").is_empty());
    // /run/user is under the private /run already.
    assert!(mount_at(&c, "/run/user").is_empty());
}

#[test]
fn mounts_are_ordered_parents_first() {
    let p = policy("[filesystem]\nwritable = [\"~/.cache\"]\nreadonly = [\"/home/u/proj/vendor\"]");
    let host = FakeHost::typical().dir("/home/u/proj/vendor");
    let c = run(&p, &host, &inv());
    let dests: Vec<&Path> = c
        .spec
        .mounts()
        .as_ref()
        .unwrap()
        .iter()
        .map(|m| m.destination().as_path())
        .collect();
    for (i, d) in dests.iter().enumerate() {
        for later in &dests[i + 1..] {
            assert!(
                !(d.starts_with(later) && d != later),
                "{} is mounted before its parent {}",
                d.display(),
                later.display()
            );
        }
    }
    let pos = |d: &str| dests.iter().position(|x| *x == Path::new(d)).unwrap();
    assert!(pos("/home") < pos("/home/u/proj"));
    assert!(pos("/home/u/proj") < pos("/home/u/proj/vendor"));
    assert!(pos("/home/u/proj") < pos("/home/u/proj/.git/hooks"));
    assert!(pos("/dev") < pos("/dev/pts"));
    assert!(opts(only_mount(&c, "/home/u/proj/vendor")).contains(&"ro"));
    assert_eq!(opts(only_mount(&c, "/home/u/.cache")), ["rbind", "nosuid", "nodev"]);
    assert_eq!(c.opt_outs, ["filesystem.writable: ~/.cache"]);
}

#[test]
fn extra_binds_missing_required_optional_and_conflicting() {
    let host = FakeHost::typical();
    let e = error(&policy("[filesystem]\nwritable = [\"/data\"]"), &host, &inv());
    assert_eq!(
        e,
        "use policy test.toml: filesystem.writable[0]: /data does not exist (a leading \"?\" skips a missing path)"
    );
    let c = run(&policy("[filesystem]\nwritable = [\"?/data\"]"), &host, &inv());
    assert!(mount_at(&c, "/data").is_empty());
    // The working directory itself is bound once.
    let c = run(&policy("[filesystem]\nwritable = [\"~/proj\"]"), &host, &inv());
    assert_eq!(mount_at(&c, "/home/u/proj").len(), 1);
    // A bind under a hidden path written absolutely is caught after expansion.
    let e = error(
        &policy("[filesystem]\nreadonly = [\"/home/u/.ssh/keys\"]"),
        &host.clone().dir("/home/u/.ssh/keys"),
        &inv(),
    );
    assert!(
        e.contains("filesystem.readonly[0]: /home/u/.ssh/keys lies under the hidden path /home/u/.ssh"),
        "{e}"
    );
}

#[test]
fn a_rootfs_replaces_the_host_root() {
    let host = FakeHost::typical().dir("/srv/rootfs/var/tmp").dir("/srv/rootfs/etc");
    let i = Invocation {
        rootfs: Some("/srv/rootfs".into()),
        ..inv()
    };
    let c = run(&Policy::embedded_default(), &host, &i);
    let root = c.spec.root().as_ref().unwrap();
    assert_eq!(
        (root.path().as_path(), root.readonly()),
        (Path::new("/srv/rootfs"), Some(true))
    );
    assert!(c.skeleton.is_empty());
    assert!(mount_at(&c, "/usr").is_empty() && mount_at(&c, "/home").is_empty());
    assert_eq!(only_mount(&c, "/var/tmp").typ().as_deref(), Some("tmpfs"));
    assert!(opts(only_mount(&c, "/home/u/proj")).contains(&"rbind"));
    assert!(opts(only_mount(&c, "/home/u/proj/.git/hooks")).contains(&"ro"));
    assert_eq!(
        only_mount(&c, "/home/u/proj/.env").source().as_deref(),
        Some(Path::new("/dev/null"))
    );
    // The host's home is not in the rootfs: its secrets need no hiding there.
    assert!(mount_at(&c, "/home/u/.ssh").is_empty());
    // The same through the policy.
    let p = policy("[filesystem]\nroot = \"/srv/rootfs\"");
    assert_eq!(
        run(&p, &host, &inv()).spec.root().as_ref().unwrap().path(),
        Path::new("/srv/rootfs")
    );
    let e = error(&policy("[filesystem]\nroot = \"/srv/none\""), &host, &inv());
    assert!(
        e.contains("use rootfs /srv/none (filesystem.root): it is not a directory"),
        "{e}"
    );
}
