//! Links planted at every step of every operation: as the file, as a parent
//! directory, as the name a write goes through. Nothing outside changes.

use super::*;
use std::os::unix::fs::symlink;

struct T {
    _t: tempfile::TempDir,
    /// The sandbox-writable directory the handle is on.
    inside: PathBuf,
    /// The host's files a planted link points at.
    outside: PathBuf,
}

fn t() -> T {
    let t = tempfile::tempdir().unwrap();
    let (inside, outside) = (t.path().join("inside"), t.path().join("outside"));
    std::fs::create_dir_all(outside.join("hooks")).unwrap();
    std::fs::create_dir(&inside).unwrap();
    std::fs::write(outside.join("bashrc"), "host\n").unwrap();
    std::fs::write(outside.join(".credentials.json"), "{\"secret\":1}").unwrap();
    T { _t: t, inside, outside }
}

impl T {
    fn dir(&self) -> Dir {
        Dir::open(&self.inside).unwrap()
    }

    /// The host's side, to compare before and after.
    fn outside(&self) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out = Vec::new();
        let mut stack = vec![self.outside.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if e.file_type().unwrap().is_dir() {
                    out.push((p.clone(), b"dir".to_vec()));
                    stack.push(p);
                } else {
                    out.push((p.clone(), std::fs::read(&p).unwrap()));
                }
            }
        }
        out.sort();
        out
    }

    fn link(&self, target: &str, name: &str) {
        let p = self.inside.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        symlink(self.outside.join(target), p).unwrap();
    }
}

fn p(s: &str) -> &Path {
    Path::new(s)
}

#[test]
fn a_link_as_a_parent_directory_is_never_followed() {
    let t = t();
    t.link("", "g");
    let before = t.outside();
    let d = t.dir();
    let errs = [
        d.create_dir(p("g/new"), 0o755).unwrap_err(),
        d.create_dir_all(p("g/a/b"), 0o755).err().unwrap(),
        d.create_new(p("g/file"), 0o644).unwrap_err(),
        d.write_new(p("g/file"), b"x", 0o644).unwrap_err(),
        d.replace(p("g/bashrc"), b"planted", 0o644).unwrap_err(),
        d.read(p("g/bashrc"), 1024).unwrap_err(),
        d.stat(p("g/bashrc")).unwrap_err(),
        d.remove_dir(p("g/hooks")).unwrap_err(),
        d.remove_file(p("g/bashrc")).unwrap_err(),
        d.remove_all(p("g/hooks")).unwrap_err(),
        d.list(p("g")).unwrap_err(),
        d.sub(p("g")).err().unwrap(),
        d.replace_symlink(p("g/x"), p("/")).unwrap_err(),
    ];
    for e in &errs {
        assert!(e.is_link(), "{e}");
    }
    assert_eq!(t.outside(), before, "something outside changed");
    assert_eq!(
        errs[0].to_string(),
        format!(
            "create {}: a symbolic link is in the way (claude-shim follows none where a sandbox can write)",
            t.inside.join("g/new").display()
        )
    );
}

#[test]
fn a_link_as_the_file_is_replaced_or_refused_never_written_through() {
    let t = t();
    t.link("bashrc", ".claude.json");
    t.link("bashrc", "new");
    t.link(".credentials.json", "state.json");
    let before = t.outside();
    let d = t.dir();
    // Read: refused, the credentials never read.
    let e = d.read(p("state.json"), 1 << 20).unwrap_err();
    assert!(e.is_link(), "{e}");
    assert!(d.open_file(p("state.json")).unwrap_err().is_link());
    // A new file: O_EXCL refuses the link.
    assert!(d.create_new(p("new"), 0o644).unwrap_err().is_exists());
    // Replace: the link itself is replaced by a file.
    d.replace(p(".claude.json"), b"{}", 0o600).unwrap();
    assert_eq!(std::fs::read(t.inside.join(".claude.json")).unwrap(), b"{}");
    assert!(!t.inside.join(".claude.json").is_symlink());
    // Removal unlinks the link, not its target.
    d.remove_file(p("new")).unwrap();
    assert_eq!(t.outside(), before, "something outside changed");
    assert_eq!(d.stat(p("state.json")).unwrap().unwrap().kind, Kind::Link);
    assert!(d.sub(p("state.json")).err().unwrap().is_link());
}

#[test]
fn a_link_at_the_old_temp_name_or_any_name_is_not_the_temp_file() {
    let t = t();
    t.link("bashrc", ".claude.json.claude-shim.tmp");
    let before = t.outside();
    let d = t.dir();
    d.replace(p(".claude.json"), b"{\"a\":1}", 0o600).unwrap();
    d.replace(p(".claude.json"), b"{\"a\":2}", 0o600).unwrap();
    assert_eq!(d.read(p(".claude.json"), 100).unwrap(), b"{\"a\":2}");
    assert_eq!(t.outside(), before);
    // Only the file and the planted link: no temp file left.
    let names: Vec<_> = d.list(p("")).unwrap().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, [".claude.json", ".claude.json.claude-shim.tmp"]);
}

#[test]
fn remove_all_removes_links_and_keeps_their_targets() {
    let t = t();
    std::fs::create_dir_all(t.inside.join("tree/sub")).unwrap();
    std::fs::write(t.inside.join("tree/sub/f"), "x").unwrap();
    t.link("", "tree/sub/to-outside");
    t.link("hooks", "tree/hooks");
    let before = t.outside();
    t.dir().remove_all(p("tree")).unwrap();
    assert!(!t.inside.join("tree").exists());
    assert_eq!(t.outside(), before);
}

#[test]
fn reads_only_regular_files_within_the_bound() {
    let t = t();
    let d = t.dir();
    d.write_new(p("f"), b"12345", 0o644).unwrap();
    assert_eq!(d.read(p("f"), 5).unwrap(), b"12345");
    let e = d.read(p("f"), 4).unwrap_err().to_string();
    assert!(e.contains("larger than"), "{e}");
    nix::unistd::mkfifo(&t.inside.join("fifo"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let e = d.read(p("fifo"), 10).unwrap_err().to_string();
    assert!(e.ends_with("it is not a regular file"), "{e}");
    assert!(d.read(p("."), 10).is_err());
    let e = d.read(p("../outside/bashrc"), 100).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
    assert!(d.read(p("/etc/passwd"), 1 << 20).is_err());
    assert!(d.read(p("missing"), 10).unwrap_err().is_not_found());
}

#[test]
fn stat_list_and_the_directory_operations() {
    let t = t();
    let d = t.dir();
    assert!(d.stat(p("x")).unwrap().is_none());
    // The directory itself.
    assert_eq!(d.stat(p("")).unwrap().map(|s| s.kind), Some(Kind::Dir));
    let sub = d.create_dir_all(p("a/b"), 0o700).unwrap();
    assert_eq!(sub.path(), t.inside.join("a/b"));
    sub.write_new(p("f"), b"x", 0o600).unwrap();
    let st = d.stat(p("a/b/f")).unwrap().unwrap();
    assert_eq!((st.kind, st.len, st.nlink, st.mode), (Kind::File, 1, 1, 0o600));
    assert_eq!(d.stat(p("a")).unwrap().unwrap().kind, Kind::Dir);
    t.link("", "a/l");
    assert_eq!(
        d.list(p("a")).unwrap(),
        [(OsString::from("b"), Kind::Dir), (OsString::from("l"), Kind::Link)]
    );
    assert!(d.create_dir(p("a"), 0o755).unwrap_err().is_exists());
    assert!(d.remove_dir(p("a/b")).is_err(), "not empty");
    d.remove_file(p("a/b/f")).unwrap();
    d.remove_dir(p("a/b")).unwrap();
    assert_eq!(
        d.sub(p("a/l")).err().unwrap().to_string(),
        format!(
            "open {}: a symbolic link is in the way (claude-shim follows none where a sandbox can write)",
            t.inside.join("a/l").display()
        )
    );
    d.write_new(p("file"), b"", 0o644).unwrap();
    assert_eq!(d.sub(p("file")).err().unwrap().kind(), io::ErrorKind::NotADirectory);
}

#[test]
fn links_are_replaced_atomically_and_read_without_following() {
    let t = t();
    let d = t.dir();
    assert_eq!(d.read_link(p("entry")).unwrap(), None);
    d.replace_symlink(p("entry"), p("/usr/bin/one")).unwrap();
    d.replace_symlink(p("entry"), p("/usr/bin/two")).unwrap();
    assert_eq!(d.read_link(p("entry")).unwrap(), Some(PathBuf::from("/usr/bin/two")));
    d.write_new(p("file"), b"", 0o644).unwrap();
    assert_eq!(d.read_link(p("file")).unwrap(), None);
    assert_eq!(d.list(p("")).unwrap().len(), 2, "no temp name left");
}

#[test]
fn moves_between_handles_without_replacing() {
    let t = t();
    let (d, q) = (t.dir(), Dir::create_beneath(&t.inside, p("q/1"), 0o700).unwrap());
    d.create_dir_all(p("sub/.claude"), 0o755).unwrap();
    d.write_new(p("sub/.claude/settings.json"), b"{}", 0o644).unwrap();
    d.rename_to(p("sub/.claude"), &q, p("0")).unwrap();
    assert_eq!(q.read(p("0/settings.json"), 10).unwrap(), b"{}");
    d.create_dir(p("sub/.claude"), 0o755).unwrap();
    assert!(d.rename_to(p("sub/.claude"), &q, p("0")).unwrap_err().is_exists());
    t.link("", "sub/l");
    let before = t.outside();
    assert!(d.rename_to(p("sub/l/hooks"), &q, p("1")).unwrap_err().is_link());
    assert!(q.rename_to(p("0"), &d, p("sub/l/moved")).unwrap_err().is_link());
    assert_eq!(t.outside(), before);
}

#[test]
fn the_anchor_itself_is_trusted_and_below_it_nothing_is() {
    let t = t();
    // A link the caller names is followed: the user's ~/.claude may be one.
    let named = t.inside.join("named");
    symlink(&t.outside, &named).unwrap();
    let d = Dir::open(&named).unwrap();
    assert_eq!(d.read(p("bashrc"), 100).unwrap(), b"host\n");
    // Created below an anchor: no link on the way.
    t.link("", "state");
    let e = Dir::create_beneath(&t.inside, p("state/claude-shim/claude"), 0o700)
        .err()
        .unwrap();
    assert!(e.is_link(), "{e}");
    assert!(!t.outside.join("claude-shim").exists());
}
