//! The home pass through whole compiles: the empty home and what comes back
//! on top of it, `home = "host"`, and the home as the working directory.

use super::*;

fn index_of(c: &Compiled, dest: &str) -> usize {
    let mounts = c.spec.mounts().as_ref().unwrap();
    mounts
        .iter()
        .position(|m| m.destination() == Path::new(dest))
        .unwrap_or_else(|| panic!("no mount at {dest}"))
}

fn tool_host() -> FakeHost {
    FakeHost::typical()
        .dir("/home/u/.cargo/bin")
        .file("/home/u/.cargo/credentials.toml")
        .dir("/home/u/.local/bin")
        .file("/home/u/.gitconfig")
        .dir("/home/u/.docker/run")
}

#[test]
fn the_home_is_an_empty_tmpfs_with_the_tools_on_top() {
    let c = run(&Policy::embedded_default(), &tool_host(), &inv());
    let home = only_mount(&c, "/home/u");
    assert_eq!(home.typ().as_deref(), Some("tmpfs"));
    // In the user namespace the process is root, the caller mapped to it.
    assert_eq!(opts(home), ["nosuid", "nodev", "mode=0700", "uid=0", "gid=0"]);
    let (h, proj) = (index_of(&c, "/home/u"), index_of(&c, "/home/u/proj"));
    assert!(h < proj, "the working directory is mounted on the empty home");
    for tool in ["/home/u/.cargo", "/home/u/.local/bin", "/home/u/.gitconfig"] {
        let m = only_mount(&c, tool);
        assert_eq!(m.source().as_deref(), Some(Path::new(tool)));
        assert_eq!(opts(m), ["rbind", "ro", "rro", "nosuid", "nodev"], "{tool}");
        assert!(h < index_of(&c, tool), "{tool} comes back on top of the empty home");
    }
    // Missing tools are skipped, hidden paths still win inside the ones bound.
    assert!(mount_at(&c, "/home/u/.rustup").is_empty());
    let cred = only_mount(&c, "/home/u/.cargo/credentials.toml");
    assert_eq!(cred.source().as_deref(), Some(Path::new("/dev/null")));
    assert!(index_of(&c, "/home/u/.cargo") < index_of(&c, "/home/u/.cargo/credentials.toml"));
    assert!(c.opt_outs.is_empty(), "{:?}", c.opt_outs);
}

#[test]
fn the_empty_home_belongs_to_the_process() {
    let root_caller = Invocation {
        unprivileged: false,
        uid: 1000,
        gid: 1001,
        ..inv()
    };
    // Root in a user's project runs as its owner, whose the tmpfs is.
    let users = FakeHost::typical().owned("/home/u/proj", 1000, 1001, 0o755);
    let c = run(&Policy::embedded_default(), &users, &root_caller);
    assert_eq!(
        opts(only_mount(&c, "/home/u")),
        ["nosuid", "nodev", "mode=0700", "uid=1000", "gid=1001"]
    );
    // Root in its own project stays uid 0 (root-only files masked): so is the tmpfs.
    let c = run(&Policy::embedded_default(), &FakeHost::typical(), &root_caller);
    assert_eq!(
        opts(only_mount(&c, "/home/u")),
        ["nosuid", "nodev", "mode=0700", "uid=0", "gid=0"]
    );
}

#[test]
fn home_host_is_an_opt_out_and_shows_the_hosts_home() {
    let c = run(&policy("[filesystem]\nhome = \"host\""), &tool_host(), &inv());
    assert!(mount_at(&c, "/home/u").is_empty());
    assert_eq!(c.opt_outs, ["filesystem.home = host"]);
    assert_eq!(only_mount(&c, "/home/u/.ssh").typ().as_deref(), Some("tmpfs"));
}

#[test]
fn the_whole_home_bound_back_keeps_its_secrets_hidden() {
    let c = run(
        &policy("[filesystem]\nreadonly = [\"~\"]"),
        &FakeHost::typical(),
        &inv(),
    );
    let at = mount_at(&c, "/home/u");
    assert_eq!(at.len(), 2, "{at:?}");
    assert_eq!(
        at[1].typ().as_deref(),
        Some("bind"),
        "the bind goes on top of the tmpfs"
    );
    assert_eq!(only_mount(&c, "/home/u/.ssh").typ().as_deref(), Some("tmpfs"));
    assert_eq!(
        only_mount(&c, "/home/u/.netrc").source().as_deref(),
        Some(Path::new("/dev/null"))
    );
}

#[test]
fn no_empty_home_where_there_is_nothing_to_cover() {
    // HOME unset (/), a home that does not exist, a rootfs, the project itself.
    for (home, rootfs) in [("/", None), ("/home/nobody", None), ("/home/u", Some("/rootfs"))] {
        let i = Invocation {
            home: home.into(),
            rootfs: rootfs.map(PathBuf::from),
            ..inv()
        };
        let c = run(&Policy::embedded_default(), &FakeHost::typical().dir("/rootfs"), &i);
        assert!(
            !c.spec
                .mounts()
                .iter()
                .flatten()
                .any(|m| m.typ().as_deref() == Some("tmpfs") && m.destination() == Path::new(home)),
            "{home} {rootfs:?}"
        );
    }
    let i = Invocation {
        workdir: "/home/u".into(),
        ..inv()
    };
    let c = run(&Policy::embedded_default(), &FakeHost::typical(), &i);
    let wd = only_mount(&c, "/home/u");
    assert_eq!(
        wd.typ().as_deref(),
        Some("bind"),
        "the home as the project stays the host's"
    );
    // A home under the working directory is still covered.
    let i = Invocation {
        workdir: "/home".into(),
        ..inv()
    };
    let c = run(&Policy::embedded_default(), &FakeHost::typical(), &i);
    assert!(index_of(&c, "/home") < index_of(&c, "/home/u"));
    assert_eq!(only_mount(&c, "/home/u").typ().as_deref(), Some("tmpfs"));
}

#[test]
fn the_home_as_the_working_directory_keeps_its_start_up_files() {
    let host = FakeHost::typical()
        .file("/home/u/.bashrc")
        .file("/home/u/.profile")
        .dir("/home/u/.config/autostart")
        .dir("/home/u/.local/share")
        .dir("/home/u/bin")
        .dir("/home/u/.local/state/claude-shim/claude")
        .file("/home/u/.cargo/config.toml");
    let i = Invocation {
        workdir: "/home/u".into(),
        env: vec![("PATH".into(), "/home/u/bin:/home/u/.local/bin:/usr/bin".into())],
        ..inv()
    };
    let c = run(&Policy::embedded_default(), &host, &i);
    for p in [
        "/home/u/.bashrc",
        "/home/u/.profile",
        "/home/u/.config",
        "/home/u/bin",
        "/home/u/.local/state/claude-shim",
        "/home/u/.cargo/config.toml",
        "/home/u/.local/bin",
        "/home/u/.local/share/applications",
    ] {
        let m = mount_at(&c, p);
        assert!(!m.is_empty(), "{p} is not protected");
        assert!(m.iter().all(|m| opts(m).contains(&"ro")), "{p}");
        assert!(index_of(&c, "/home/u") < index_of(&c, p));
    }
    // Missing directories whose parent exists become placeholders; missing
    // files are left to the quarantine at exit.
    let placeholders: Vec<&Path> = c.placeholders.iter().map(|p| p.path.as_path()).collect();
    for p in [
        "/home/u/.local/bin",
        "/home/u/.local/share/applications",
        "/home/u/.vim",
    ] {
        assert!(placeholders.contains(&Path::new(p)), "{p}: {placeholders:?}");
    }
    for p in ["/home/u/.vimrc", "/home/u/.local/share/systemd/user", "/home/u/.emacs"] {
        assert!(!placeholders.contains(&Path::new(p)), "{p}");
        assert!(mount_at(&c, p).is_empty(), "{p}");
    }
    // The folders above a deeper protected path are mount points (a
    // writable bind of themselves): renaming `.local` away is refused.
    for p in ["/home/u/.local", "/home/u/.local/share", "/home/u/.local/state"] {
        let m = mount_at(&c, p);
        assert_eq!(m.len(), 1, "{p} is not pinned");
        assert!(!opts(m[0]).contains(&"ro"), "{p}: the folder itself stays writable");
    }
    assert!(index_of(&c, "/home/u/.local") < index_of(&c, "/home/u/.local/bin"));
    // `.cargo` is a mount point already (the policy's read-only tool bind).
    assert_eq!(mount_at(&c, "/home/u/.cargo").len(), 1);
    // A home without `.local`: it is made for the run, pinned, and `.local/bin` stood in for.
    let bare = FakeHost::typical().file("/home/u/.bashrc");
    let c = run(&Policy::embedded_default(), &bare, &i);
    let placeholders: Vec<&Path> = c.placeholders.iter().map(|p| p.path.as_path()).collect();
    for p in [
        "/home/u/.local",
        "/home/u/.local/bin",
        "/home/u/.local/share",
        "/home/u/.local/share/applications",
    ] {
        assert!(placeholders.contains(&Path::new(p)), "{p}: {placeholders:?}");
        assert_eq!(mount_at(&c, p).len(), 1, "{p}");
    }
    assert!(opts(mount_at(&c, "/home/u/.local/bin")[0]).contains(&"ro"));
    assert!(!opts(mount_at(&c, "/home/u/.local")[0]).contains(&"ro"));
    // Not the home: none of it (but the built-in protected paths).
    let c = run(&Policy::embedded_default(), &host, &inv());
    assert!(mount_at(&c, "/home/u/proj/.config").is_empty());
    assert!(mount_at(&c, "/home/u/.config").is_empty());
}

#[test]
fn claude_shims_state_stays_read_only_in_a_project_that_holds_it() {
    let host = FakeHost::typical().dir("/home/u/proj/state/claude-shim");
    let mut i = inv();
    i.env.push(("XDG_STATE_HOME".into(), "/home/u/proj/state".into()));
    let c = run(&Policy::embedded_default(), &host, &i);
    assert!(opts(only_mount(&c, "/home/u/proj/state/claude-shim")).contains(&"ro"));
    // Missing, it is a placeholder.
    let c = run(
        &Policy::embedded_default(),
        &FakeHost::typical().dir("/home/u/proj/state"),
        &i,
    );
    assert!(c
        .placeholders
        .iter()
        .any(|p| p.path == Path::new("/home/u/proj/state/claude-shim") && p.dir));
}

#[test]
fn a_home_named_through_a_link_still_gets_its_start_up_files_stood_in_for() {
    let host = FakeHost::typical().link("/h", "/home/u");
    let direct = Invocation {
        workdir: "/home/u".into(),
        ..inv()
    };
    let linked = Invocation {
        home: "/h".into(),
        ..direct.clone()
    };
    let want = run(&Policy::embedded_default(), &host, &direct).placeholders;
    assert!(want.iter().any(|p| p.path == Path::new("/home/u/.profile")), "{want:?}");
    assert_eq!(run(&Policy::embedded_default(), &host, &linked).placeholders, want);
}
