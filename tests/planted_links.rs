//! Issue 23, item 1 and the per-command entry: claude-shim never follows
//! what a sandbox planted. Each link of the issue is planted from inside a
//! real run (the real `claude` CLI against the mock API, or `sandbox`), as
//! root and as the unprivileged test user; the next start writes through
//! none, copies no host file in, removes nothing elsewhere, and the home is
//! unchanged byte for byte. The home directory is refused as a project.

use std::path::Path;
use std::process::Output;

use claude_shim_e2e::claude_world::{tail, text, World, OAUTH};
use claude_shim_e2e::mock_api::MockApi;
use claude_shim_e2e::*;

fn assert_ok(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what} exited {:?}\nstdout: {}\nstderr: {}",
        out.status,
        tail(&out.stdout),
        text(&out.stderr)
    );
}

/// The whole agent plants the two links of the issue in its own
/// configuration directory, one run each; the start after each follows none.
fn whole_agent(owner: Option<(u32, u32)>) {
    let w = World::new(owner);
    let before = w.home_digest();
    let agent = w.agent_dir();
    let bashrc = w.home.join(".bashrc");
    let creds = w.home.join(".claude/.credentials.json");
    // Run 1: the temp name the start used to write .claude.json through,
    // as a link to the user's ~/.bashrc.
    let plant_tmp = format!(
        "ln -s {} {}/.claude.json.claude-shim.tmp && echo PLANTED",
        bashrc.display(),
        agent.display()
    );
    let mock = MockApi::start(&[&plant_tmp]);
    let out = w.claude(&[], &mock);
    assert_ok("run 1", &out);
    let r = mock.tool_results();
    eprintln!("run 1 (plant the temp-name link): {}", r[0].trim());
    assert!(r[0].contains("PLANTED"), "{r:?}");
    // Run 2: the next start; the agent now links .claude.json to the host's
    // credentials for the start after it to copy them in.
    let plant_state = format!(
        "ln -sf {} {}/.claude.json && echo PLANTED",
        creds.display(),
        agent.display()
    );
    mock.queue(&[&plant_state]);
    let out = w.claude(&[], &mock);
    assert_ok("run 2", &out);
    eprintln!("run 2 (plant the .claude.json link): {}", mock.tool_results()[1].trim());
    assert_eq!(
        std::fs::read_to_string(&bashrc).unwrap(),
        "# the host's bashrc\n",
        "the start wrote through the planted temp name"
    );
    // Run 3: refused, naming the link; nothing read through it.
    let out = w.claude(&[], &mock);
    let err = text(&out.stderr);
    eprintln!("run 3 stderr: {}", err.trim());
    assert!(!out.status.success(), "the start read through the planted .claude.json");
    let want = format!(
        "failed to read {}/.claude.json: a symbolic link is in the way (claude-shim follows none where a sandbox can write)",
        agent.display()
    );
    assert!(err.contains(&want), "stderr: {err}");
    let leaked = w.files_holding(&agent, OAUTH);
    assert!(leaked.is_empty(), "the host's credential was copied in: {leaked:?}");
    assert_eq!(w.home_digest(), before, "the home changed");
    assert!(w.left_in_state().is_empty(), "left: {:?}", w.left_in_state());
}

#[test]
fn whole_agent_follows_no_planted_link_as_root() {
    whole_agent(None);
}

#[test]
fn whole_agent_follows_no_planted_link_rootless() {
    whole_agent(Some(test_user()));
}

/// One Bash call looks for the directory Claude Code reads after each call
/// (its CLAUDE_CODE_TMPDIR) and plants links there: its task output files
/// and a cwd file turned into links to the host's credentials, a link as
/// the cwd file of its own call (written after the command, by an EXIT
/// trap). Claude Code reads none of them: no tool result holds the
/// credential, and the calls after still run.
fn per_command(owner: Option<(u32, u32)>) {
    let w = World::new(owner);
    let before = w.home_digest_but_claudes();
    let creds = w.home.join(".claude/.credentials.json");
    let attack = format!(
        r#"for t in /tmp/claude-shim-*; do
  echo "SEEN $t: $(find "$t" | wc -l) entries"
  for f in $(find "$t" -name '*.output'); do rm -f "$f"; ln -s {c} "$f" && echo "LINKED $f"; done
  ln -s {c} "$t/claude-0000-cwd" 2>/dev/null
done
own=$(tr '\0' ' ' < /proc/$$/cmdline | grep -o '/tmp/claude-shim-[^ ]*-cwd' | tail -1)
echo "OWN $own"
trap "rm -f $own; ln -s {c} $own" EXIT
echo ATTACKED"#,
        c = creds.display()
    );
    let mock = MockApi::start(&[&attack, "echo second", "pwd"]);
    let out = w.claude(&["--per-command"], &mock);
    assert_ok("claude --per-command", &out);
    let results = mock.tool_results();
    eprintln!("per-command tool_results:\n{}", results.join("\n---\n"));
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(results[0].contains("ATTACKED"), "{}", results[0]);
    // The call sees an empty directory of its own (no task output files to
    // link), so the planted cwd link is what reaches claude-shim: refused.
    assert!(
        results[0].contains("OWN /tmp/claude-shim-") && results[0].contains("it is not a regular file of its own"),
        "the planted cwd link was not met: {}",
        results[0]
    );
    for r in &results {
        assert!(!r.contains(OAUTH), "a tool result holds the host's credential: {r}");
    }
    assert_eq!(results[1].trim(), "second");
    assert_eq!(
        results[2].trim(),
        w.proj.to_str().unwrap(),
        "the planted cwd file was followed"
    );
    // The entry is in the runtime's state root, none in the user's state.
    let entry = w.root.join(".claude-shim/bin/claude-shim-shell");
    assert_eq!(std::fs::read_link(&entry).unwrap(), shim_path());
    assert!(!w.home.join(".local/state/claude-shim/bin").exists());
    assert_eq!(w.home_digest_but_claudes(), before, "the home changed");
    assert!(w.left_in_state().is_empty(), "left: {:?}", w.left_in_state());
}

#[test]
fn per_command_follows_no_planted_link_as_root() {
    per_command(None);
}

#[test]
fn per_command_follows_no_planted_link_rootless() {
    per_command(Some(test_user()));
}

/// `claude` from the home directory, or from a folder of a home that is a
/// git repository (a dotfiles repository), is refused in both modes.
fn home_refused(owner: Option<(u32, u32)>) {
    let w = World::new(owner);
    let mock = MockApi::start(&[]);
    let sub = w.home.join("notes");
    std::fs::create_dir_all(sub.join(".claude")).unwrap();
    std::fs::create_dir(w.home.join(".git")).unwrap();
    if let Some((uid, gid)) = owner {
        for p in [&sub, &sub.join(".claude"), &w.home.join(".git")] {
            std::os::unix::fs::chown(p, Some(uid), Some(gid)).unwrap();
        }
    }
    let home = std::fs::canonicalize(&w.home).unwrap();
    let want = format!(
        "failed to run claude from a project directory: {} is your home directory, whose shell, git and desktop start-up files the host runs",
        home.display()
    );
    for (cwd, mode) in [
        (&w.home, &[][..]),
        (&w.home, &["--per-command"][..]),
        (&sub, &["--per-command"][..]),
    ] {
        let out = w.claude_in(cwd, mode, &[], &mock);
        let err = text(&out.stderr);
        eprintln!("claude {mode:?} in {}: {}", cwd.display(), err.trim());
        assert!(!out.status.success() && err.contains(&want), "stderr: {err}");
    }
    assert!(mock.seen().is_empty(), "claude started");
    assert!(!w.home.join(".local").exists(), "claude-shim wrote in the home");
}

#[test]
fn the_home_is_not_a_project_as_root() {
    home_refused(None);
}

#[test]
fn the_home_is_not_a_project_rootless() {
    home_refused(Some(test_user()));
}

/// `claude-shim sandbox` in `w`'s project or home (as `cwd`) running `script`.
fn sandbox(w: &World, cwd: &Path, script: &str) -> Output {
    let mut c = command_as(w.owner, &shim_path());
    c.arg("--root")
        .arg(&w.root)
        .args(["sandbox", "--", "sh", "-c", script])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &w.home)
        .current_dir(cwd);
    if w.owner.is_some() {
        c.env("XDG_RUNTIME_DIR", &w.root);
    }
    output_of(c, w.dir.path())
}

/// During a run the sandbox tries to move `.git` aside (taking the
/// `.git/hooks` placeholder's bind along) and plant `.git -> elsewhere`: the
/// move is refused (`.git` is a mount point), and removing the placeholder
/// on the way out must not remove `elsewhere/hooks`.
fn placeholders(owner: Option<(u32, u32)>) {
    let w = World::new(owner);
    let victim = w.dir.path().join("victim");
    std::fs::create_dir_all(victim.join("hooks")).unwrap();
    if let Some((uid, gid)) = owner {
        for p in [&victim, &victim.join("hooks")] {
            std::os::unix::fs::chown(p, Some(uid), Some(gid)).unwrap();
        }
    }
    let script = format!(
        "mv .git .git-x && ln -s {} .git && echo PLANTED || echo REFUSED",
        victim.display()
    );
    let out = sandbox(&w, &w.proj, &script);
    eprintln!("sandbox: {}{}", text(&out.stdout).trim(), text(&out.stderr).trim());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "REFUSED", "the sandbox replaced .git");
    assert!(
        victim.join("hooks").is_dir(),
        "the placeholder's removal followed the planted .git link"
    );
    assert!(w.left_in_state().is_empty(), "left: {:?}", w.left_in_state());
}

#[test]
fn placeholders_follow_no_planted_link_as_root() {
    placeholders(None);
}

#[test]
fn placeholders_follow_no_planted_link_rootless() {
    placeholders(Some(test_user()));
}

/// A sandbox run in the home (which `sandbox` allows) replaces the logs
/// directory of claude-shim's state with a link to a directory of `.log`
/// files; the next run with a refused request keeps its log: it must
/// neither write there nor prune those files.
#[test]
fn kept_logs_follow_no_planted_link() {
    let w = World::new(None);
    let victim = w.dir.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    for i in 0..60 {
        std::fs::write(victim.join(format!("{i}.log")), "host log\n").unwrap();
    }
    let state = w.home.join(".local/state/claude-shim");
    let script = format!(
        "mkdir -p {s} && rm -rf {s}/logs && ln -s {} {s}/logs && echo PLANTED || echo REFUSED",
        victim.display(),
        s = state.display()
    );
    let out = sandbox(&w, &w.home, &script);
    eprintln!("plant: {}{}", text(&out.stdout).trim(), text(&out.stderr).trim());
    // Refused from inside (the state is read-only there)...
    assert_eq!(
        text(&out.stdout).trim(),
        "REFUSED",
        "the sandbox wrote claude-shim's state"
    );
    // ...so the link is left as an earlier writer could have: the next
    // run's log keeping must not follow it.
    std::fs::create_dir_all(&state).unwrap();
    let _ = std::fs::remove_dir_all(state.join("logs"));
    std::os::unix::fs::symlink(&victim, state.join("logs")).unwrap();
    let out = sandbox(&w, &w.proj, "curl -sS -o /dev/null https://refused.example/");
    let err = text(&out.stderr);
    eprintln!("refused run: {}", err.trim());
    assert!(
        err.contains("claude-shim: refused egress: refused.example:443"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(&victim).unwrap().count(),
        60,
        "files pruned through the link"
    );
    assert!(
        w.files_holding(&victim, "refused.example").is_empty(),
        "a log written through the link"
    );
}
