//! Unit tests of the lease: placeholders and runs shared by concurrent sandboxes.

use super::*;

fn ph(path: PathBuf, dir: bool) -> Placeholder {
    Placeholder { path, dir }
}

#[test]
fn the_last_lease_out_removes_what_any_created() {
    let t = tempfile::tempdir().unwrap();
    let (state, wd) = (t.path().join("state"), t.path().join("wd"));
    std::fs::create_dir_all(wd.join(".git")).unwrap();
    let want = [ph(wd.join(".mcp.json"), false), ph(wd.join(".git/hooks"), true)];

    let mut a = Lease::acquire(&state, &wd).unwrap();
    assert_eq!(a.create(&want).unwrap().len(), 2);
    a.share().unwrap();
    // A second sandbox finds them and creates nothing, and can share.
    let b_file_lock = std::thread::scope(|s| {
        s.spawn(|| {
            let mut b = Lease::acquire(&state, &wd).unwrap();
            assert!(b.create(&want).unwrap().is_empty());
            b.share().unwrap();
            b
        })
        .join()
        .unwrap()
    });
    // The creator leaves first: the placeholders stay for the other.
    a.release();
    assert!(wd.join(".mcp.json").exists() && wd.join(".git/hooks").is_dir());
    b_file_lock.release();
    assert!(!wd.join(".mcp.json").exists() && !wd.join(".git/hooks").exists());
    assert!(wd.join(".git").is_dir());
    assert_eq!(std::fs::read_dir(&state).unwrap().count(), 0, "lock files left");
}

#[test]
fn a_filled_placeholder_and_the_users_files_are_kept() {
    let t = tempfile::tempdir().unwrap();
    let (state, wd) = (t.path().join("state"), t.path().join("wd"));
    std::fs::create_dir_all(&wd).unwrap();
    std::fs::write(wd.join(".bashrc"), "").unwrap();
    let want = [ph(wd.join(".bashrc"), false), ph(wd.join(".claude"), true)];
    let mut a = Lease::acquire(&state, &wd).unwrap();
    assert_eq!(a.create(&want).unwrap(), vec![want[1].clone()]);
    a.share().unwrap();
    std::fs::write(wd.join(".claude/settings.json"), "{}").unwrap();
    a.release();
    assert!(wd.join(".bashrc").exists(), "the user's empty file is not ours");
    assert!(wd.join(".claude/settings.json").exists());
}

#[test]
fn a_killed_sandboxs_placeholders_go_with_the_next() {
    let t = tempfile::tempdir().unwrap();
    let (state, wd) = (t.path().join("state"), t.path().join("wd"));
    std::fs::create_dir_all(&wd).unwrap();
    let want = [ph(wd.join(".mcp.json"), false)];
    let a = Lease::acquire(&state, &wd).unwrap();
    a.create(&want).unwrap();
    drop(a); // killed: no release
    let mut b = Lease::acquire(&state, &wd).unwrap();
    assert!(b.create(&want).unwrap().is_empty());
    b.share().unwrap();
    b.release();
    assert!(!wd.join(".mcp.json").exists());
}

/// Issue 23: during the run the sandbox moves `.git` aside and plants
/// `.git -> elsewhere`, and a link as `.mcp.json`; the way out (the last
/// lease, or the garbage collector after a kill) removes nothing there.
#[test]
fn links_planted_during_the_run_are_not_followed_on_the_way_out() {
    for killed in [false, true] {
        let t = tempfile::tempdir().unwrap();
        let (state, wd, victim) = (t.path().join("state"), t.path().join("wd"), t.path().join("victim"));
        std::fs::create_dir_all(wd.join(".git")).unwrap();
        std::fs::create_dir_all(victim.join("hooks")).unwrap();
        std::fs::write(victim.join("empty"), "").unwrap();
        let want = [ph(wd.join(".git/hooks"), true), ph(wd.join(".mcp.json"), false)];
        let mut a = Lease::acquire(&state, &wd).unwrap();
        assert_eq!(a.create(&want).unwrap().len(), 2);
        a.share().unwrap();
        std::fs::rename(wd.join(".git"), wd.join(".git-x")).unwrap();
        std::os::unix::fs::symlink(&victim, wd.join(".git")).unwrap();
        std::fs::remove_file(wd.join(".mcp.json")).unwrap();
        std::os::unix::fs::symlink(victim.join("empty"), wd.join(".mcp.json")).unwrap();
        if killed {
            drop(a);
            assert!(collect(&state, &key(&wd)).unwrap());
        } else {
            a.release();
        }
        assert!(
            victim.join("hooks").is_dir(),
            "removed through the planted .git (killed: {killed})"
        );
        assert!(victim.join("empty").is_file());
        // The link itself is the sandbox's leftover in the working directory.
        assert!(wd.join(".mcp.json").is_symlink());
    }
}

/// Issue 35 item 4: a run alone moves what it made; runs that shared
/// the directory leave theirs pending, and the last one out gets it all.
#[test]
fn runs_that_shared_the_directory_leave_their_entries_to_the_last() {
    let t = tempfile::tempdir().unwrap();
    let (state, wd) = (t.path().join("state"), t.path().join("wd"));
    std::fs::create_dir_all(&wd).unwrap();

    let mut a = Lease::acquire(&state, &wd).unwrap();
    a.register("a").unwrap();
    a.share().unwrap();
    assert_eq!(a.leave().unwrap(), Neighbours::alone());
    a.release();

    let mut a = Lease::acquire(&state, &wd).unwrap();
    a.register("a").unwrap();
    a.share().unwrap();
    let mut b = std::thread::scope(|s| {
        s.spawn(|| {
            let mut b = Lease::acquire(&state, &wd).unwrap();
            b.register("b").unwrap();
            b.share().unwrap();
            b
        })
        .join()
        .unwrap()
    });
    let left = a.leave().unwrap();
    assert_eq!((left.shared, left.last), (true, false));
    a.defer(&[wd.join("x/.envrc")]).unwrap();
    a.release();
    let left = b.leave().unwrap();
    assert_eq!((left.shared, left.last), (true, true));
    assert_eq!(left.pending, [wd.join("x/.envrc")]);
    b.release();
    assert_eq!(std::fs::read_dir(&state).unwrap().count(), 0, "lease files left");
}

/// A killed run's record does not make the next run think it shares.
#[test]
fn a_dead_runs_record_is_not_a_neighbour() {
    let t = tempfile::tempdir().unwrap();
    let (state, wd) = (t.path().join("state"), t.path().join("wd"));
    std::fs::create_dir_all(&wd).unwrap();
    let mut a = Lease::acquire(&state, &wd).unwrap();
    a.register("a").unwrap();
    let mut runs = a.runs().unwrap();
    runs.runs[0].start += 1;
    a.store_runs(&runs).unwrap();
    drop(a); // killed
    let mut b = Lease::acquire(&state, &wd).unwrap();
    b.register("b").unwrap();
    b.share().unwrap();
    assert_eq!(b.leave().unwrap(), Neighbours::alone());
    b.release();
}
