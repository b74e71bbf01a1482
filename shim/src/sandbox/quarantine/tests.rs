//! The quarantine on a scratch working directory and a scratch store: what
//! a run makes is moved aside and comes back, what was there, claude-shim's
//! placeholders and a cloned repository's history stay, and links planted
//! on the way are moved as links, never followed.

use std::path::{Path, PathBuf};

use claude_shim_bundle::policy::values::AfterEffects;
use claude_shim_bundle::{host_run, HostView};

use super::prepare;
use crate::sandbox::lease::Neighbours;

use super::store;
use super::Watch;
use crate::hostfs::Dir;
use crate::sandbox::host::StdHost;

struct World {
    _t: tempfile::TempDir,
    wd: PathBuf,
    q: PathBuf,
}

fn world() -> World {
    let t = tempfile::tempdir().unwrap();
    let wd = t.path().join("wd");
    let q = t.path().join("q");
    std::fs::create_dir_all(wd.join(".git/hooks")).unwrap();
    std::fs::write(wd.join(".git/config"), "[core]\n").unwrap();
    std::fs::create_dir_all(wd.join("old/.claude")).unwrap();
    std::fs::create_dir(&q).unwrap();
    World { _t: t, wd, q }
}

fn host() -> StdHost {
    StdHost::new(None)
}

/// The picture at start, as the compile takes it.
fn watch(w: &World, mode: AfterEffects) -> Watch {
    let found = host()
        .find_all(&w.wd, &claude_shim_bundle::compile::search_names)
        .unwrap();
    Watch {
        wd: Dir::open(&w.wd).unwrap(),
        start: host_run::present(&w.wd, &found, &Dir::open(&w.wd).unwrap())
            .into_iter()
            .collect(),
        mode,
        store: prepare(mode, "test", &quarantine(w)).unwrap(),
    }
}

fn quarantine(w: &World) -> impl Fn() -> anyhow::Result<Dir> + '_ {
    move || Ok(Dir::open(&w.q)?)
}

#[test]
fn what_the_run_made_is_moved_aside_and_restored() {
    let w = world();
    let watch = watch(&w, AfterEffects::Quarantine);
    // The run: a nested .claude, an .envrc that is a link to a secret, a new
    // repository with a hostile config, a new commondir in the old one, a
    // placeholder of claude-shim's, and ordinary work.
    std::fs::create_dir_all(w.wd.join("sub/.claude")).unwrap();
    std::fs::write(w.wd.join("sub/.claude/settings.json"), "{\"hooks\":{}}").unwrap();
    std::os::unix::fs::symlink("/etc/shadow", w.wd.join(".envrc")).unwrap();
    std::fs::create_dir_all(w.wd.join("clone/.git/objects")).unwrap();
    std::fs::write(w.wd.join("clone/.git/config"), "[core]\nfsmonitor = touch /tmp/x\n").unwrap();
    std::fs::write(w.wd.join("clone/.git/objects/blob"), "history").unwrap();
    std::fs::write(w.wd.join(".git/commondir"), "../elsewhere").unwrap();
    std::fs::create_dir(w.wd.join(".vscode")).unwrap();
    std::fs::write(w.wd.join("main.rs"), "fn main() {}").unwrap();

    let out = watch.finish(&host(), &[w.wd.join(".vscode")], &Neighbours::alone());
    let moved: Vec<String> = out.moved.iter().map(|l| l.rel.display().to_string()).collect();
    assert_eq!(
        moved,
        [".envrc", ".git/commondir", "clone/.git/config", "sub/.claude"],
        "{out:?}"
    );
    assert!(out.failed.is_empty() && out.errors.is_empty(), "{out:?}");
    for gone in [".envrc", ".git/commondir", "clone/.git/config", "sub/.claude"] {
        assert!(w.wd.join(gone).symlink_metadata().is_err(), "{gone} is still there");
    }
    // Kept: the history of the clone, the placeholder, the work, what was there.
    for kept in [
        "clone/.git/objects/blob",
        ".vscode",
        "main.rs",
        "old/.claude",
        ".git/config",
    ] {
        assert!(w.wd.join(kept).symlink_metadata().is_ok(), "{kept} was taken");
    }
    // The link went as a link.
    let run = out.run.clone().unwrap();
    let stored = w.q.join(&run);
    assert_eq!(std::fs::read_link(stored.join("1")).unwrap(), Path::new("/etc/shadow"));
    assert!(out.lines()[0].contains(&format!("claude-shim quarantine restore {run}")));

    let lines = store::restore_in(&Dir::open(&w.q).unwrap(), &run).unwrap();
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("restored")).count(),
        4,
        "{lines:?}"
    );
    assert_eq!(
        std::fs::read_to_string(w.wd.join("sub/.claude/settings.json")).unwrap(),
        "{\"hooks\":{}}"
    );
    assert!(!stored.exists(), "an emptied run is removed");
}

#[test]
fn report_mode_moves_nothing() {
    let w = world();
    let watch = watch(&w, AfterEffects::Report);
    std::fs::write(w.wd.join(".mcp.json"), "{}").unwrap();
    let out = watch.finish(&host(), &[], &Neighbours::alone());
    assert!(out.run.is_none() && out.moved.is_empty());
    assert_eq!(out.reported.len(), 1);
    assert!(w.wd.join(".mcp.json").exists());
    assert!(out.lines()[0].contains("left in place"), "{:?}", out.lines());
}

#[test]
fn a_restore_never_overwrites_and_names_are_checked() {
    let w = world();
    let watch = watch(&w, AfterEffects::Quarantine);
    std::fs::write(w.wd.join(".mcp.json"), "{\"planted\":1}").unwrap();
    let out = watch.finish(&host(), &[], &Neighbours::alone());
    let run = out.run.unwrap();
    std::fs::write(w.wd.join(".mcp.json"), "{\"mine\":1}").unwrap();
    let q = Dir::open(&w.q).unwrap();
    let lines = store::restore_in(&q, &run).unwrap();
    assert!(
        lines[0].starts_with("kept") && lines[0].contains("something is there now"),
        "{lines:?}"
    );
    assert_eq!(std::fs::read_to_string(w.wd.join(".mcp.json")).unwrap(), "{\"mine\":1}");
    assert!(w.q.join(&run).join("manifest.json").exists(), "kept in the quarantine");
    for bad in ["", "..", "a/b", "/etc"] {
        assert!(store::restore_in(&q, bad).is_err(), "{bad:?}");
    }
}

#[test]
fn a_parent_replaced_by_a_link_is_not_followed() {
    let w = world();
    let watch = watch(&w, AfterEffects::Quarantine);
    // The run made sub/.claude, then swapped sub for a link to a victim
    // directory holding a .claude of its own.
    let victim = w.q.parent().unwrap().join("victim");
    std::fs::create_dir_all(victim.join(".claude")).unwrap();
    std::os::unix::fs::symlink(&victim, w.wd.join("sub")).unwrap();
    let out = watch.finish(&host(), &[], &Neighbours::alone());
    assert!(victim.join(".claude").is_dir(), "the victim's entry was moved: {out:?}");
}

#[test]
fn a_session_reports_only_its_own_runs_in_its_project() {
    let w = world();
    let q = Dir::open(&w.q).unwrap();
    let made = |wd: &Path, id: &str| {
        let mut out = super::Outcome::default();
        std::fs::create_dir_all(wd.join("sub/.claude")).unwrap();
        let left = super::Left {
            rel: "sub/.claude".into(),
            runs: "Claude Code",
        };
        store::prepare(&quarantine(&w), id)
            .unwrap()
            .move_aside(&Dir::open(wd).unwrap(), vec![left], &mut out);
        out.run.unwrap()
    };
    let earlier = made(&w.wd, "earlier");
    let before = [earlier].into_iter().collect();
    let other = w.q.parent().unwrap().join("other");
    std::fs::create_dir(&other).unwrap();
    made(&other, "elsewhere");
    assert!(store::session_lines_in(&q, &before, &w.wd).unwrap().is_empty());
    let run = made(&w.wd, "this");
    let lines = store::session_lines_in(&q, &before, &w.wd).unwrap();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[1].contains(&format!("{}/sub/.claude", w.wd.display())),
        "{lines:?}"
    );
    assert!(
        lines[1].ends_with(&format!("claude-shim quarantine restore {run})")),
        "{lines:?}"
    );
}

/// Issue 35: no cap, no depth limit, no skipped folder: a flood past the
/// old 1000, an entry 12 levels down and ones in node_modules and target
/// are all moved aside, and what was there at start in those folders stays.
#[test]
fn floods_deep_entries_and_package_stores_are_all_moved() {
    let w = world();
    std::fs::create_dir_all(w.wd.join("node_modules/old/.vscode")).unwrap();
    let watch = watch(&w, AfterEffects::Quarantine);
    for i in 0..1200 {
        let d = w.wd.join(format!("flood/{i}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(".envrc"), "touch /tmp/marker").unwrap();
    }
    let deep = w.wd.join("a/b/c/d/e/f/g/h/i/j/k/l");
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join(".mcp.json"), "{}").unwrap();
    std::fs::create_dir_all(w.wd.join("node_modules/p/.claude")).unwrap();
    std::fs::create_dir_all(w.wd.join("target/debug/.git/objects")).unwrap();
    std::fs::write(w.wd.join("target/debug/.git/config"), "[core]\n").unwrap();
    let out = watch.finish(&host(), &[], &Neighbours::alone());
    assert!(out.closed(), "{:?}", out.lines());
    assert_eq!(out.moved.len(), 1200 + 3, "{:?}", &out.lines()[..5]);
    for gone in [
        "flood/0/.envrc",
        "flood/1199/.envrc",
        "a/b/c/d/e/f/g/h/i/j/k/l/.mcp.json",
        "node_modules/p/.claude",
        "target/debug/.git/config",
    ] {
        assert!(w.wd.join(gone).symlink_metadata().is_err(), "{gone} is still there");
    }
    assert!(
        w.wd.join("node_modules/old/.vscode").is_dir(),
        "what was there at start stays"
    );
}

/// Issue 35: an entry that cannot be moved into the quarantine (here too
/// big to copy across filesystems) is renamed in place to an inert name;
/// nothing is left under a name the host runs.
#[test]
fn an_entry_that_cannot_be_moved_aside_is_made_inert_in_place() {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        panic!("this test needs a tmpfs at /dev/shm beside the temporary directory's filesystem");
    }
    let w = world();
    let q = tempfile::tempdir_in(shm).unwrap();
    let across = |_: &World| -> anyhow::Result<Dir> { Ok(Dir::open(q.path())?) };
    let mut watch = watch(&w, AfterEffects::Quarantine);
    watch.store = prepare(AfterEffects::Quarantine, "inert", &|| across(&w)).unwrap();
    std::fs::create_dir_all(w.wd.join("sub/.claude")).unwrap();
    let big = std::fs::File::create(w.wd.join("sub/.claude/big")).unwrap();
    big.set_len(65 << 20).unwrap();
    let out = watch.finish(&host(), &[], &Neighbours::alone());
    let same_fs = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&w.wd).unwrap().dev() == std::fs::metadata(q.path()).unwrap().dev()
    };
    assert!(!same_fs, "the quarantine must be on another filesystem for this test");
    assert!(out.closed(), "{:?}", out.lines());
    assert_eq!(out.inert.len(), 1, "{:?}", out.lines());
    assert!(!w.wd.join("sub/.claude").exists());
    let (_, to) = &out.inert[0];
    assert!(w.wd.join(to).join("big").is_file(), "{to:?}");
    assert!(
        to.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(".claude-shim-moved-"),
        "{to:?}"
    );
    assert!(
        out.lines().iter().any(|l| l.contains("renamed in place")),
        "{:?}",
        out.lines()
    );
}

/// Issue 35 item 4: a run that shared the directory moves nothing new (a
/// live neighbour's may be among it) and leaves it pending; the last one
/// out moves what is pending, still there, with its own.
#[test]
fn a_run_that_shared_the_directory_leaves_new_entries_to_the_last() {
    let w = world();
    let shared = Neighbours {
        shared: true,
        last: false,
        pending: Vec::new(),
    };
    let watch1 = watch(&w, AfterEffects::Quarantine);
    std::fs::create_dir_all(w.wd.join("mine/.claude")).unwrap();
    let out = watch1.finish(&host(), &[], &shared);
    assert!(out.closed() && out.moved.is_empty(), "{:?}", out.lines());
    assert_eq!(out.deferred, [w.wd.join("mine/.claude")]);
    assert!(w.wd.join("mine/.claude").is_dir(), "a neighbour's may not move");
    assert!(
        out.lines()[0].contains("the last sandbox to leave"),
        "{:?}",
        out.lines()
    );

    let watch2 = watch(&w, AfterEffects::Quarantine);
    std::fs::write(w.wd.join(".envrc"), "").unwrap();
    let last = Neighbours {
        shared: true,
        last: true,
        pending: vec![w.wd.join("mine/.claude"), w.wd.join("gone/.envrc")],
    };
    let out = watch2.finish(&host(), &[], &last);
    let moved: Vec<String> = out.moved.iter().map(|l| l.rel.display().to_string()).collect();
    assert_eq!(moved, [".envrc", "mine/.claude"], "{:?}", out.lines());
}

/// The classes known by shape and by what a config names (issue 35 item 1):
/// a repository under another name, the file the repository's config
/// includes that did not exist at start, a hook manager's config and a
/// toolchain file 9 levels down, each moved; the repository's history
/// stays, and so does a virtualenv's `.pth` (environments inside the
/// project are the project's in the live mode, docs/sandbox.md).
#[test]
fn what_the_run_made_by_class_is_moved_aside() {
    let w = world();
    std::fs::write(w.wd.join(".git/config"), "[include]\n\tpath = ../team.gitconfig\n").unwrap();
    std::fs::create_dir_all(w.wd.join(".venv/lib/python3.11/site-packages/pkg")).unwrap();
    std::fs::write(w.wd.join(".venv/pyvenv.cfg"), "home = /usr/bin\n").unwrap();
    let watch = watch(&w, AfterEffects::Quarantine);
    for d in ["vendor/x/objects", "vendor/x/refs/heads"] {
        std::fs::create_dir_all(w.wd.join(d)).unwrap();
    }
    std::fs::write(w.wd.join("vendor/x/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(w.wd.join("vendor/x/config"), "[core]\nfsmonitor = touch /tmp/x\n").unwrap();
    let sp = w.wd.join(".venv/lib/python3.11/site-packages");
    std::fs::write(sp.join("evil.pth"), "import os\n").unwrap();
    std::fs::write(sp.join("pkg/__init__.py"), "").unwrap();
    std::fs::write(w.wd.join("team.gitconfig"), "[core]\nfsmonitor = touch /tmp/x\n").unwrap();
    std::fs::write(w.wd.join(".pre-commit-config.yaml"), "repos: []\n").unwrap();
    std::fs::create_dir_all(w.wd.join("deep/a/b/c/d/e/f/g/h/i")).unwrap();
    std::fs::write(w.wd.join("deep/a/b/c/d/e/f/g/h/i/rust-toolchain.toml"), "").unwrap();

    let out = watch.finish(&host(), &[], &Neighbours::alone());
    let moved: Vec<String> = out.moved.iter().map(|l| l.rel.display().to_string()).collect();
    assert_eq!(
        moved,
        [
            ".pre-commit-config.yaml",
            "deep/a/b/c/d/e/f/g/h/i/rust-toolchain.toml",
            "team.gitconfig",
            "vendor/x/config",
        ],
        "{out:?}"
    );
    assert!(out.failed.is_empty() && out.errors.is_empty(), "{out:?}");
    for kept in [
        "vendor/x/HEAD",
        ".venv/lib/python3.11/site-packages/evil.pth",
        ".venv/lib/python3.11/site-packages/pkg/__init__.py",
    ] {
        assert!(w.wd.join(kept).symlink_metadata().is_ok(), "{kept} was taken");
    }
}
