//! A scratch world for `claude-shim claude` end to end: a home with a host
//! Claude Code configuration (settings, memory, an OAuth credential) and
//! shell start-up files, a project, a state root, all in a temporary
//! directory in the test user's home, owned by root or by the test user;
//! and a digest of the home, to show that nothing there changed.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::mock_api::MockApi;
use crate::{command_as, output_of, require_root, shim_path, test_user};

/// The host's OAuth credential: no file the sandbox can read may hold it.
pub const OAUTH: &str = "oauth-host-credential-7d1e0c";
/// The key the caller gives claude-shim (the gateway holds it).
pub const API_KEY: &str = "sk-ant-api03-e2e-world-key";

pub struct World {
    pub dir: tempfile::TempDir,
    pub home: PathBuf,
    pub proj: PathBuf,
    pub root: PathBuf,
    pub owner: Option<(u32, u32)>,
    /// The key the caller gives claude-shim (API_KEY unless a test sets another).
    pub key: String,
}

impl World {
    pub fn new(owner: Option<(u32, u32)>) -> World {
        require_root();
        // Not under /tmp, which is the sandbox's own: in the test user's
        // home (hack/setup makes it), which that user can reach.
        test_user();
        let dir = tempfile::Builder::new()
            .prefix("claude-shim-world-")
            .tempdir_in("/home/claude-shim-test")
            .unwrap();
        let home = dir.path().join("home");
        let proj = dir.path().join("proj");
        let root = dir.path().join("state");
        for d in [home.join(".claude"), proj.join(".git"), root.clone()] {
            std::fs::create_dir_all(d).unwrap();
        }
        let w = |p: PathBuf, s: &str| std::fs::write(p, s).unwrap();
        w(home.join(".claude/settings.json"), "{\"theme\": \"host\"}\n");
        w(home.join(".claude/CLAUDE.md"), "host memory\n");
        w(
            home.join(".claude/.credentials.json"),
            &format!("{{\"claudeAiOauth\": \"{OAUTH}\"}}\n"),
        );
        w(home.join(".claude.json"), "{\"numStartups\": 3}\n");
        w(home.join(".bashrc"), "# the host's bashrc\n");
        if let Some((uid, gid)) = owner {
            let ok = Command::new("chown")
                .args(["-R", &format!("{uid}:{gid}")])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(ok.success());
            std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        }
        let proj = std::fs::canonicalize(proj).unwrap();
        World {
            dir,
            home,
            proj,
            root,
            owner,
            key: API_KEY.to_owned(),
        }
    }

    /// `program` as the world's user, with a clean environment holding the
    /// key and pointing at the mock, in the project.
    pub fn command(&self, program: &Path, mock: &MockApi) -> Command {
        let mut c = command_as(self.owner, program);
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("ANTHROPIC_BASE_URL", mock.url())
            .env("ANTHROPIC_API_KEY", &self.key)
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .current_dir(&self.proj)
            .stdin(Stdio::null());
        if self.owner.is_some() {
            c.env("XDG_RUNTIME_DIR", &self.root);
        }
        c
    }

    /// `claude-shim claude [mode...] -- -p ... ARGS`, in `cwd`, to its end.
    pub fn claude_in(&self, cwd: &Path, mode: &[&str], args: &[&str], mock: &MockApi) -> Output {
        let mut c = self.command(&shim_path(), mock);
        c.current_dir(cwd);
        c.arg("--root").arg(&self.root).arg("claude").args(mode).arg("--");
        c.args(["-p", "run the test command", "--allowedTools", "Bash"]);
        c.args(["--output-format", "stream-json", "--verbose"]).args(args);
        output_of(c, self.dir.path())
    }

    pub fn claude(&self, mode: &[&str], mock: &MockApi) -> Output {
        self.claude_in(&self.proj, mode, &[], mock)
    }

    /// The agent's configuration directory of the whole-agent mode.
    pub fn agent_dir(&self) -> PathBuf {
        self.home.join(".local/state/claude-shim/claude")
    }

    /// Every entry under the home but claude-shim's state (and the
    /// directories above it), with its kind, owner, mode and content (a
    /// link: its target), links never followed.
    pub fn home_digest(&self) -> BTreeMap<PathBuf, String> {
        let skip = self.home.join(".local/state/claude-shim");
        let mut out = self.digest_all();
        out.retain(|p, _| !p.starts_with(&skip) && !skip.starts_with(p));
        out
    }

    /// `home_digest` without what the host's own `claude` keeps: its
    /// `~/.claude.json` and its state under `~/.claude` (the seeded
    /// settings, memory and credential stay in).
    pub fn home_digest_but_claudes(&self) -> BTreeMap<PathBuf, String> {
        let dot = self.home.join(".claude");
        let kept = ["settings.json", "CLAUDE.md", ".credentials.json"].map(|n| dot.join(n));
        let mut out = self.home_digest();
        out.retain(|p, _| {
            *p != self.home.join(".claude.json") && (!p.starts_with(&dot) || *p == dot || kept.contains(p))
        });
        out
    }

    fn digest_all(&self) -> BTreeMap<PathBuf, String> {
        let mut out = BTreeMap::new();
        let mut stack = vec![self.home.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
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
                out.insert(p, format!("{}:{} {:o} {what}", m.uid(), m.gid(), m.mode()));
            }
        }
        out
    }

    /// Regular files under `dir` (links not followed) that hold `needle`.
    pub fn files_holding(&self, dir: &Path, needle: &str) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let t = e.file_type().unwrap();
                if t.is_dir() {
                    stack.push(e.path());
                } else if t.is_file() && String::from_utf8_lossy(&std::fs::read(e.path()).unwrap()).contains(needle) {
                    out.push(e.path());
                }
            }
        }
        out
    }

    /// What claude-shim left in its state root: the shared caches (rootfs
    /// skeletons, the .env index) and the per-command entry are kept on purpose.
    pub fn left_in_state(&self) -> Vec<String> {
        std::fs::read_dir(self.root.join(".claude-shim"))
            .map(|r| {
                r.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| !crate::is_kept_cache(n) && n != "bin")
                    .collect()
            })
            .unwrap_or_default()
    }
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The end of a long output, for a failure message.
pub fn tail(b: &[u8]) -> String {
    let t = text(b);
    let start = t.char_indices().rev().nth(3000).map(|(i, _)| i).unwrap_or(0);
    t[start..].to_owned()
}
