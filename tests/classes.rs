//! Issue 35 item 1, end to end: the host-run entries by class, not by
//! instance. In a project its owner set up as users do (a repository whose
//! config includes a file not made yet, a repository with pre-commit
//! installed, one with lefthook, a folder mise trusts, one direnv trusts),
//! a real sandbox plants one of each class: a repository under another
//! name (git's own test: `HEAD`, `objects/`, `refs/`), a gitlink in the top
//! index whose repository lies 11 levels down in `node_modules`, the file
//! the top config includes, a pre-commit config, a lefthook-local config,
//! a `mise.toml`, an `.envrc` and a `rust-toolchain.toml` whose `path`
//! names a planted `cargo`; the config of a gitlinked repository the owner
//! had at start, as deep, is read-only. Then the real host tools run, unsandboxed, as
//! the project's owner (`git status`, `git commit` through pre-commit's and
//! lefthook's hooks, `mise env`, `direnv exec`, rustup's `cargo`): no
//! marker. Restored from the quarantine, the same tools run every planted
//! one: the vectors are real, and the quarantine is what stopped them.
//!
//! A `.pth` file planted in the project's existing virtualenv stays where
//! it is, and the project's python runs it: environments inside the project are the project's in
//! the live mode (docs/sandbox.md, "Environments inside the project");
//! `--review` is for those who need them guarded.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use claude_shim_e2e::claude_world::{text, World};
use claude_shim_e2e::*;

/// Where the gitlink's repository lies: past the old search's 8 levels,
/// in a folder it skipped.
const DEEP: &str = "node_modules/a/b/c/d/e/f/g/h/i/sub";

/// A gitlinked repository the owner has at start, as deep: read-only from
/// the start, though the start's bounded search does not reach it.
const KEPT: &str = "node_modules/a/b/c/d/e/f/g/h/i/kept";

/// Every planted entry, as the report names it.
const PLANTED: &[&str] = &[
    "vendor/x.git/config",
    "team.gitconfig",
    "node_modules/a/b/c/d/e/f/g/h/i/sub/.git/config",
    "pc/.pre-commit-config.yaml",
    "lh/lefthook-local.yml",
    "mi/sub/mise.toml",
    "dv/sub/.envrc",
    "rt/rust-toolchain.toml",
];

struct Case {
    w: World,
    markers: PathBuf,
    /// direnv's config folder (outside the project): the project trusted.
    direnv: PathBuf,
}

impl Case {
    fn new(owner: Option<(u32, u32)>) -> Case {
        let w = World::new(owner);
        let markers = w.dir.path().join("markers");
        std::fs::create_dir(&markers).unwrap();
        std::fs::set_permissions(&markers, std::fs::Permissions::from_mode(0o777)).unwrap();
        let direnv = w.dir.path().join("direnv");
        std::fs::create_dir(&direnv).unwrap();
        std::fs::write(
            direnv.join("direnv.toml"),
            format!("[whitelist]\nprefix = [\"{}\"]\n", w.proj.display()),
        )
        .unwrap();
        std::fs::set_permissions(&direnv, std::fs::Permissions::from_mode(0o755)).unwrap();
        Case { w, markers, direnv }
    }

    /// A host tool, unsandboxed, as the project's owner, in `dir`, with
    /// the home, mise's and direnv's trust of the project.
    fn host(&self, dir: &Path, script: &str) -> Output {
        let mut c = command_as(self.w.owner, Path::new("/bin/sh"));
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.w.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "host")
            .env("GIT_AUTHOR_EMAIL", "host@example.invalid")
            .env("GIT_COMMITTER_NAME", "host")
            .env("GIT_COMMITTER_EMAIL", "host@example.invalid")
            .env("MISE_TRUSTED_CONFIG_PATHS", &self.w.proj)
            .env("DIRENV_CONFIG", &self.direnv)
            .env("NO_COLOR", "1")
            .args(["-c", script])
            .current_dir(dir)
            .stdin(Stdio::null());
        output_of(c, self.w.dir.path())
    }

    /// The owner's set-up, before any sandbox: what users do.
    fn set_up(&self) {
        let script = r#"set -e
git init -q .
git config include.path ../team.gitconfig
git init -q pc && (cd pc && pre-commit install >/dev/null)
git init -q lh && printf 'pre-commit:\n  commands:\n    ok:\n      run: "true"\n' > lh/lefthook.yml && (cd lh && lefthook install >/dev/null)
mkdir -p mi/sub dv/sub rt
mkdir -p {KEPT} && git init -q {KEPT} && git -C {KEPT} commit -q --allow-empty -m kept
git update-index --add --cacheinfo 160000,$(git -C {KEPT} rev-parse HEAD),{KEPT}
echo SET-UP"#;
        let out = self.host(&self.w.proj, &script.replace("{KEPT}", KEPT));
        assert!(text(&out.stdout).contains("SET-UP"), "{}", text(&out.stderr));
    }

    /// `claude-shim sandbox --policy offline -- sh -c SCRIPT` in the project
    /// as its owner.
    fn sandbox(&self, script: &str) -> Output {
        let mut c = command_as(self.w.owner, &shim_path());
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.w.home)
            .current_dir(&self.w.proj);
        if self.w.owner.is_some() {
            c.env("XDG_RUNTIME_DIR", &self.w.root);
        }
        c.arg("--root").arg(&self.w.root);
        c.args(["sandbox", "--policy", "offline", "--", "sh", "-c", script]);
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

    /// Each host tool where the user works next; each prints its status
    /// and last line, so a tool that did not start shows.
    fn host_tools(&self) {
        let p = &self.w.proj;
        let mut tools: Vec<(&str, PathBuf, &str)> = vec![
            ("git status (top)", p.clone(), "git status --short"),
            (
                "git status (vendor/x.git)",
                p.join("vendor/x.git"),
                "git status --short",
            ),
            (
                "git commit (pc, pre-commit)",
                p.join("pc"),
                "echo a >> f && git add f && git commit -q -m host",
            ),
            (
                "git commit (lh, lefthook)",
                p.join("lh"),
                "echo a >> f && git add f && git commit -q -m host",
            ),
            ("mise env (mi/sub)", p.join("mi/sub"), "mise env"),
            ("direnv exec (dv/sub)", p.clone(), "direnv exec dv/sub true"),
        ];
        // rustup is root's here (/root/.cargo): the test user cannot start
        // it. rustup book, "Overrides": "path = ..." in the toolchain file
        // names the toolchain whose cargo and rustc run.
        if self.w.owner.is_none() {
            tools.push(("cargo --version (rt, rustup)", p.join("rt"), "cargo --version"));
        }
        for (name, dir, script) in tools {
            let out = self.host(&dir, script);
            let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
            eprintln!(
                "host {name}: {:?} {}",
                out.status.code(),
                said.trim().lines().last().unwrap_or("")
            );
        }
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

fn plant(m: &Path, proj: &Path) -> String {
    let (m, proj) = (m.display(), proj.display());
    format!(
        r#"set -e
git init -q --bare vendor/x.git
git -C vendor/x.git config core.bare false
git -C vendor/x.git config core.worktree ..
git -C vendor/x.git config core.fsmonitor 'touch {m}/shape; false'
printf '[core]\n\tfsmonitor = "touch {m}/include; false"\n' > team.gitconfig
mkdir -p {DEEP} && git init -q {DEEP}
git -C {DEEP} -c user.name=a -c user.email=a@b commit -q --allow-empty -m x
git update-index --add --cacheinfo 160000,$(git -C {DEEP} rev-parse HEAD),{DEEP}
git -C {DEEP} config core.fsmonitor 'touch {m}/gitlink; false'
git -C {KEPT} config core.fsmonitor 'touch {m}/kept; false' 2>/dev/null && echo 'changed: kept' || echo 'refused: kept'
printf 'repos:\n- repo: local\n  hooks:\n  - id: x\n    name: x\n    entry: touch {m}/pre_commit\n    language: system\n    always_run: true\n    pass_filenames: false\n' > pc/.pre-commit-config.yaml
printf 'pre-commit:\n  commands:\n    x:\n      run: touch {m}/lefthook\n' > lh/lefthook-local.yml
printf '#!/bin/sh\ntouch {m}/mise\n' > mi/evil.sh
printf '[env]\n_.source = "{proj}/mi/evil.sh"\n' > mi/sub/mise.toml
echo 'touch {m}/direnv' > dv/sub/.envrc
mkdir -p rt/tc/bin && printf '#!/bin/sh\ntouch {m}/rustup\n' > rt/tc/bin/cargo && chmod +x rt/tc/bin/cargo
printf '[toolchain]\npath = "{proj}/rt/tc"\n' > rt/rust-toolchain.toml
echo PLANTED"#
    )
}

fn classes(owner: Option<(u32, u32)>) {
    let c = Case::new(owner);
    c.set_up();
    let out = c.sandbox(&plant(&c.markers, &c.w.proj));
    let stderr = text(&out.stderr);
    let report: Vec<&str> = stderr.lines().filter(|l| l.starts_with("claude-shim")).collect();
    eprintln!("status {}; report:\n{}", out.status, report.join("\n"));
    let said = text(&out.stdout);
    eprintln!("{}", said.trim());
    assert!(said.contains("PLANTED"), "{stderr}");
    assert!(said.contains("refused: kept"), "{said}");
    assert!(out.status.success(), "{stderr}");
    let proj = c.w.proj.display();
    for rel in PLANTED {
        assert!(
            stderr.contains(&format!("claude-shim:   {proj}/{rel} (")),
            "{rel} is not reported: {stderr}"
        );
        assert!(
            std::fs::symlink_metadata(c.w.proj.join(rel)).is_err(),
            "{rel} is still there"
        );
    }
    // The repositories' history and the project's own files stay.
    for rel in ["vendor/x.git/HEAD", &format!("{DEEP}/.git/HEAD"), "rt/tc/bin/cargo"] {
        assert!(c.w.proj.join(rel).exists(), "{rel} was taken");
    }
    c.host_tools();
    assert_eq!(c.markers_left(), Vec::<String>::new(), "planted code ran on the host");
    eprintln!("every class: the host's tools ran, no marker");

    // Restored, the same tools run every planted entry.
    let hint = "claude-shim quarantine restore ";
    let at = stderr.find(hint).unwrap_or_else(|| panic!("no restore hint: {stderr}"));
    let run = stderr[at + hint.len()..]
        .split(|ch: char| ch == ')' || ch == ';' || ch.is_whitespace())
        .next()
        .unwrap()
        .to_owned();
    let restore = c.quarantine(&["restore", &run]);
    assert!(restore.status.success(), "{}", text(&restore.stderr));
    c.host_tools();
    let ran = c.markers_left();
    eprintln!("after the restore the host ran: {ran:?}");
    let mut want = vec![
        "direnv",
        "gitlink",
        "include",
        "lefthook",
        "mise",
        "pre_commit",
        "shape",
    ];
    if owner.is_none() {
        want.push("rustup");
    }
    want.sort();
    assert_eq!(ran, want, "a restored vector did not run");
}

/// The project's own virtualenv: what the sandbox planted in it stays and
/// runs with the project's python, as the threat model says.
fn the_venv_is_the_project_s(c: &Case) {
    let python = c.w.proj.join(".venv/bin/python");
    let out = Command::new(&python).args(["-c", "pass"]).output().unwrap();
    assert!(out.status.success());
    let ran = c.markers_left();
    eprintln!("the project's python ran the planted .pth (the project's): {ran:?}");
    assert!(ran.contains(&"venv".to_owned()), "{ran:?}");
}

#[test]
fn every_class_is_found_and_nothing_planted_runs_as_root() {
    classes(None);
}

#[test]
fn every_class_is_found_and_nothing_planted_runs_rootless() {
    classes(Some(test_user()));
}

#[test]
fn a_planted_pth_in_the_project_s_virtualenv_stays_the_project_s() {
    let c = Case::new(None);
    c.set_up();
    let venv = c.host(&c.w.proj, "/usr/bin/python3 -m venv --without-pip .venv");
    assert!(venv.status.success(), "{}", text(&venv.stderr));
    let script = format!(
        "sp=$(echo .venv/lib/python3*/site-packages) && echo 'import os; open(\"{}/venv\", \"w\")' > $sp/planted.pth",
        c.markers.display()
    );
    let out = c.sandbox(&script);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("planted.pth"), "{stderr}");
    the_venv_is_the_project_s(&c);
}
