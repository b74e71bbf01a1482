//! The plan of `apply`: what is chosen, what waits, what is named.

use std::collections::BTreeSet;
use std::path::PathBuf;

use super::*;

fn c(rel: &str, what: What, kind: &'static str) -> Change {
    Change {
        rel: PathBuf::from(rel),
        what,
        kind,
        was: "nothing",
        mode: Some(0o644),
        old_mode: None,
        target: None,
        host_run: None,
        conflict: None,
        refused: None,
    }
}

fn flagged(mut x: Change) -> Change {
    x.host_run = Some("host".into());
    x
}

fn rels(v: &[Change]) -> Vec<String> {
    v.iter().map(|c| c.rel.display().to_string()).collect()
}

#[test]
fn by_default_every_unflagged_change_and_no_flagged_one() {
    let changes = vec![
        c("src", What::Added, "dir"),
        c("src/a.rs", What::Added, "file"),
        flagged(c(".envrc", What::Added, "file")),
        c("README", What::Modified, "file"),
    ];
    let p = plan(changes, &[], &BTreeSet::new()).unwrap();
    assert_eq!(rels(&p.apply), ["src", "src/a.rs", "README"]);
    assert_eq!(rels(&p.flagged), [".envrc"]);
}

#[test]
fn a_named_path_brings_its_new_folders_and_a_flagged_one_only_when_named() {
    let changes = vec![
        flagged(c(".claude", What::Added, "dir")),
        flagged(c(".claude/settings.json", What::Added, "file")),
        c("new", What::Added, "dir"),
        c("new/deep", What::Added, "dir"),
        c("new/deep/f", What::Added, "file"),
        c("other", What::Modified, "file"),
    ];
    let p = plan(changes.clone(), &["new/deep/f".into()], &BTreeSet::new()).unwrap();
    assert_eq!(rels(&p.apply), ["new", "new/deep", "new/deep/f"]);
    let p = plan(changes.clone(), &["./.claude/".into()], &BTreeSet::new()).unwrap();
    assert_eq!(rels(&p.apply), [".claude", ".claude/settings.json"]);
    let e = plan(changes, &["nothing/here".into()], &BTreeSet::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("changed nothing there"), "{e}");
}

#[test]
fn conflicts_refusals_and_what_lies_below_them_wait() {
    let mut d = c("d", What::TypeChange, "dir");
    d.conflict = Some("changed".into());
    let mut dev = c("dev0", What::Added, "device");
    dev.refused = Some("a device node".into());
    let changes = vec![d, c("d/in", What::Added, "file"), dev, c("ok", What::Added, "file")];
    let p = plan(changes, &[], &BTreeSet::new()).unwrap();
    assert_eq!(rels(&p.apply), ["ok"]);
    assert_eq!(rels(&p.conflicts), ["d", "d/in"]);
    assert_eq!(rels(&p.refused), ["dev0"]);
}

#[test]
fn escaped_names_name_raw_paths_and_applied_ones_are_done() {
    let changes = vec![c("bad\u{1b}name", What::Added, "file"), c("x", What::Added, "file")];
    let p = plan(changes.clone(), &["bad\\u{1b}name".into()], &BTreeSet::new()).unwrap();
    assert_eq!(p.apply.len(), 1);
    let done = BTreeSet::from(["x".to_owned()]);
    let p = plan(changes, &[], &done).unwrap();
    assert_eq!(rels(&p.done), ["x"]);
}

#[test]
fn a_named_path_brought_before_is_said_so_not_refused() {
    let changes = vec![c("other", What::Modified, "file")];
    let applied: BTreeSet<String> = ["only-A.txt".to_owned()].into();
    let p = plan(changes.clone(), &["only-A.txt".into()], &applied).unwrap();
    assert!(p.apply.is_empty(), "{:?}", p.apply);
    assert_eq!(p.already, [PathBuf::from("only-A.txt")]);
    let p = plan(changes, &["only-A.txt".into(), "other".into()], &applied).unwrap();
    assert_eq!(rels(&p.apply), ["other"]);
}
