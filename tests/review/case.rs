//! The world of tests/review.rs: a project with a repository (a nested one,
//! a linked worktree, a core.hooksPath folder, an include of a file that does
//! not exist yet), a virtualenv made before the run, `.env` secrets; a run of
//! `sandbox --review` or `claude --review` (the real CLI against the mock)
//! that waits, once it has planted, until the test lets it end (a file in a
//! folder of the project it never writes, which the overlay shows as the
//! host has it); the host's real tools; a digest of the tree.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use claude_shim_e2e::claude_world::{tail, text, World};
use claude_shim_e2e::mock_api::MockApi;
use claude_shim_e2e::*;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    Sandbox,
    Claude,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Who {
    Root,
    User,
    /// Root in the test user's project: the sandbox runs as that user.
    RootInUsers,
}

pub struct Case {
    pub w: World,
    pub markers: PathBuf,
    /// Who runs the host's tools: the tree's owner.
    pub tools_as: Option<(u32, u32)>,
}

/// What the agent waits for once it has planted (`$1`: the project).
pub const WAIT: &str = r#"echo done > .planted
i=0; while [ -z "$(ls -A .signal 2>/dev/null)" ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done
rm -f .planted
echo PLANTED"#;

impl Case {
    pub fn new(who: Who) -> Case {
        let owner = match who {
            Who::Root => None,
            _ => Some(test_user()),
        };
        let mut w = World::new(owner);
        if who == Who::RootInUsers {
            w.owner = None;
        }
        let markers = w.dir.path().join("markers");
        std::fs::create_dir(&markers).unwrap();
        // Planted code run by the host leaves a file here; the sandbox cannot.
        std::fs::set_permissions(&markers, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        Case {
            w,
            markers,
            tools_as: owner,
        }
    }

    /// A shell line as the tree's owner, in `dir`; asserts it worked.
    pub fn sh(&self, dir: &Path, script: &str) -> String {
        let mut c = command_as(self.tools_as, Path::new("sh"));
        c.env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &self.w.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "host")
            .env("GIT_AUTHOR_EMAIL", "host@example.invalid")
            .env("GIT_COMMITTER_NAME", "host")
            .env("GIT_COMMITTER_EMAIL", "host@example.invalid")
            .current_dir(dir)
            .args(["-ec", script])
            .stdin(Stdio::null());
        let out = c.output().unwrap();
        assert!(out.status.success(), "{script}: {}", text(&out.stderr));
        text(&out.stdout)
    }

    /// The repository a user has: a nested one, a worktree beside it, a
    /// hooks folder, a pending include, a virtualenv, a secret.
    pub fn repository(&self) {
        let p = &self.w.proj;
        let wt = self.w.dir.path().join("wt");
        std::fs::create_dir_all(p.join(".signal")).unwrap();
        let script = format!(
            r#"git init -q .
printf 'one\n' > tracked; printf 'old\n' > old.txt; printf '#!/bin/sh\necho run\n' > run.sh
printf 'SECRET=hunter2\n' > .env; mkdir -p .githooks sub/.claude
git add tracked old.txt run.sh && git commit -q -m one
git config core.hooksPath .githooks
git config include.path ../inc.gitconfig
git worktree add -q {wt}
cd sub && git init -q . && printf 's\n' > s && git add s && git commit -q -m s
printf '{{}}\n' > .claude/settings.json; printf '{{}}\n' > .mcp.json; printf 'export A=1\n' > .envrc
cd .. && /usr/bin/python3 -m venv --without-pip venv"#,
            wt = wt.display()
        );
        if let Some((uid, gid)) = self.tools_as {
            std::os::unix::fs::chown(p, Some(uid), Some(gid)).unwrap();
            std::os::unix::fs::chown(p.join(".signal"), Some(uid), Some(gid)).unwrap();
            std::os::unix::fs::chown(p.join(".git"), Some(uid), Some(gid)).unwrap();
            std::os::unix::fs::chown(self.w.dir.path(), Some(uid), Some(gid)).unwrap();
        }
        self.sh(p, &script);
    }

    /// Where review runs are kept for the world's user.
    pub fn review_root(&self) -> PathBuf {
        self.w.home.join(".local/state/claude-shim/review")
    }

    /// The run of `cmd` (the planting script, outside the project) in
    /// `mode`, started and left running.
    pub fn start(&self, mode: Mode, script: &Path, mock: &MockApi) -> Child {
        let mut c = match mode {
            Mode::Sandbox => {
                let mut c = self.w.command(&shim_path(), mock);
                c.arg("--root").arg(&self.w.root);
                c.args(["sandbox", "--review", "--policy", "agent", "--", "sh"])
                    .arg(script);
                c
            }
            Mode::Claude => {
                let mut c = self.w.command(&shim_path(), mock);
                c.arg("--root").arg(&self.w.root).args(["claude", "--review", "--"]);
                c.args(["-p", "run the test command", "--allowedTools", "Bash"]);
                c.args(["--output-format", "stream-json", "--verbose"]);
                c
            }
        };
        let out = self.w.dir.path().join(format!("run-{}.out", unique_id("o")));
        c.stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(out.with_extension("err")).unwrap());
        c.spawn().unwrap()
    }

    /// The runs (their directories) whose agent has planted and now waits.
    pub fn wait_planted(&self, n: usize, child: &mut [&mut Child]) -> Vec<PathBuf> {
        let t = Instant::now();
        loop {
            let found: Vec<PathBuf> = std::fs::read_dir(self.review_root())
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.join("upper/.planted").exists())
                .collect();
            if found.len() >= n {
                return found;
            }
            for c in child.iter_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    panic!("the run ended before it planted: {status:?}");
                }
            }
            assert!(t.elapsed() < Duration::from_secs(120), "no run planted within 120 s");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Lets every waiting agent end.
    pub fn release(&self) {
        self.sh(&self.w.proj.join(".signal"), "echo go > go");
    }

    /// `claude-shim ARGS` as the world's user, in `dir`.
    pub fn shim_in(&self, dir: &Path, args: &[&str]) -> Output {
        let mut c = command_as(self.w.owner, &shim_path());
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.w.home)
            .current_dir(dir)
            .args(args)
            .stdin(Stdio::null());
        output_of(c, self.w.dir.path())
    }

    pub fn shim(&self, args: &[&str]) -> Output {
        self.shim_in(&self.w.proj, args)
    }

    pub fn markers_left(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.markers)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// The host's git in `dir`, as the owner, without this machine's config.
    pub fn git(&self, dir: &Path, args: &[&str]) -> Output {
        let mut c = command_as(self.tools_as, Path::new("git"));
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.w.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=host", "-c", "user.email=host@example.invalid"])
            .args(args)
            .stdin(Stdio::null());
        c.output().unwrap()
    }

    fn run_ok(&self, what: &str, mut c: std::process::Command) {
        let out = output_of(
            {
                c.stdin(Stdio::null());
                c
            },
            self.w.dir.path(),
        );
        assert!(out.status.success(), "host {what}: {}", tail(&out.stderr));
    }

    /// The host's real tools where the user works: git status and commit
    /// (top and nested repository), the virtualenv's python, `claude -p`,
    /// an interactive bash whose home is the project.
    pub fn host_tools(&self, when: &str) {
        let p = &self.w.proj;
        for dir in [p.clone(), p.join("sub")] {
            for args in [&["status"][..], &["commit", "-q", "--allow-empty", "-m", "host"]] {
                let out = self.git(&dir, args);
                assert!(
                    out.status.success(),
                    "host git {args:?} in {}: {}",
                    dir.display(),
                    text(&out.stderr)
                );
            }
        }
        let mut py = command_as(self.tools_as, &p.join("venv/bin/python"));
        py.env_clear().args(["-c", "import sys"]);
        self.run_ok("venv python", py);
        let mock = MockApi::start(&[]);
        let home = self.w.dir.path().join("host-home");
        if !home.exists() {
            std::fs::create_dir(&home).unwrap();
            if let Some((uid, gid)) = self.tools_as {
                std::os::unix::fs::chown(&home, Some(uid), Some(gid)).unwrap();
            }
        }
        for dir in [p.clone(), p.join("sub")] {
            let mut c = command_as(self.tools_as, Path::new("claude"));
            c.env_clear()
                .env("PATH", std::env::var("PATH").unwrap_or_default())
                .env("HOME", &home)
                .env("ANTHROPIC_BASE_URL", mock.url())
                .env("ANTHROPIC_API_KEY", "sk-ant-api03-host")
                .env("DISABLE_TELEMETRY", "1")
                .env("DISABLE_AUTOUPDATER", "1")
                .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
                .current_dir(&dir)
                .args(["-p", "hello", "--output-format", "text"]);
            self.run_ok("claude -p", c);
        }
        let mut bash = command_as(self.tools_as, Path::new("bash"));
        bash.env_clear()
            .env("HOME", p)
            .env("HISTFILE", self.w.dir.path().join("history"))
            .env("PATH", "/usr/bin:/bin")
            .current_dir(p)
            .args(["-i", "-c", "true"])
            .stderr(Stdio::null());
        self.run_ok("bash -i", bash);
        eprintln!("{when}: host git status and commit (top, sub), venv python, claude -p (top, sub), bash -i: ran");
    }

    /// Every entry under the project (links not followed) with its kind,
    /// mode and content, `.signal` left out; `.git` folders too when `git`.
    pub fn digest(&self, git: bool) -> BTreeMap<PathBuf, String> {
        let mut out = BTreeMap::new();
        let mut stack = vec![self.w.proj.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                let name = e.file_name();
                if d == self.w.proj && name == ".signal" || !git && name == ".git" {
                    continue;
                }
                let m = std::fs::symlink_metadata(&p).unwrap();
                let what = if m.is_dir() {
                    stack.push(p.clone());
                    "dir".to_owned()
                } else if m.is_symlink() {
                    format!("link {}", std::fs::read_link(&p).unwrap().display())
                } else if m.is_file() {
                    String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned()
                } else {
                    "other".to_owned()
                };
                let rel = p.strip_prefix(&self.w.proj).unwrap().to_path_buf();
                out.insert(rel, format!("{:o} {what}", m.mode()));
            }
        }
        out
    }
}

/// The stdout and stderr a run left, once it has ended.
pub fn finish(c: &mut Child, within: Duration) -> std::process::ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(s) = c.try_wait().unwrap() {
            return s;
        }
        assert!(t.elapsed() < within, "the run did not end within {within:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What a run wrote to its files (`start` names them after the child).
pub fn outputs(dir: &Path) -> (String, String) {
    let mut out = String::new();
    let mut err = String::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if n.starts_with("run-") && n.ends_with(".out") {
            out.push_str(&text(&std::fs::read(e.path()).unwrap()));
        } else if n.starts_with("run-") && n.ends_with(".err") {
            err.push_str(&text(&std::fs::read(e.path()).unwrap()));
        }
    }
    (out, err)
}
