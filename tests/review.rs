//! Issue 34, review before apply, end to end: `sandbox --review` and
//! `claude --review` (the real `claude` CLI against the mock API), as root,
//! as the unprivileged test user and as root in the user's project. The
//! agent makes plain edits and a commit, then plants every vector the live
//! mode's tests use and one of each class of the issue (review/plant.rs).
//! While it waits and after it ends, the host's real tools run (git status
//! and commit, a virtualenv's python made before the run, `claude -p`,
//! `bash -i`) and no marker appears; the tree is unchanged byte for byte
//! until `apply`; `changes --json` lists the plain edits unflagged and every
//! vector flagged; `apply` brings exactly the plain edits, after which the
//! host's tools still run nothing planted; the agent's commit is the branch
//! `claude-shim/RUN` and HEAD has not moved. Conflicts (a host edit during
//! the run, two parallel runs) and a hostile layer: review/conflicts.rs.

#[path = "review/case.rs"]
mod case;
#[path = "review/conflicts.rs"]
mod conflicts;
#[path = "review/plant.rs"]
mod plant;
#[path = "review/session.rs"]
mod session;

use std::path::{Path, PathBuf};
use std::time::Duration;

use claude_shim_e2e::claude_world::{tail, text};
use claude_shim_e2e::mock_api::MockApi;

use case::{finish, outputs, Case, Mode, Who};

/// The run's name, from the line at exit.
pub fn kept_as(stderr: &str) -> String {
    let line = stderr
        .lines()
        .find(|l| l.contains(" kept for review as "))
        .unwrap_or_else(|| panic!("no line saying what was kept: {stderr}"));
    assert!(
        line.starts_with("claude-shim: ") && line.ends_with(" (claude-shim changes; claude-shim apply)"),
        "{line}"
    );
    eprintln!("exit line: {line}");
    line.split(" kept for review as ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_owned()
}

pub fn json_changes(c: &Case, run: &str) -> Vec<serde_json::Value> {
    let out = c.shim(&["changes", run, "--json"]);
    assert!(out.status.success(), "changes --json: {}", text(&out.stderr));
    serde_json::from_slice::<serde_json::Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

pub fn path_of(v: &serde_json::Value) -> &str {
    v["path"].as_str().unwrap()
}

fn review(mode: Mode, who: Who) {
    let c = Case::new(who);
    c.repository();
    let script = c.w.dir.path().join("plant.sh");
    std::fs::write(&script, plant::script(&c.markers)).unwrap();
    let before = c.digest(true);
    let head = text(&c.git(&c.w.proj, &["rev-parse", "HEAD"]).stdout).trim().to_owned();
    let mock = MockApi::start(&[&format!("sh {}", script.display())]);
    // A host edit in the 50 ms before a run counts as made during it.
    std::thread::sleep(Duration::from_millis(100));
    let mut child = c.start(mode, &script, &mock);

    // While the agent waits: the tree is the user's, byte for byte, and the
    // host's tools run nothing of what it planted.
    let runs = c.wait_planted(1, &mut [&mut child]);
    assert_eq!(
        c.digest(true),
        before,
        "{mode:?} {who:?}: the tree changed during the run"
    );
    c.host_tools("during the run");
    assert_eq!(
        c.markers_left(),
        Vec::<String>::new(),
        "planted code ran during the run"
    );
    let during = c.digest(true);
    c.release();
    let status = finish(&mut child, Duration::from_secs(180));
    let (stdout, stderr) = outputs(c.w.dir.path());
    assert!(
        status.success(),
        "{mode:?} {who:?}: {status:?}\n{}\n{}",
        tail(stdout.as_bytes()),
        tail(stderr.as_bytes())
    );
    let said = match mode {
        Mode::Sandbox => stdout.clone(),
        Mode::Claude => mock.tool_results().join("\n"),
    };
    assert!(said.contains("secret_bytes=0"), "the .env read as empty: {said}");
    assert!(said.contains("commit=ok") && said.contains("plain=ok"), "{said}");
    let failed: Vec<&str> = said.lines().filter(|l| l.ends_with("=FAILED")).collect();
    assert!(
        failed.is_empty(),
        "vectors the agent could not plant in its layer: {failed:?}\n{said}"
    );
    let run = kept_as(&stderr);
    assert_eq!(runs[0].file_name().unwrap().to_str().unwrap(), run);

    // After the run, before apply: still the user's tree.
    assert_eq!(c.digest(true), during, "the run wrote the tree at its end");
    c.host_tools("after the run");
    assert_eq!(c.markers_left(), Vec::<String>::new(), "planted code ran after the run");
    let user_head = text(&c.git(&c.w.proj, &["rev-parse", "HEAD"]).stdout).trim().to_owned();
    assert_ne!(user_head, head, "the host's own commits landed");

    // What changed, each vector flagged, the plain edits not.
    let changes = json_changes(&c, &run);
    let flagged = |p: &str| {
        changes
            .iter()
            .find(|v| path_of(v) == p || (p == "evil.pth" && path_of(v).ends_with("/evil.pth")))
            .unwrap_or_else(|| panic!("{p} is not among the changes"))["host_run"]
            .as_bool()
            .unwrap()
    };
    for (name, p) in plant::VECTORS {
        assert!(flagged(p), "{name}: {p} is not flagged");
    }
    for p in plant::PLAIN {
        assert!(!flagged(p), "the plain edit {p} is flagged");
    }
    let unflagged: Vec<&serde_json::Value> = changes.iter().filter(|v| !v["host_run"].as_bool().unwrap()).collect();
    for v in &unflagged {
        let p = path_of(v);
        let plain = plant::PLAIN
            .iter()
            .any(|x| *x == p || p == "src" || p.starts_with("flood") || p == "blind");
        assert!(plain || v["kind"] == "dir", "unflagged and not a plain edit: {v}");
    }
    eprintln!(
        "{mode:?} {who:?}: changes --json: {} changes, {} flagged, every vector among them",
        changes.len(),
        changes.len() - unflagged.len()
    );
    let human = c.shim(&["changes", &run, "--diff"]);
    let human = text(&human.stdout);
    assert!(
        human.contains("+agent") && human.contains("the agent's commit"),
        "{human}"
    );

    // apply: exactly the plain edits (and the folders the agent made).
    let applied = c.shim(&["apply", &run]);
    eprintln!("apply:\n{}{}", text(&applied.stdout), text(&applied.stderr));
    assert!(applied.status.success(), "apply: {}", text(&applied.stderr));
    let after = c.digest(false);
    let mut want = c.digest_before_without_git(&before);
    assert_eq!(
        std::fs::read_to_string(c.w.proj.join("tracked")).unwrap(),
        "one\nagent\n"
    );
    want.insert("tracked".into(), after[Path::new("tracked")].clone());
    for (rel, v) in &after {
        let r = rel.to_str().unwrap();
        let expected = plant::PLAIN.contains(&r) || r.starts_with("flood") || ["src", "blind"].contains(&r);
        if want.get(rel) != Some(v) {
            assert!(
                expected || unflagged.iter().any(|u| path_of(u) == r && u["kind"] == "dir"),
                "apply brought {r}, which is no plain edit: {v}"
            );
        }
    }
    assert!(!c.w.proj.join("old.txt").exists(), "the deletion was not applied");
    assert_eq!(
        std::fs::read_link(c.w.proj.join("link")).unwrap(),
        PathBuf::from("src/new.rs")
    );
    for (name, p) in plant::VECTORS {
        if p.starts_with(".git/") || *p == "evil.pth" {
            continue;
        }
        let host = c.w.proj.join(p);
        assert_eq!(
            before.get(Path::new(p)),
            c.digest(true).get(Path::new(p)),
            "{name}: apply brought {}",
            host.display()
        );
    }
    c.host_tools("after apply");
    assert_eq!(c.markers_left(), Vec::<String>::new(), "planted code ran after apply");

    // The agent's commit is a branch; HEAD, index and config are the user's.
    let branch = format!("claude-shim/{run}");
    let log = c.git(&c.w.proj, &["log", "-1", "--format=%s", &branch]);
    assert_eq!(text(&log.stdout).trim(), "agent work", "{}", text(&log.stderr));
    let now_head = text(&c.git(&c.w.proj, &["rev-parse", "HEAD"]).stdout).trim().to_owned();
    let host_commits = text(&c.git(&c.w.proj, &["log", "--format=%s", "HEAD"]).stdout);
    assert!(
        !host_commits.contains("agent work"),
        "HEAD moved onto the agent's commit"
    );
    eprintln!("{mode:?} {who:?}: {branch} holds \"agent work\"; HEAD {now_head} is the user's");

    // Named, a flagged path is applied and said so: the vector was real.
    let named = c.shim(&["apply", &run, ".bashrc"]);
    assert!(
        text(&named.stdout).contains("flagged, applied because it was named"),
        "{}",
        text(&named.stdout)
    );
    c.host_tools("after applying .bashrc by name");
    assert_eq!(c.markers_left(), ["bashrc"], "the named vector is real and ran");
}

impl Case {
    /// The digest taken before the run, without `.git` folders.
    fn digest_before_without_git(
        &self,
        before: &std::collections::BTreeMap<PathBuf, String>,
    ) -> std::collections::BTreeMap<PathBuf, String> {
        before
            .iter()
            .filter(|(p, _)| !p.iter().any(|c| c == ".git"))
            .map(|(p, v)| (p.clone(), v.clone()))
            .collect()
    }
}

#[test]
fn sandbox_review_as_root() {
    review(Mode::Sandbox, Who::Root);
}

#[test]
fn sandbox_review_rootless() {
    review(Mode::Sandbox, Who::User);
}

#[test]
fn sandbox_review_as_root_in_a_users_project() {
    review(Mode::Sandbox, Who::RootInUsers);
}

#[test]
fn claude_review_as_root() {
    review(Mode::Claude, Who::Root);
}

#[test]
fn claude_review_rootless() {
    review(Mode::Claude, Who::User);
}

#[test]
fn claude_review_as_root_in_a_users_project() {
    review(Mode::Claude, Who::RootInUsers);
}
