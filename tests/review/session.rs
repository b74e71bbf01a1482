//! One `claude-shim claude --review` session as a user has it, printed
//! verbatim (the closing note of issue 34 quotes it): the real `claude` CLI
//! against the mock edits a file, adds one, plants a hook and commits; the
//! session's last line, `changes --diff`, `apply`, `git branch` and
//! `git log claude-shim/RUN`.

use std::path::Path;

use claude_shim_e2e::claude_world::{tail, text};
use claude_shim_e2e::mock_api::MockApi;

use super::case::{Case, Who};
use super::kept_as;

#[test]
fn a_claude_review_session_shows_its_diff_applies_and_brings_its_commit_as_a_branch() {
    let c = Case::new(Who::Root);
    c.sh(
        &c.w.proj,
        "git init -q . && printf 'def add(a, b):\\n    return a - b\\n' > calc.py && git add calc.py && git commit -q -m 'calc: add'",
    );
    std::thread::sleep(std::time::Duration::from_millis(100));
    // One plain command for Claude Code's permission check: `sh PATH`.
    let script = c.w.dir.path().join("edit.sh");
    std::fs::write(
        &script,
        format!(
            "set -e\nsed -i 's/return a - b/return a + b/' calc.py\nprintf 'from calc import add\\nassert add(2, 2) == 4\\n' > test_calc.py\n\
             printf '#!/bin/sh\\ntouch {}/planted\\n' > .git/hooks/post-checkout\nchmod +x .git/hooks/post-checkout\n\
             git add calc.py test_calc.py\ngit -c user.name=agent -c user.email=agent@example.invalid commit -q -m 'calc: add adds'\n\
             git log --oneline\n",
            c.markers.display()
        ),
    )
    .unwrap();
    let mock = MockApi::start(&[&format!("sh {}", script.display())]);
    let out = c.w.claude(&["--review"], &mock);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{}", tail(&out.stderr));
    let results = mock.tool_results();
    assert!(
        results
            .first()
            .is_some_and(|r| r.contains(" calc: add adds\n") && !r.contains("approval")),
        "{results:?}"
    );
    let run = kept_as(&stderr);
    let show = |what: &str, o: &std::process::Output| {
        println!("$ {what}\n{}{}", text(&o.stdout), text(&o.stderr));
    };
    println!(
        "$ claude-shim claude --review -- -p ... (the agent ran: {})",
        results[0].trim().replace('\n', "; ")
    );
    for l in stderr.lines().filter(|l| l.starts_with("claude-shim: ")) {
        println!("{l}");
    }
    let git_status = c.git(&c.w.proj, &["status", "--short"]);
    show("git status --short   # the host's tree, after the run", &git_status);
    assert!(text(&git_status.stdout).is_empty(), "the run wrote the tree");
    let diff = c.shim(&["changes", "--diff"]);
    show("claude-shim changes --diff", &diff);
    let d = text(&diff.stdout);
    assert!(
        d.contains("+    return a + b") && d.contains("[host runs it: git"),
        "{d}"
    );
    let apply = c.shim(&["apply"]);
    show("claude-shim apply", &apply);
    assert!(apply.status.success());
    let branch = c.git(&c.w.proj, &["branch"]);
    show("git branch", &branch);
    let log = c.git(&c.w.proj, &["log", "--format=%h %s", &format!("claude-shim/{run}")]);
    show(&format!("git log --format='%h %s' claude-shim/{run}"), &log);
    assert_eq!(text(&log.stdout).lines().count(), 2, "{}", text(&log.stdout));
    let head = c.git(&c.w.proj, &["log", "--format=%h %s", "HEAD"]);
    show("git log --format='%h %s' HEAD", &head);
    assert_eq!(text(&head.stdout).lines().count(), 1, "HEAD moved");
    let status = c.git(&c.w.proj, &["status", "--short"]);
    show("git status --short   # after apply", &status);
    assert!(std::fs::read_to_string(c.w.proj.join("calc.py"))
        .unwrap()
        .contains("a + b"));
    assert!(!c.w.proj.join(".git/hooks/post-checkout").exists());
    let checkout = c.git(&c.w.proj, &["checkout", "-q", "-f", &format!("claude-shim/{run}")]);
    assert!(checkout.status.success(), "{}", text(&checkout.stderr));
    assert!(c.markers_left().is_empty(), "the planted post-checkout hook ran");
    assert!(Path::new(&c.w.proj).join("test_calc.py").exists());
}
