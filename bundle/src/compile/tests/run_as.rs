//! Who a sandbox runs as (`RunAs`) through whole compiles: an unprivileged
//! caller as itself, a root caller as the working directory's owner, or as
//! uid 0 with the host's root-only files masked.

use super::*;

fn root_inv() -> Invocation {
    Invocation {
        unprivileged: false,
        uid: 0,
        gid: 0,
        ..inv()
    }
}

/// The typical host with root-only files in the searched trees, and a
/// project owned by root.
fn root_host() -> FakeHost {
    let mut h = FakeHost::typical()
        .file("/etc/passwd")
        .file("/etc/shadow")
        .owned("/etc/shadow", 0, 42, 0o640)
        .file("/etc/gshadow")
        .owned("/etc/gshadow", 0, 42, 0o640)
        .file("/etc/ssl/private/host.key")
        .owned("/etc/ssl/private", 0, 0, 0o700)
        .owned("/etc/ssl/private/host.key", 0, 0, 0o600)
        .file("/etc/ssh/ssh_host_ed25519_key")
        .owned("/etc/ssh/ssh_host_ed25519_key", 0, 0, 0o600)
        .file("/etc/ssh/ssh_host_ed25519_key.pub")
        .file("/etc/a/b/c/d/e/too-deep")
        .owned("/etc/a/b/c/d/e/too-deep", 0, 0, 0o600)
        .dir("/var/lib/private")
        .owned("/var/lib/private", 0, 0, 0o700)
        .file("/var/lib/seed")
        .owned("/var/lib/seed", 0, 0, 0o600)
        .file("/var/lib/apt/lock")
        .owned("/var/lib/apt/lock", 0, 0, 0o640)
        .dir("/var/log/journal/abc")
        .file("/boot/System.map-6.1")
        .owned("/boot/System.map-6.1", 0, 0, 0o600)
        .file("/proc/slabinfo")
        .owned("/proc/slabinfo", 0, 0, 0o400)
        .file("/proc/cpuinfo")
        .file("/proc/sysrq-trigger")
        .owned("/proc/sysrq-trigger", 0, 0, 0o200)
        .file("/proc/123/environ")
        .owned("/proc/123/environ", 0, 0, 0o400)
        .owned("/home/u/proj", 0, 0, 0o755);
    for i in 0..20 {
        let f = format!("/var/log/journal/abc/system@{i}.journal");
        h = h.file(&f).owned(&f, 0, 101, 0o640);
    }
    h
}

fn user(c: &Compiled) -> &oci_spec::runtime::User {
    c.spec.process().as_ref().unwrap().user()
}

fn masked(c: &Compiled) -> Vec<String> {
    c.spec.linux().as_ref().unwrap().masked_paths().clone().unwrap()
}

fn is_devnull(c: &Compiled, dest: &str) -> bool {
    mount_at(c, dest)
        .iter()
        .any(|m| m.source().as_deref() == Some(Path::new("/dev/null")) && m.typ().as_deref() == Some("bind"))
}

fn is_empty_dir(c: &Compiled, dest: &str) -> bool {
    mount_at(c, dest)
        .iter()
        .any(|m| m.typ().as_deref() == Some("tmpfs") && opts(m).contains(&"ro"))
}

#[test]
fn the_decision() {
    let host = root_host();
    assert_eq!(RunAs::decide(&host, &inv()), RunAs::Caller { uid: 1000, gid: 1000 });
    assert_eq!(RunAs::decide(&host, &root_inv()), RunAs::RootMasked);
    let owned = host.clone().owned("/home/u/proj", 1000, 1001, 0o755);
    assert_eq!(
        RunAs::decide(&owned, &root_inv()),
        RunAs::Owner { uid: 1000, gid: 1001 }
    );
    // Root's group would read what root's group may.
    let root_group = host.clone().owned("/home/u/proj", 1000, 0, 0o755);
    assert_eq!(
        RunAs::decide(&root_group, &root_inv()),
        RunAs::Owner {
            uid: 1000,
            gid: crate::compile::run_as::NO_GROUP
        }
    );
    // A working directory that cannot be looked at counts as root's.
    let gone = Invocation {
        workdir: "/nowhere".into(),
        ..root_inv()
    };
    assert_eq!(RunAs::decide(&host, &gone), RunAs::RootMasked);
    assert_eq!(RunAs::RootMasked.describe(), "uid 0, root-only files masked");
    assert_eq!(
        RunAs::Owner { uid: 1000, gid: 1000 }.describe(),
        "runs as uid 1000 (the working directory's owner)"
    );
}

#[test]
fn a_root_caller_runs_as_the_owner_of_the_project() {
    let host = root_host().owned("/home/u/proj", 1000, 1000, 0o755);
    let c = run(&Policy::embedded_default(), &host, &root_inv());
    let u = user(&c);
    assert_eq!((u.uid(), u.gid()), (1000, 1000));
    assert_eq!(
        u.additional_gids().as_deref(),
        Some(&[1000][..]),
        "root's groups replaced"
    );
    let l = c.spec.linux().as_ref().unwrap();
    assert!(l.uid_mappings().is_none(), "no user namespace: the host's own uid");
    // Plain permissions keep root's files out of reach: nothing masked.
    assert_eq!(masked(&c), MASKED_PATHS);
    assert!(mount_at(&c, "/etc/shadow").is_empty());
    // The home is empty inside; with the host's, hidden paths stay hidden.
    assert_eq!(only_mount(&c, "/home/u").typ().as_deref(), Some("tmpfs"));
    let host_home = run(&policy("[filesystem]\nhome = \"host\""), &host, &root_inv());
    assert!(is_devnull(&host_home, "/home/u/.netrc"), "hidden paths stay hidden");

    // In a user namespace the owner is what uid 0 inside maps to.
    let c = run(&policy("[identity]\nuser_namespace = \"always\""), &host, &root_inv());
    let l = c.spec.linux().as_ref().unwrap();
    let m = &l.uid_mappings().as_ref().unwrap()[0];
    assert_eq!((m.container_id(), m.host_id(), m.size()), (0, 1000, 1));
    let m = &l.gid_mappings().as_ref().unwrap()[0];
    assert_eq!((m.container_id(), m.host_id()), (0, 1000));
    assert_eq!((user(&c).uid(), user(&c).gid()), (0, 0));
}

#[test]
fn an_unprivileged_caller_keeps_its_groups_and_nothing_is_masked() {
    let c = run(&Policy::embedded_default(), &root_host(), &inv());
    assert!(user(&c).additional_gids().is_none());
    assert_eq!(masked(&c), MASKED_PATHS);
    assert!(mount_at(&c, "/etc/shadow").is_empty());
}

#[test]
fn uid_0_gets_the_root_only_files_masked() {
    let c = run(&Policy::embedded_default(), &root_host(), &root_inv());
    let u = user(&c);
    assert_eq!((u.uid(), u.gid()), (0, 0));
    assert_eq!(u.additional_gids().as_deref(), Some(&[0][..]));
    for f in [
        "/etc/shadow",
        "/etc/gshadow",
        "/etc/ssh/ssh_host_ed25519_key",
        "/var/lib/seed",
        "/boot/System.map-6.1",
    ] {
        assert!(is_devnull(&c, f), "{f} not masked");
    }
    assert!(is_empty_dir(&c, "/etc/ssl/private"));
    assert!(is_empty_dir(&c, "/var/lib/private"));
    assert!(
        mount_at(&c, "/etc/ssl/private/host.key").is_empty(),
        "below a covered directory"
    );
    // Many root-only files in one directory: the directory, once.
    assert!(is_empty_dir(&c, "/var/log/journal/abc"));
    assert!(mount_at(&c, "/var/log/journal/abc/system@3.journal").is_empty());
    for f in [
        "/etc/passwd",
        "/etc/ssh/ssh_host_ed25519_key.pub",
        "/etc/a/b/c/d/e/too-deep",
        "/var/lib/apt/lock",
        "/home/u/proj",
    ] {
        assert!(!is_devnull(&c, f) && !is_empty_dir(&c, f), "{f} masked");
    }
    let m = masked(&c);
    for p in ["/proc/slabinfo", "/proc/kallsyms", "/sys/kernel/slab", "/proc/kcore"] {
        assert!(m.contains(&p.to_owned()), "{p} not in {m:?}");
    }
    assert!(!m.iter().any(|p| p.starts_with("/proc/1")), "{m:?}");
    assert!(!m.contains(&"/proc/cpuinfo".to_owned()));
    assert!(
        !m.contains(&"/proc/sysrq-trigger".to_owned()),
        "write-only: nothing to read"
    );
}

#[test]
fn masks_leave_the_project_and_the_policys_binds_alone() {
    // The project is root-only itself, and holds a root-only file.
    let host = root_host()
        .dir("/var/lib/proj/.git")
        .file("/var/lib/proj/key")
        .owned("/var/lib/proj", 0, 0, 0o700)
        .owned("/var/lib/proj/key", 0, 0, 0o600);
    let inv = Invocation {
        workdir: "/var/lib/proj".into(),
        ..root_inv()
    };
    let p = policy("[filesystem]\nreadonly = [\"/etc/ssl/private\"]\nhidden = [\"/etc/ssh\"]");
    let c = run(&p, &host, &inv);
    assert!(!is_empty_dir(&c, "/var/lib/proj"));
    assert!(mount_at(&c, "/var/lib/proj/key").is_empty());
    assert!(!is_empty_dir(&c, "/etc/ssl/private"), "a bind the policy asked for");
    // Inside a hidden directory: no second mount (no mount point there).
    assert!(is_empty_dir(&c, "/etc/ssh"));
    assert!(mount_at(&c, "/etc/ssh/ssh_host_ed25519_key").is_empty());
    assert!(is_devnull(&c, "/etc/shadow"));

    // A rootfs binds nothing of the host's trees: nothing to mask there.
    let rootfs = Invocation {
        rootfs: Some("/opt".into()),
        ..root_inv()
    };
    let c = run(&Policy::embedded_default(), &root_host(), &rootfs);
    assert!(mount_at(&c, "/etc/shadow").is_empty());
    assert!(
        masked(&c).contains(&"/proc/slabinfo".to_owned()),
        "/proc is the sandbox's own"
    );
}

#[test]
fn too_many_root_only_files_is_refused() {
    let mut host = root_host();
    for d in 0..40 {
        for f in 0..16 {
            let p = format!("/etc/app{d}/secret{f}");
            host = host.file(&p).owned(&p, 0, 0, 0o600);
        }
    }
    let e = error(&Policy::embedded_default(), &host, &root_inv());
    assert!(
        e.starts_with("mask the host's root-only files: 64") && e.contains("more than 512"),
        "{e}"
    );
}

#[test]
fn masks_are_only_where_the_sandbox_could_read() {
    // Another service's files: capless uid 0 is neither owner nor in their group.
    let host = root_host()
        .file("/etc/postgresql/pg_hba.conf")
        .owned("/etc/postgresql/pg_hba.conf", 105, 107, 0o640)
        .file("/etc/root-group.conf")
        .owned("/etc/root-group.conf", 105, 0, 0o640)
        .dir("/etc/polkit-1/rules.d")
        .owned("/etc/polkit-1/rules.d", 998, 0, 0o700);
    let c = run(&Policy::embedded_default(), &host, &root_inv());
    assert!(!is_devnull(&c, "/etc/postgresql/pg_hba.conf"), "not uid 0's to read");
    assert!(!is_empty_dir(&c, "/etc/polkit-1/rules.d"), "not uid 0's to enter");
    assert!(is_devnull(&c, "/etc/root-group.conf"), "root's group reads it");
    // A capability that reads anything: then everything is masked.
    let p = policy("[identity]\ncapabilities = [\"CAP_DAC_READ_SEARCH\"]");
    let c = run(&p, &host, &root_inv());
    assert!(is_devnull(&c, "/etc/postgresql/pg_hba.conf"));
    assert!(is_empty_dir(&c, "/etc/polkit-1/rules.d"));
    // In a user namespace the sandbox's root mounts them, and could not open
    // what it may not read: such masks are left out, the others stay.
    let userns = policy("[identity]\nuser_namespace = \"always\"");
    let c = run(&userns, &host, &root_inv());
    assert!(!is_empty_dir(&c, "/etc/polkit-1/rules.d"));
    assert!(is_devnull(&c, "/etc/shadow"));
    assert!(is_empty_dir(&c, "/etc/ssl/private"));
}

#[test]
fn run_as_the_owner_in_a_user_namespace_leaves_out_what_it_cannot_enter() {
    // Root's home, 0700: the owner mapped to root inside cannot enter it,
    // so its hidden paths can neither be mounted nor reached.
    let host = root_host()
        .owned("/home/u/proj", 1000, 1000, 0o755)
        .dir("/root/.ssh")
        .owned("/root", 0, 0, 0o700);
    let inv = Invocation {
        home: "/root".into(),
        ..root_inv()
    };
    // With the host's home (an empty one hides all of it anyway).
    let userns = policy("[filesystem]\nhome = \"host\"\n[identity]\nuser_namespace = \"always\"");
    let c = run(&userns, &host, &inv);
    assert!(
        mount_at(&c, "/root/.ssh").is_empty(),
        "{:?}",
        mount_at(&c, "/root/.ssh")
    );
    // Without one, the runtime mounts as root: the mask stays.
    let c = run(&policy("[filesystem]\nhome = \"host\""), &host, &inv);
    assert!(is_empty_dir(&c, "/root/.ssh"));
}
