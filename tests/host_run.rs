//! What the host runs from a project stays the host's (issue 23): from inside
//! `claude-shim sandbox`, as root and as the unprivileged test user, each way
//! to plant code the host's git or Claude Code runs later is tried (renaming
//! `.git` to make a new one, its config and hooks, a worktree's commondir,
//! the core.hooksPath directory, a nested repository, nested `.claude/`,
//! `.mcp.json`, `.envrc`, `git init` where there is no repository); then the
//! host's real `git status` and `git commit` run in the project, the nested
//! repository and a linked worktree, and no marker may appear. Placeholders
//! are invisible to `git add -A` inside.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use claude_shim_e2e::*;

/// A scratch tree: the project, a home, and where a planted command would
/// leave its marker (outside the project: the sandbox cannot write there,
/// the host's git can).
struct Project {
    dir: tempfile::TempDir,
    owner: Option<(u32, u32)>,
}

impl Project {
    fn new(owner: Option<(u32, u32)>) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("claude-shim-hostrun-")
            .tempdir_in("/var/tmp")
            .unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(dir.path().join("markers")).unwrap();
        Project { dir, owner }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn markers(&self) -> PathBuf {
        self.path("markers")
    }

    /// Hands the tree to the owner once it is built.
    fn chown(&self) {
        if let Some((uid, gid)) = self.owner {
            let ok = Command::new("chown")
                .args(["-R", &format!("{uid}:{gid}")])
                .arg(self.dir.path())
                .status()
                .unwrap();
            assert!(ok.success());
            std::fs::set_permissions(self.dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        }
    }

    /// The host's real git, as the project's owner would run it, with no
    /// system or global configuration of this machine.
    fn git(&self, dir: &Path, args: &[&str]) -> Output {
        let mut c = command_as(self.owner, Path::new("git"));
        c.arg("-C")
            .arg(dir)
            .args(["-c", "user.name=host", "-c", "user.email=host@example.invalid"])
            .args(args)
            .env("HOME", self.path("home"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(Stdio::null());
        c.output().unwrap()
    }

    fn git_ok(&self, dir: &Path, args: &[&str]) {
        let out = self.git(dir, args);
        assert!(
            out.status.success(),
            "git {args:?} in {}: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `script` in `claude-shim sandbox` with the agent policy in `work`.
    fn sandbox(&self, env: &Env, work: &Path, script: &str) -> (i32, String, String) {
        let mut c = env.command(&[
            "sandbox",
            "--policy",
            "agent",
            "--workdir",
            work.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            script,
        ]);
        c.env("HOME", self.path("home"))
            .env("M", self.markers())
            .stdin(Stdio::null());
        let out = c.output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn markers_left(&self) -> Vec<String> {
        std::fs::read_dir(self.markers())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    }
}

fn env_for(owner: Option<(u32, u32)>) -> Env {
    match owner {
        None => Env::new(),
        Some((u, g)) => Env::as_user(u, g),
    }
}

fn parse(stdout: &str) -> std::collections::BTreeMap<String, String> {
    stdout
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Each vector: a name and the shell command that plants it. `$M` is the
/// markers directory; what git would run touches a file there.
const VECTORS: &[(&str, &str)] = &[
    ("mv_git", "mv .git .git-x && git init -q . && git config core.fsmonitor \"touch $M/new_git\""),
    ("git_config", "printf '[core]\\n\\tfsmonitor = \"touch %s/fsmonitor\"\\n' \"$M\" >> .git/config"),
    ("git_config_rename", "cp .git/config /tmp/c && echo '[alias] st = !touch' >> /tmp/c && mv /tmp/c .git/config"),
    ("git_hook", "printf '#!/bin/sh\\ntouch %s/pre_commit\\n' \"$M\" > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit"),
    ("hooks_dir_swap", "mv .git/hooks .git/hooks-x"),
    ("info_attributes", "echo '* filter=x' > .git/info/attributes"),
    ("worktree_commondir", "echo /tmp/evil > .git/worktrees/wt/commondir"),
    ("hooks_path", "printf '#!/bin/sh\\ntouch %s/hooks_path\\n' \"$M\" > .githooks/pre-commit && chmod +x .githooks/pre-commit"),
    ("sub_config", "printf '[core]\\n\\tfsmonitor = \"touch %s/sub_fsmonitor\"\\n' \"$M\" >> sub/.git/config"),
    ("sub_hook", "printf '#!/bin/sh\\ntouch %s/sub_hook\\n' \"$M\" > sub/.git/hooks/post-commit && chmod +x sub/.git/hooks/post-commit"),
    ("sub_mv_git", "mv sub/.git sub/.git-x"),
    ("sub_claude", "printf '{\"hooks\":{\"SessionStart\":[]}}' > sub/.claude/settings.json"),
    ("sub_claude_new", "echo '{}' > sub/.claude/settings.local.json"),
    ("sub_mcp", "echo '{\"mcpServers\":{}}' > sub/.mcp.json"),
    ("sub_envrc", "echo \"touch $M/envrc\" > sub/.envrc"),
];

fn script() -> String {
    let mut s = String::from("export GIT_CONFIG_NOSYSTEM=1\n");
    for (name, cmd) in VECTORS {
        s.push_str(&format!(
            "if ( {cmd} ) >/dev/null 2>&1; then echo {name}=planted; else echo {name}=refused; fi\n"
        ));
    }
    // The agent can still work: commit inside.
    s.push_str(
        "echo change >> tracked && git add -A && git -c user.name=a -c user.email=a@example.invalid \
         commit -q -m inside && echo commit_inside=ok\n",
    );
    s
}

/// The repository with a nested one, a linked worktree beside it and a
/// core.hooksPath directory, as a user has them.
fn repository(p: &Project) -> PathBuf {
    let work = p.path("repo");
    std::fs::create_dir_all(work.join("sub/.claude")).unwrap();
    std::fs::create_dir_all(work.join(".githooks")).unwrap();
    std::fs::write(work.join("tracked"), "one\n").unwrap();
    std::fs::write(work.join("sub/s"), "s\n").unwrap();
    p.chown();
    p.git_ok(&work, &["init", "-q"]);
    p.git_ok(&work, &["add", "tracked"]);
    p.git_ok(&work, &["commit", "-q", "-m", "one"]);
    p.git_ok(&work, &["config", "core.hooksPath", ".githooks"]);
    p.git_ok(&work, &["worktree", "add", "-q", &p.path("wt").display().to_string()]);
    let sub = work.join("sub");
    p.git_ok(&sub, &["init", "-q"]);
    p.git_ok(&sub, &["add", "s"]);
    p.git_ok(&sub, &["commit", "-q", "-m", "s"]);
    std::fs::write(sub.join(".claude/settings.json"), "{}\n").unwrap();
    std::fs::write(sub.join(".mcp.json"), "{}\n").unwrap();
    std::fs::write(sub.join(".envrc"), "export A=1\n").unwrap();
    p.chown();
    work
}

fn snapshot(paths: &[PathBuf]) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    paths.iter().map(|p| (p.clone(), std::fs::read(p).ok())).collect()
}

fn planted_code_never_runs_on_the_host(owner: Option<(u32, u32)>) {
    let env = env_for(owner);
    let p = Project::new(owner);
    let work = repository(&p);
    let guarded: Vec<PathBuf> = [
        ".git/config",
        ".git/worktrees/wt/commondir",
        "sub/.git/config",
        "sub/.claude/settings.json",
        "sub/.mcp.json",
        "sub/.envrc",
    ]
    .iter()
    .map(|r| work.join(r))
    .collect();
    let before = snapshot(&guarded);

    let (code, stdout, stderr) = p.sandbox(&env, &work, &script());
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let got = parse(&stdout);
    for (name, _) in VECTORS {
        println!("{name}: {}", got.get(*name).map(String::as_str).unwrap_or("?"));
    }
    let planted: Vec<&&str> = VECTORS
        .iter()
        .map(|(n, _)| n)
        .filter(|n| got.get(**n).map(String::as_str) != Some("refused"))
        .collect();
    assert!(planted.is_empty(), "not refused: {planted:?}\n{stdout}\n{stderr}");
    assert_eq!(got.get("commit_inside").map(String::as_str), Some("ok"), "{stderr}");
    assert_eq!(snapshot(&guarded), before, "a protected file changed");
    assert!(!work.join(".git-x").exists() && !work.join("sub/.git-x").exists());
    assert!(!work.join("sub/.claude/settings.local.json").exists());

    // The host's real git, where the user works next.
    for dir in [work.clone(), work.join("sub"), p.path("wt")] {
        p.git_ok(&dir, &["status"]);
        p.git_ok(&dir, &["commit", "-q", "--allow-empty", "-m", "host"]);
    }
    let log = p.git(&work, &["log", "--format=%s"]);
    assert_eq!(String::from_utf8_lossy(&log.stdout), "host\ninside\none\n");
    assert_eq!(p.markers_left(), Vec::<String>::new(), "planted code ran on the host");
    println!("host git status and commit in repo, repo/sub and the worktree: no marker");
}

#[test]
fn planted_code_never_runs_on_the_host_as_root() {
    planted_code_never_runs_on_the_host(None);
}

#[test]
fn planted_code_never_runs_on_the_host_as_an_unprivileged_user() {
    planted_code_never_runs_on_the_host(Some(test_user()));
}

/// A project without a repository cannot get one, and nothing is left after.
fn no_repository_can_be_made(owner: Option<(u32, u32)>) {
    let env = env_for(owner);
    let p = Project::new(owner);
    let work = p.path("plain");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("a"), "a\n").unwrap();
    p.chown();
    let script = "export GIT_CONFIG_NOSYSTEM=1\n\
        if git init -q . 2>/dev/null; then echo git_init=planted; else echo git_init=refused; fi\n\
        if mkdir .git/hooks 2>/dev/null; then echo mkdir=planted; else echo mkdir=refused; fi\n\
        if mv .git .git-x 2>/dev/null; then echo mv=planted; else echo mv=refused; fi\n\
        if rm -rf .git 2>/dev/null; then echo rm=planted; else echo rm=refused; fi\n\
        if ( cd /tmp && git init -q x ); then echo elsewhere=ok; fi\n";
    let (code, stdout, stderr) = p.sandbox(&env, &work, script);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let got = parse(&stdout);
    println!("{stdout}");
    for k in ["git_init", "mkdir", "mv", "rm"] {
        assert_eq!(
            got.get(k).map(String::as_str),
            Some("refused"),
            "{k}: {stdout}\n{stderr}"
        );
    }
    assert_eq!(got.get("elsewhere").map(String::as_str), Some("ok"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(&work)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["a"], "the placeholders are gone after the run");
}

#[test]
fn no_repository_can_be_made_as_root() {
    no_repository_can_be_made(None);
}

#[test]
fn no_repository_can_be_made_as_an_unprivileged_user() {
    no_repository_can_be_made(Some(test_user()));
}

/// `git add -A` in a fresh repository stages only what the user wrote: the
/// placeholders are empty directories, which git does not see.
#[test]
fn placeholders_are_invisible_to_git() {
    for owner in [None, Some(test_user())] {
        let env = env_for(owner);
        let p = Project::new(owner);
        let work = p.path("fresh");
        std::fs::create_dir_all(&work).unwrap();
        p.chown();
        p.git_ok(&work, &["init", "-q"]);
        let (code, stdout, stderr) = p.sandbox(
            &env,
            &work,
            "export GIT_CONFIG_NOSYSTEM=1\nls -A; echo mine > mine.txt && git add -A && git status --porcelain",
        );
        assert_eq!(code, 0, "{stderr}");
        assert!(
            stdout.contains(".claude") && stdout.contains(".vscode"),
            "placeholders there: {stdout}"
        );
        assert!(stdout.ends_with("A  mine.txt\n"), "{stdout}");
        let staged = stdout.lines().filter(|l| l.starts_with("A ")).count();
        assert_eq!(staged, 1, "{stdout}");
        println!("git status --porcelain inside: {}", stdout.lines().last().unwrap());
    }
}
