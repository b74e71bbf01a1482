//! `filesystem.workspace = "review"`: the working directory is an overlay
//! over itself, no host path under it is bound, nothing is stood in for,
//! the quarantine has nothing to compare, and the hidden paths still cover.

use super::*;

fn review(extra: &str) -> Policy {
    policy(&format!("[filesystem]\nworkspace = \"review\"\n{extra}"))
}

#[test]
fn the_working_directory_is_an_overlay_and_nothing_of_the_host_is_bound_under_it() {
    let c = run(&review(""), &FakeHost::typical(), &inv());
    let m = only_mount(&c, "/home/u/proj");
    assert_eq!(m.typ().as_deref(), Some("overlay"));
    let o = opts(m);
    for want in [
        "nosuid",
        "nodev",
        "index=off",
        "metacopy=off",
        "lowerdir=/home/u/proj",
        "userxattr",
    ] {
        assert!(o.contains(&want), "{want} not in {o:?}");
    }
    assert!(!o.iter().any(|o| o.starts_with("upperdir=")), "{o:?}");
    // No `.git` bind of itself, no read-only config, no placeholder.
    for m in c.spec.mounts().iter().flatten() {
        let d = m.destination();
        if d.starts_with("/home/u/proj") && d != Path::new("/home/u/proj") {
            assert!(
                m.source().as_deref() == Some(Path::new("/dev/null")) || m.typ().as_deref() == Some("tmpfs"),
                "a host path bound over the overlay: {m:?}"
            );
        }
    }
    assert!(c.placeholders.is_empty(), "{:?}", c.placeholders);
    assert!(c.host_run.is_none());
    // Secrets still read as empty over the layer.
    assert_eq!(
        only_mount(&c, "/home/u/proj/.env").source().as_deref(),
        Some(Path::new("/dev/null"))
    );
    let live = agent();
    assert_eq!(only_mount(&live, "/home/u/proj").typ().as_deref(), Some("bind"));
    assert!(!live.placeholders.is_empty());
}

#[test]
fn root_without_a_user_namespace_refuses_directory_redirects() {
    let root = Invocation {
        unprivileged: false,
        uid: 0,
        gid: 0,
        ..inv()
    };
    let c = run(&review(""), &FakeHost::typical(), &root);
    let o = opts(only_mount(&c, "/home/u/proj"));
    assert!(
        o.contains(&"redirect_dir=nofollow") && !o.contains(&"userxattr"),
        "{o:?}"
    );
}

#[test]
fn the_layer_is_attached_once_and_a_colon_is_escaped() {
    let host = FakeHost::typical().dir("/home/u/a:b\\c");
    let i = Invocation {
        workdir: "/home/u/a:b\\c".into(),
        ..inv()
    };
    let mut c = run(&review(""), &host, &i);
    assert!(opts(only_mount(&c, "/home/u/a:b\\c")).contains(&"lowerdir=/home/u/a\\:b\\\\c"));
    attach_layer(&mut c.spec, &i.workdir, Path::new("/s/upper"), Path::new("/s/work")).unwrap();
    let o = opts(only_mount(&c, "/home/u/a:b\\c"));
    assert!(
        o.contains(&"upperdir=/s/upper") && o.contains(&"workdir=/s/work"),
        "{o:?}"
    );
    let again = attach_layer(&mut c.spec, &i.workdir, Path::new("/x"), Path::new("/y")).unwrap_err();
    assert!(again.to_string().contains("has one"), "{again}");
    let mut live = agent();
    let none = attach_layer(
        &mut live.spec,
        Path::new("/home/u/proj"),
        Path::new("/x"),
        Path::new("/y"),
    )
    .unwrap_err();
    assert!(none.to_string().contains("no overlay"), "{none}");
}

#[test]
fn what_would_write_the_project_is_refused() {
    let host = FakeHost::typical().dir("/home/u/proj/cache");
    let e = error(&review("writable = [\"/home/u/proj/cache\"]"), &host, &inv());
    assert!(e.contains("filesystem.writable[0]") && e.contains("review"), "{e}");
    let home = Invocation {
        workdir: "/home/u".into(),
        ..inv()
    };
    let e = error(&review(""), &FakeHost::typical(), &home);
    assert!(e.contains("filesystem.workspace") && e.contains("is the home"), "{e}");
    let e = Policy::from_toml_str(
        "version = 1\n[filesystem]\nworkspace = \"review\"\nworkdir = \"ro\"\n",
        "t.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("filesystem.workspace") && e.contains("choose one"), "{e}");
    let e = Policy::from_toml_str("version = 1\n[filesystem]\nworkspace = \"copy\"\n", "t.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("filesystem.workspace"), "{e}");
}
