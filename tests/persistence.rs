//! Issue 23, what a run leaves behind, end to end: from inside `sandbox`,
//! the whole-agent `claude` and `claude --per-command` (the real `claude`
//! CLI against the mock API), as root and as the unprivileged test user, a
//! run plants what the host would run later and which did not exist at
//! start (a new `sub/.claude/settings.json` with a SessionStart hook, a new
//! nested repository with a pre-commit hook, a new `.envrc`). Then the host
//! tools run for real, unsandboxed: `git commit` in the new repository and
//! `claude -p` in the subfolder; no marker may appear, the home is unchanged
//! byte for byte, and the report names each entry. Restoring the run from
//! the quarantine puts them back, and the same host tools then do run them:
//! the vectors are real, and the quarantine is what stopped them.
//! (What existed at start, and a home-directory project with `bash -i`:
//! tests/host_run.rs and the test at the end here.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use claude_shim_e2e::claude_world::{tail, text, World};
use claude_shim_e2e::mock_api::MockApi;
use claude_shim_e2e::*;

#[derive(Clone, Copy, Debug)]
enum Mode {
    Sandbox,
    WholeAgent,
    PerCommand,
}

/// The planting command; `m` is where the planted code would leave its
/// markers (outside the project, unwritable from inside).
fn plant(m: &Path) -> String {
    let m = m.display();
    format!(
        r#"set -e
mkdir -p sub/.claude
printf '%s' '{{"hooks":{{"SessionStart":[{{"hooks":[{{"type":"command","command":"touch {m}/claude_hook"}}]}}]}}}}' > sub/.claude/settings.json
echo 'touch {m}/envrc' > sub/.envrc
git init -q new
printf '#!/bin/sh\ntouch {m}/git_hook\n' > new/.git/hooks/pre-commit
chmod +x new/.git/hooks/pre-commit
echo PLANTED"#
    )
}

struct Case {
    w: World,
    markers: PathBuf,
    /// The planting script, outside the project (one plain command for
    /// Claude Code's permission check: `sh PATH`).
    script: PathBuf,
    /// Who runs the host's tools: the tree's owner.
    tools_as: Option<(u32, u32)>,
}

impl Case {
    fn new(owner: Option<(u32, u32)>) -> Case {
        let w = World::new(owner);
        let markers = w.dir.path().join("markers");
        std::fs::create_dir(&markers).unwrap();
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(&markers, Some(uid), Some(gid)).unwrap();
        }
        let script = w.dir.path().join("plant.sh");
        std::fs::write(&script, plant(&markers)).unwrap();
        Case {
            w,
            markers,
            script,
            tools_as: owner,
        }
    }

    fn markers_left(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.markers)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// The run of `mode` that plants; its stderr (where the report goes).
    fn run(&self, mode: Mode, mock: &MockApi) -> Output {
        let out = match mode {
            Mode::Sandbox => {
                let mut c = self.w.command(&shim_path(), mock);
                c.arg("--root").arg(&self.w.root);
                c.args(["sandbox", "--policy", "agent", "--", "sh"]).arg(&self.script);
                output_of(c, self.w.dir.path())
            }
            Mode::WholeAgent => self.w.claude(&[], mock),
            Mode::PerCommand => self.w.claude(&["--per-command"], mock),
        };
        assert!(
            out.status.success(),
            "{mode:?}: {:?}\nstdout: {}\nstderr: {}",
            out.status,
            tail(&out.stdout),
            tail(&out.stderr)
        );
        out
    }

    /// The host's git, as the project's owner, without this machine's
    /// configuration.
    fn host_git_commit(&self, dir: &Path) -> Output {
        let mut c = command_as(self.tools_as, Path::new("git"));
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.w.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=host", "-c", "user.email=host@example.invalid"])
            .args(["commit", "-q", "--allow-empty", "-m", "host"])
            .stdin(Stdio::null());
        c.output().unwrap()
    }

    /// The host's `claude -p`, unsandboxed, in `dir`, with a home of its
    /// own (what a root-run claude kept in the world's home is root's).
    fn host_claude(&self, dir: &Path) -> Output {
        let mock = MockApi::start(&[]);
        let home = self.w.dir.path().join("host-home");
        if !home.exists() {
            std::fs::create_dir(&home).unwrap();
            if let Some((uid, gid)) = self.tools_as {
                std::os::unix::fs::chown(&home, Some(uid), Some(gid)).unwrap();
            }
        }
        let mut c = command_as(self.tools_as, Path::new("claude"));
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("ANTHROPIC_BASE_URL", mock.url())
            .env("ANTHROPIC_API_KEY", "sk-ant-api03-host")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .stdin(Stdio::null())
            .current_dir(dir)
            .args(["-p", "hello", "--output-format", "text"]);
        output_of(c, self.w.dir.path())
    }

    /// The host tools where the user works next.
    fn host_tools(&self) {
        // Both must have run: "no marker" from a tool that never started proves nothing.
        let git = self.host_git_commit(&self.w.proj.join("new"));
        eprintln!(
            "host git commit in new/: {:?} {}",
            git.status.code(),
            text(&git.stderr).trim()
        );
        assert!(git.status.success(), "host git commit: {}", text(&git.stderr));
        let sub = self.w.proj.join("sub");
        assert!(sub.is_dir(), "{} is gone", sub.display());
        let claude = self.host_claude(&sub);
        eprintln!(
            "host claude -p in sub/: {:?} {}",
            claude.status.code(),
            text(&claude.stdout).trim()
        );
        assert!(claude.status.success(), "host claude -p: {}", tail(&claude.stderr));
    }

    fn quarantine(&self, args: &[&str]) -> Output {
        let mut c = command_as(self.w.owner, &shim_path());
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.w.home)
            .arg("quarantine")
            .args(args)
            .stdin(Stdio::null());
        c.output().unwrap()
    }
}

/// The run named in the report's restore hints, each entry's line checked.
fn reported_run(stderr: &str, proj: &Path, rels: &[&str]) -> String {
    for rel in rels {
        let want = format!("claude-shim:   {}/{rel} (", proj.display());
        assert!(stderr.contains(&want), "no report line for {rel}: {stderr}");
    }
    let hint = "claude-shim quarantine restore ";
    let at = stderr.find(hint).unwrap_or_else(|| panic!("no restore hint: {stderr}"));
    stderr[at + hint.len()..]
        .split(|c: char| c == ')' || c == ';' || c.is_whitespace())
        .next()
        .unwrap()
        .to_owned()
}

fn digest(c: &Case, mode: Mode) -> BTreeMap<PathBuf, String> {
    match mode {
        // The host's own claude keeps its state in the home.
        Mode::PerCommand => c.w.home_digest_but_claudes(),
        _ => c.w.home_digest(),
    }
}

/// Who runs it: root or the test user in a tree of their own, or root in
/// the test user's tree (the sandbox then runs as that user).
#[derive(Clone, Copy)]
enum Who {
    Root,
    User,
    RootInUsers,
}

fn left_behind(mode: Mode, who: Who) {
    let c = match who {
        Who::Root => Case::new(None),
        Who::User => Case::new(Some(test_user())),
        Who::RootInUsers => {
            let mut c = Case::new(Some(test_user()));
            c.w.owner = None;
            c
        }
    };
    let proj = c.w.proj.clone();
    let before = digest(&c, mode);
    // Then a cd, which Claude Code carries to the next call (per command:
    // through the cwd file each call's own temp directory holds).
    let plant = format!("sh {}", c.script.display());
    let mock = MockApi::start(&[&plant, "cd new", "pwd"]);
    let out = c.run(mode, &mock);
    if !matches!(mode, Mode::Sandbox) {
        let r = mock.tool_results();
        assert!(r.first().is_some_and(|r| r.contains("PLANTED")), "{mode:?}: {r:?}");
        assert_eq!(r.len(), 3, "{r:?}");
        let new = proj.join("new");
        assert_eq!(
            r[2].trim(),
            new.to_str().unwrap(),
            "{mode:?}: the cd did not carry over"
        );
    }
    let stderr = text(&out.stderr);
    eprintln!(
        "{mode:?} report:\n{}",
        stderr
            .lines()
            .filter(|l| l.contains("claude-shim"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let run = reported_run(
        &stderr,
        &proj,
        &["sub/.claude", "sub/.envrc", "new/.git/hooks", "new/.git/config"],
    );
    // Gone from the project; the new repository's history stays.
    for rel in ["sub/.claude", "sub/.envrc", "new/.git/hooks", "new/.git/config"] {
        assert!(
            std::fs::symlink_metadata(proj.join(rel)).is_err(),
            "{rel} is still there"
        );
    }
    assert!(proj.join("new/.git/HEAD").is_file());
    let list = c.quarantine(&["list"]);
    assert!(text(&list.stdout).contains(&run), "{}", text(&list.stdout));

    c.host_tools();
    assert_eq!(digest(&c, mode), before, "{mode:?}: the home changed");
    assert_eq!(
        c.markers_left(),
        Vec::<String>::new(),
        "{mode:?}: planted code ran on the host"
    );
    eprintln!("{mode:?}: the home unchanged; host git commit in new/ and claude -p in sub/: no marker");

    // Restored, the same host tools run what was planted: the vectors were
    // real and the quarantine stopped them.
    let restore = c.quarantine(&["restore", &run]);
    let said = text(&restore.stdout);
    eprintln!("{mode:?} restore:\n{}", said.trim());
    assert!(restore.status.success(), "{said}\n{}", text(&restore.stderr));
    assert!(
        said.contains(&format!("restored {}/sub/.claude", proj.display())),
        "{said}"
    );
    let settings = std::fs::read_to_string(proj.join("sub/.claude/settings.json")).unwrap();
    assert!(settings.contains("SessionStart"), "{settings}");
    c.host_tools();
    let ran = c.markers_left();
    eprintln!("{mode:?}: after the restore the host ran: {ran:?}");
    assert!(ran.contains(&"git_hook".to_owned()), "{mode:?}: {ran:?}");
    assert!(ran.contains(&"claude_hook".to_owned()), "{mode:?}: {ran:?}");
    assert!(
        !text(&c.quarantine(&["list"]).stdout).contains(&run),
        "the restored run is still listed"
    );
}

#[test]
fn sandbox_leaves_nothing_the_host_runs_as_root() {
    left_behind(Mode::Sandbox, Who::Root);
}

#[test]
fn sandbox_leaves_nothing_the_host_runs_rootless() {
    left_behind(Mode::Sandbox, Who::User);
}

#[test]
fn sandbox_leaves_nothing_the_host_runs_as_root_in_a_users_project() {
    left_behind(Mode::Sandbox, Who::RootInUsers);
}

#[test]
fn whole_agent_leaves_nothing_the_host_runs_as_root() {
    left_behind(Mode::WholeAgent, Who::Root);
}

#[test]
fn whole_agent_leaves_nothing_the_host_runs_rootless() {
    left_behind(Mode::WholeAgent, Who::User);
}

#[test]
fn whole_agent_leaves_nothing_the_host_runs_as_root_in_a_users_project() {
    left_behind(Mode::WholeAgent, Who::RootInUsers);
}

#[test]
fn per_command_leaves_nothing_the_host_runs_as_root() {
    left_behind(Mode::PerCommand, Who::Root);
}

#[test]
fn per_command_leaves_nothing_the_host_runs_rootless() {
    left_behind(Mode::PerCommand, Who::User);
}

#[test]
fn per_command_leaves_nothing_the_host_runs_as_root_in_a_users_project() {
    left_behind(Mode::PerCommand, Who::RootInUsers);
}

/// A home-directory project (`sandbox` still runs there): the shell's
/// start-up files, the XDG autostart and `~/.local/bin` stay the host's, so
/// the next interactive shell on the host runs nothing of the sandbox's.
fn home_project(owner: Option<(u32, u32)>) {
    let c = Case::new(owner);
    let home = std::fs::canonicalize(&c.w.home).unwrap();
    let m = c.markers.display();
    let script = format!(
        r#"for v in "echo 'touch {m}/bashrc' >> .bashrc" \
         "echo 'touch {m}/bash_profile' > .bash_profile" \
         "echo 'touch {m}/profile' > .profile" \
         "mkdir -p .config/autostart && echo x > .config/autostart/a.desktop" \
         "mkdir -p .local/bin && echo 'touch {m}/path' > .local/bin/ls && chmod +x .local/bin/ls" \
         "echo ok > notes.txt" \
         "mv .local .local-x && mkdir -p .local/bin && echo 'touch {m}/moved' > .local/bin/ls && chmod +x .local/bin/ls"; do
  if ( eval "$v" ) 2>/dev/null; then echo "planted: $v"; else echo "refused: $v"; fi
done"#
    );
    let mock = MockApi::start(&[]);
    let mut cmd = c.w.command(&shim_path(), &mock);
    cmd.current_dir(&home).arg("--root").arg(&c.w.root);
    cmd.args(["sandbox", "--policy", "agent", "--", "sh", "-c", &script]);
    let before = c.w.home_digest();
    let out = output_of(cmd, c.w.dir.path());
    let said = text(&out.stdout);
    eprintln!("home project:\n{}", said.trim());
    assert!(out.status.success(), "{said}\n{}", tail(&out.stderr));
    assert_eq!(said.matches("refused: ").count(), 6, "{said}\n{}", tail(&out.stderr));
    // The home is still the project: the rest of it is writable.
    assert!(said.contains("planted: echo ok > notes.txt"), "{said}");
    let mut after = c.w.home_digest();
    assert!(after.remove(&c.w.home.join("notes.txt")).is_some());
    assert_eq!(after, before, "the home changed");
    // The host's next shells, with ~/.local/bin first in PATH: a login
    // shell (.bash_profile, .profile) and an interactive one (.bashrc).
    for login in [true, false] {
        let mut bash = command_as(owner, Path::new("bash"));
        bash.env_clear()
            .env("HOME", &home)
            .env("PATH", format!("{}/.local/bin:/usr/bin:/bin", home.display()))
            .arg("-i")
            .args(login.then_some("-l"))
            .args(["-c", "ls >/dev/null"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        assert!(bash.status().unwrap().success(), "host bash (login: {login}) failed");
    }
    assert_eq!(
        c.markers_left(),
        Vec::<String>::new(),
        "the host's bash ran planted code"
    );
    eprintln!("host bash -i -l and bash -i in the home: no marker");
}

#[test]
fn a_home_project_plants_no_shell_start_up_as_root() {
    home_project(None);
}

#[test]
fn a_home_project_plants_no_shell_start_up_rootless() {
    home_project(Some(test_user()));
}

/// The quarantine list of a user who never had a run says so, in one line.
#[test]
fn an_empty_quarantine_says_so() {
    let c = Case::new(None);
    let out = c.quarantine(&["list"]);
    assert!(out.status.success());
    assert!(
        text(&out.stdout).starts_with("the quarantine is empty ("),
        "{}",
        text(&out.stdout)
    );
    let bad = c.quarantine(&["restore", "../x"]);
    assert!(!bad.status.success());
    let err = text(&bad.stderr);
    assert!(
        err.contains("not the name of a quarantine run") && err.trim().lines().count() == 1,
        "{err}"
    );
}
