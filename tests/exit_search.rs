//! Issue 35 item 2, end to end: the exit search cannot be blinded. From
//! inside `sandbox`, a run plants what the host would run, then tries to
//! hide it: a repository in a folder it makes unreadable (`chmod 000`), a
//! flood of `.envrc` files past the old cap of 1000, entries 12 levels down
//! and in `node_modules` and `target` (which the old search skipped), a
//! full filesystem under the quarantine, a folder it cannot be moved out
//! of. Then the host's real tools run (git with the planted fsmonitor, sh
//! for each `.envrc`): no marker may appear, and what could not be handled
//! is named with a non-zero status.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use claude_shim_e2e::claude_world::{text, World};
use claude_shim_e2e::*;

/// A project of `owner`'s and a place for markers nothing inside can reach.
struct Case {
    w: World,
    markers: PathBuf,
}

impl Case {
    fn new(owner: Option<(u32, u32)>) -> Case {
        let w = World::new(owner);
        let markers = w.dir.path().join("markers");
        std::fs::create_dir(&markers).unwrap();
        std::fs::set_permissions(&markers, std::fs::Permissions::from_mode(0o777)).unwrap();
        Case { w, markers }
    }

    /// `claude-shim sandbox --policy offline -- sh -c SCRIPT` in the project
    /// as its owner, with `env` added.
    fn sandbox(&self, script: &str, env: &[(&str, &Path)]) -> Output {
        let mut c = command_as(self.w.owner, &shim_path());
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.w.home)
            .current_dir(&self.w.proj);
        if self.w.owner.is_some() {
            c.env("XDG_RUNTIME_DIR", &self.w.root);
        }
        for (k, v) in env {
            c.env(k, v);
        }
        c.arg("--root").arg(&self.w.root);
        c.args(["sandbox", "--policy", "offline", "--", "sh", "-c", script]);
        output_of(c, self.w.dir.path())
    }

    /// A host tool, unsandboxed, as the project's owner, in `dir`.
    fn host(&self, dir: &Path, program: &str, args: &[&str]) -> Output {
        let path = PathBuf::from(
            text(
                &Command::new("sh")
                    .args(["-c", &format!("command -v {program}")])
                    .output()
                    .unwrap()
                    .stdout,
            )
            .trim(),
        );
        let mut c = command_as(self.w.owner, &path);
        c.args(args).current_dir(dir).env("HOME", &self.w.home);
        output_of(c, self.w.dir.path())
    }

    fn markers_left(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.markers)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// Every `.envrc` under the project, run by sh as direnv would, and
    /// `git status` in each of `repos`.
    fn host_tools(&self, repos: &[&str]) {
        let mut stack = vec![self.w.proj.clone()];
        while let Some(d) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else { continue };
            for e in rd.flatten() {
                let p = e.path();
                if e.file_type().unwrap().is_dir() {
                    stack.push(p);
                } else if e.file_name() == ".envrc" {
                    self.host(&d, "sh", &[".envrc"]);
                }
            }
        }
        for r in repos {
            let dir = self.w.proj.join(r);
            if dir.is_dir() {
                let out = self.host(&dir, "git", &["status", "--short"]);
                eprintln!("host git status in {r}: {}", out.status);
            }
        }
    }
}

fn report(out: &Output) -> String {
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("claude-shim")).collect();
    eprintln!(
        "status {}; {} report lines, first and last:\n{}\n...\n{}",
        out.status,
        lines.len(),
        lines.iter().take(4).copied().collect::<Vec<_>>().join("\n"),
        lines.iter().rev().take(4).rev().copied().collect::<Vec<_>>().join("\n")
    );
    stderr
}

fn blinding_tricks(owner: Option<(u32, u32)>) {
    let c = Case::new(owner);
    let m = c.markers.display();
    let deep = "a/b/c/d/e/f/g/h/i/j/k/l";
    let script = format!(
        r#"set -e
mkdir -p locked/sub && git init -q locked/sub
git -C locked/sub config core.fsmonitor 'touch {m}/fsmonitor; false'
chmod 000 locked
i=0; while [ $i -lt 1100 ]; do mkdir -p flood/$i; echo 'touch {m}/envrc' > flood/$i/.envrc; i=$((i+1)); done
mkdir -p {deep} && echo 'touch {m}/deep' > {deep}/.envrc
mkdir -p node_modules/p && git init -q node_modules/p
git -C node_modules/p config core.fsmonitor 'touch {m}/node_modules; false'
mkdir -p target/debug && echo 'touch {m}/target' > target/debug/.envrc
echo PLANTED"#
    );
    let out = c.sandbox(&script, &[]);
    assert!(text(&out.stdout).contains("PLANTED"), "{}", text(&out.stderr));
    let stderr = report(&out);
    assert!(out.status.success(), "{stderr}");
    let proj = c.w.proj.display();
    for rel in [
        "locked/sub/.git/config".to_owned(),
        "flood/0/.envrc".to_owned(),
        "flood/1099/.envrc".to_owned(),
        format!("{deep}/.envrc"),
        "node_modules/p/.git/config".to_owned(),
        "target/debug/.envrc".to_owned(),
    ] {
        assert!(
            stderr.contains(&format!("claude-shim:   {proj}/{rel} (")),
            "{rel} is not reported: {stderr}"
        );
        assert!(
            std::fs::symlink_metadata(c.w.proj.join(&rel)).is_err(),
            "{rel} is still there"
        );
    }
    c.host_tools(&["locked/sub", "node_modules/p"]);
    assert_eq!(c.markers_left(), Vec::<String>::new(), "planted code ran on the host");
    eprintln!("host sh on every .envrc and git status in locked/sub and node_modules/p: no marker");
}

#[test]
fn blinding_tricks_are_seen_through_as_root() {
    blinding_tricks(None);
}

#[test]
fn blinding_tricks_are_seen_through_rootless() {
    blinding_tricks(Some(test_user()));
}

/// A folder the run's user can no longer write (root closed it while the
/// run went on, as a shared folder is): the entry in it can be neither
/// moved aside nor renamed, so the run fails and names it.
#[test]
fn an_entry_that_cannot_be_moved_fails_the_run_with_its_name() {
    let c = Case::new(Some(test_user()));
    let shared = c.w.proj.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let script = format!(
        "echo 'touch {}/shared' > shared/.envrc && touch planted && while [ ! -e go ]; do sleep 0.05; done",
        c.markers.display()
    );
    let proj = c.w.proj.clone();
    let closer = std::thread::spawn(move || {
        wait_for_file(&proj.join("planted"));
        let shared = proj.join("shared");
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o555)).unwrap();
        std::fs::write(proj.join("go"), "").unwrap();
    });
    let out = c.sandbox(&script, &[]);
    closer.join().unwrap();
    let stderr = report(&out);
    assert!(!out.status.success(), "{stderr}");
    let want = format!(
        "claude-shim: error: left in place {}/shared/.envrc (",
        c.w.proj.display()
    );
    assert!(stderr.contains(&want), "{stderr}");
    assert!(stderr.contains("claude-shim: error: failed to clear"), "{stderr}");
    // Opened again, it goes with the next run's quarantine; here only the
    // name and the status are the point.
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
}

/// A tmpfs of the test's own, unmounted on the way out.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: PathBuf, size: &str) -> Tmpfs {
        std::fs::create_dir_all(&at).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0755"), "tmpfs"])
            .arg(&at)
            .status()
            .unwrap();
        assert!(ok.success(), "mount a tmpfs at {}", at.display());
        Tmpfs(at)
    }

    /// Writes zeros until the filesystem is full.
    fn fill(&self) {
        let _ = Command::new("dd")
            .args(["if=/dev/zero", "bs=64k"])
            .arg(format!("of={}", self.0.join("fill").display()))
            .output();
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// The filesystem holding the quarantine full: the run fills the one it
/// shares with the project (a rename needs no room), or the quarantine has
/// one of its own that is full from the start (a copy across filesystems
/// then fails, and the entry is renamed in place). Either way nothing is
/// left under a name the host runs.
#[test]
fn a_full_filesystem_under_the_quarantine_leaves_nothing_in_place() {
    require_root();
    let c = Case::new(None);
    let m = c.markers.display();

    // The project and the state on one small filesystem the run fills.
    let small = Tmpfs::mount(c.w.dir.path().join("small"), "4m");
    let proj = small.0.join("proj");
    std::fs::create_dir_all(proj.join(".git")).unwrap();
    let state = small.0.join("state");
    std::fs::create_dir(&state).unwrap();
    let script = format!(
        "echo 'touch {m}/same' > sub.envrc && mkdir sub && mv sub.envrc sub/.envrc && dd if=/dev/zero of=fill bs=64k 2>/dev/null; echo FILLED"
    );
    let mut cmd = Command::new(shim_path());
    cmd.env("XDG_STATE_HOME", &state).current_dir(&proj);
    cmd.arg("--root").arg(&c.w.root);
    cmd.args(["sandbox", "--policy", "offline", "--", "sh", "-c", &script]);
    let out = output_of(cmd, c.w.dir.path());
    let stderr = report(&out);
    assert!(text(&out.stdout).contains("FILLED"), "{stderr}");
    assert!(out.status.success(), "{stderr}");
    assert!(!proj.join("sub/.envrc").exists(), "{stderr}");
    assert!(
        stderr.contains(&format!("claude-shim:   {}/sub/.envrc (", proj.display())),
        "{stderr}"
    );

    // The quarantine on a filesystem of its own, full before the run.
    let full = Tmpfs::mount(c.w.dir.path().join("full"), "256k");
    full.fill();
    let script = format!("mkdir -p sub && echo 'touch {m}/across' > sub/.envrc");
    let mut cmd = Command::new(shim_path());
    cmd.env("XDG_STATE_HOME", &full.0).current_dir(&c.w.proj);
    cmd.arg("--root").arg(&c.w.root);
    cmd.args(["sandbox", "--policy", "offline", "--", "sh", "-c", &script]);
    let out = output_of(cmd, c.w.dir.path());
    let stderr = report(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(!c.w.proj.join("sub/.envrc").exists(), "{stderr}");
    assert!(stderr.contains("renamed in place"), "{stderr}");

    c.host_tools(&[]);
    for d in [&proj, &c.w.proj] {
        let out = c.host(d, "sh", &["-c", "for f in $(find . -name .envrc); do sh $f; done"]);
        assert!(out.status.success());
    }
    assert_eq!(c.markers_left(), Vec::<String>::new(), "planted code ran on the host");
    eprintln!("a full filesystem under the quarantine: every planted .envrc moved or renamed; host sh: no marker");
}

/// Issue 35 item 4: 30 sandboxes at once in one project, each making
/// host-run entries of its own and checking, before it exits, that they are
/// still there. None fails to start, nothing of a live run moves, and once
/// all are gone nothing planted is left and each entry was named once.
/// Which run made an entry cannot be told without tracking: runs that
/// shared the project leave theirs to the last one out, which names them.
#[test]
fn thirty_sandboxes_in_one_project_never_take_a_live_neighbours_entries() {
    let c = Case::new(None);
    let runs: Vec<_> = (0..30)
        .map(|i| {
            let script = format!(
                "set -e; mkdir -p r{i}/.claude; echo '{{}}' > r{i}/.claude/settings.json; echo x > r{i}/.envrc; \
                 sleep 1; for f in r{i}/.claude/settings.json r{i}/.envrc; do test -e $f || echo STOLEN $f; done"
            );
            let mut cmd = Command::new(shim_path());
            cmd.current_dir(&c.w.proj).env("HOME", &c.w.home);
            cmd.arg("--root").arg(&c.w.root);
            cmd.args(["sandbox", "--policy", "offline", "--", "sh", "-c", &script]);
            let scratch = c.w.dir.path().to_path_buf();
            std::thread::spawn(move || output_of(cmd, &scratch))
        })
        .collect();
    let outs: Vec<Output> = runs.into_iter().map(|t| t.join().unwrap()).collect();
    let mut named = std::collections::BTreeMap::<String, usize>::new();
    let mut reporters = 0;
    for (i, out) in outs.iter().enumerate() {
        let (so, se) = (text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "run {i} failed: {se}");
        assert!(!so.contains("STOLEN"), "run {i} lost a live entry: {so}");
        let mine: Vec<&str> = se.lines().filter(|l| l.starts_with("claude-shim:   ")).collect();
        if !mine.is_empty() {
            reporters += 1;
        }
        for l in mine {
            *named.entry(l.to_owned()).or_default() += 1;
        }
    }
    eprintln!(
        "30 runs: all started and exited 0, none lost a live entry; {} runs named {} entries",
        reporters,
        named.len()
    );
    assert_eq!(named.len(), 60, "{named:?}");
    assert!(named.values().all(|n| *n == 1), "{named:?}");
    for i in 0..30 {
        for rel in [format!("r{i}/.claude"), format!("r{i}/.envrc")] {
            assert!(!c.w.proj.join(&rel).exists(), "{rel} was left");
        }
    }
}
