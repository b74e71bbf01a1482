//! The classification of a layer's entries and the conflict rules, on
//! entries made by hand.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::*;
use crate::sandbox::review::fds::{Meta, Type};

const START: i64 = 1_000;

fn meta(t: Type, mode: u32, ctime: i64) -> Meta {
    Meta {
        file_type: t,
        mode,
        len: 1,
        uid: 1000,
        gid: 1000,
        ctime_ns: ctime,
    }
}

fn entry(rel: &str, upper: Upper, host: Host) -> Entry {
    let ut = match &upper {
        Upper::Dir { .. } => Type::Dir,
        Upper::File => Type::File,
        Upper::Link(_) => Type::Link,
        Upper::Whiteout => Type::Whiteout,
        Upper::Special(_) => Type::Device,
        Upper::Foreign(_) => Type::File,
    };
    let ht = match &host {
        Host::Missing => None,
        Host::Dir => Some(Type::Dir),
        Host::File => Some(Type::File),
        Host::Link(_) => Some(Type::Link),
        Host::Special(_) => Some(Type::Fifo),
    };
    Entry {
        rel: PathBuf::from(rel),
        upper,
        upper_meta: Some(meta(ut, 0o644, 2_000)),
        host_meta: ht.map(|t| meta(t, 0o644, 500)),
        host,
        anchor: PathBuf::new(),
        anchor_ctime: 500,
        host_tree_ctime: None,
        same_content: None,
        copied_up: false,
    }
}

fn of(entries: &[Entry], touched: &BTreeMap<String, i64>) -> Vec<Change> {
    let since = Since {
        start_ns: START,
        touched,
        origins: false,
    };
    changes(entries, &since, &|rel, _| {
        rel.starts_with(".git").then(|| "git".to_owned())
    })
}

fn one(e: Entry) -> Option<Change> {
    of(&[e], &BTreeMap::new()).pop()
}

#[test]
fn each_kind_of_upper_entry_is_the_change_it_makes() {
    let c = one(entry("new.txt", Upper::File, Host::Missing)).unwrap();
    assert_eq!((c.what, c.kind, c.host_run.is_none()), (What::Added, "file", true));
    let c = one(entry("a.txt", Upper::File, Host::File)).unwrap();
    assert_eq!(c.what, What::Modified);
    let mut same = entry("a.txt", Upper::File, Host::File);
    same.same_content = Some(true);
    assert_eq!(one(same.clone()), None, "a copy-up with nothing changed is no change");
    same.upper_meta = Some(meta(Type::File, 0o755, 2_000));
    assert_eq!(one(same).unwrap().what, What::ModeChange);
    assert_eq!(
        one(entry("gone", Upper::Whiteout, Host::File)).unwrap().what,
        What::Deleted
    );
    assert_eq!(one(entry("gone", Upper::Whiteout, Host::Missing)), None);
    let c = one(entry("x", Upper::Link("y".into()), Host::File)).unwrap();
    assert_eq!((c.what, c.kind, c.was), (What::TypeChange, "link", "file"));
    assert_eq!(one(entry("d", Upper::Dir { opaque: false }, Host::Dir)), None);
    assert_eq!(
        one(entry("d", Upper::Dir { opaque: true }, Host::Missing))
            .unwrap()
            .what,
        What::Added
    );
    assert_eq!(
        one(entry(".git/config", Upper::File, Host::File))
            .unwrap()
            .host_run
            .as_deref(),
        Some("git")
    );
}

#[test]
fn what_is_never_made_on_the_host_is_refused() {
    for (upper, why) in [
        (Upper::Special("device"), "device node"),
        (Upper::Special("fifo"), "FIFO"),
        (Upper::Special("socket"), "socket"),
        (Upper::Foreign("a renamed folder"), "never hold"),
        (Upper::Link("/etc/passwd".into()), "outside the project"),
        (Upper::Link("../../outside".into()), "outside the project"),
    ] {
        let c = one(entry("sub/x", upper, Host::Missing)).unwrap();
        assert!(c.refused.as_deref().is_some_and(|r| r.contains(why)), "{c:?}");
    }
    for ok in ["y", "../y", "./a/../b", "z/w"] {
        assert!(
            one(entry("sub/x", Upper::Link(ok.into()), Host::Missing))
                .unwrap()
                .refused
                .is_none(),
            "{ok}"
        );
    }
    // Deleting the user's FIFO is a deletion, not a device made.
    assert!(one(entry("p", Upper::Whiteout, Host::Special("fifo")))
        .unwrap()
        .refused
        .is_none());
}

#[test]
fn links_stay_inside_only_when_they_never_climb_out() {
    assert!(link_stays_inside(Path::new("a/b/l"), Path::new("../../c")));
    assert!(!link_stays_inside(Path::new("a/b/l"), Path::new("../../../c")));
    assert!(!link_stays_inside(Path::new("l"), Path::new("x/../../y")));
    assert!(!link_stays_inside(Path::new("l"), Path::new("/abs")));
    assert!(!link_stays_inside(Path::new("l"), Path::new("")));
}

#[test]
fn a_path_the_user_changed_since_the_start_is_a_conflict() {
    let mut e = entry("a.txt", Upper::File, Host::File);
    assert!(one(e.clone()).unwrap().conflict.is_none(), "unchanged on the host");
    e.host_meta = Some(meta(Type::File, 0o644, START));
    assert!(one(e.clone()).unwrap().conflict.is_some(), "changed at the start");
    // The run's own earlier `apply` left that ctime: not the user's change.
    let touched = BTreeMap::from([("a.txt".to_owned(), START)]);
    assert!(of(std::slice::from_ref(&e), &touched)[0].conflict.is_none());
    // Missing now: the folder's change says whether the user removed it.
    let mut gone = entry("sub/new", Upper::File, Host::Missing);
    gone.anchor = "sub".into();
    assert!(one(gone.clone()).unwrap().conflict.is_none());
    gone.anchor_ctime = START + 5;
    let c = one(gone).unwrap();
    assert!(
        c.conflict.as_deref().is_some_and(|x| x.contains("its folder sub/")),
        "{c:?}"
    );
    // Where the layer records origins, a new entry is the sandbox's own,
    // and a copied-up one the user has since removed is a conflict.
    let mut fresh = entry("sub/new", Upper::File, Host::Missing);
    fresh.anchor = "sub".into();
    fresh.anchor_ctime = START + 5;
    let since = Since {
        start_ns: START,
        touched: &BTreeMap::new(),
        origins: true,
    };
    let ok = |e: &Entry| {
        changes(std::slice::from_ref(e), &since, &|_, _| None)[0]
            .conflict
            .clone()
    };
    assert_eq!(ok(&fresh), None);
    fresh.copied_up = true;
    assert!(ok(&fresh).is_some_and(|x| x.contains("deleted on the host")));
    // A folder the layer deletes, with something in it changed by the user.
    let mut tree = entry("dir", Upper::Whiteout, Host::Dir);
    tree.host_tree_ctime = Some(START + 1);
    assert!(one(tree).unwrap().conflict.is_some());
}
