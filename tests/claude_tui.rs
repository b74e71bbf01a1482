//! The Claude Code TUI under claude-shim, driven through tmux as a user at a
//! terminal would: `claude-shim claude` (whole agent) and `--per-command`
//! start the interactive `claude`, answer one prompt against the mock of the
//! Messages API (tests/mock-api), and end on Ctrl-C and on Ctrl-D
//! with nothing left behind: no process, state, cgroup, mount or shared
//! temporary directory.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use claude_shim_e2e::mock_api::MockApi;
use claude_shim_e2e::*;

const KEY: &str = "sk-ant-api03-tui-e2e-5b1d9c2f0a7e";

struct Tmux {
    socket: String,
}

impl Tmux {
    fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux (hack/setup installs it)")
    }

    fn pane(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "t"]).stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let mut a = vec!["send-keys", "-t", "t"];
        a.extend(keys);
        assert!(self.cmd(&a).status.success());
    }

    fn text(&self, s: &str) {
        assert!(self.cmd(&["send-keys", "-t", "t", "-l", s]).status.success());
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

/// Directories under `/sys/fs/cgroup` whose name holds a sandbox id.
fn sandbox_cgroups() -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut stack = vec![PathBuf::from("/sys/fs/cgroup")];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.contains("sandbox-") || name.contains("claude-") {
                    out.insert(e.path());
                }
                if stack.len() < 256 {
                    stack.push(e.path());
                }
            }
        }
    }
    out
}

fn shared_tmps() -> BTreeSet<PathBuf> {
    std::fs::read_dir("/tmp")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("claude-shim-"))
        .map(|e| e.path())
        .collect()
}

fn wait_for(what: &str, tmux: &Tmux, within: Duration, mut ok: impl FnMut(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let pane = tmux.pane();
        if ok(&pane) {
            return pane;
        }
        assert!(
            start.elapsed() < within,
            "timed out waiting for {what}; the screen:\n{pane}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// One TUI at a time: the clean-up check compares the machine's sandbox
/// cgroups before and after, and a sandbox of a test running beside it would
/// read as one left behind.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn interactive(per_command: bool, exit_key: &str) {
    require_root();
    // A failed test poisons the lock; the next one still runs alone.
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let parent = PathBuf::from("/home/claude-shim-test");
    test_user();
    let dir = tempfile::Builder::new()
        .prefix("claude-shim-tui-")
        .tempdir_in(&parent)
        .unwrap();
    let (home, proj, root) = (
        dir.path().join("home"),
        dir.path().join("proj"),
        dir.path().join("state"),
    );
    for d in [home.join(".claude"), proj.join(".git"), root.clone()] {
        std::fs::create_dir_all(d).unwrap();
    }
    let proj = std::fs::canonicalize(proj).unwrap();
    // The host's Claude Code has been used before (onboarding done, the key approved).
    let state = serde_json::json!({
        "hasCompletedOnboarding": true,
        "customApiKeyResponses": {"approved": [&KEY[KEY.len() - 20..]], "rejected": []},
        "projects": {proj.to_str().unwrap(): {"hasTrustDialogAccepted": true}},
    });
    std::fs::write(home.join(".claude.json"), state.to_string()).unwrap();

    let mock = MockApi::start(&["echo TUI-$((6*7))"]);
    let (cgroups_before, tmps_before) = (sandbox_cgroups(), shared_tmps());
    let status = dir.path().join("status");
    // claude-shim's own lines (the TUI draws on stdout, the terminal).
    let errors = dir.path().join("stderr");
    let mode = if per_command { "--per-command" } else { "" };
    // The whole agent's policy turns Claude Code's background traffic off
    // itself: the caller does not (claude on the host, per command, has no
    // internet here and is told to stay quiet).
    let quiet = if per_command {
        "DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"
    } else {
        ""
    };
    let script = dir.path().join("run.sh");
    std::fs::write(
        &script,
        format!(
            "cd '{proj}' || exit 99\n\
             env -i TERM=\"$TERM\" PATH='{path}' HOME='{home}' ANTHROPIC_BASE_URL='{url}' ANTHROPIC_API_KEY='{KEY}' \
             {quiet} \
             '{shim}' --root '{root}' claude {mode} -- --allowedTools Bash 2>'{errors}'\n\
             echo $? > '{status}'\n",
            proj = proj.display(),
            path = std::env::var("PATH").unwrap_or_default(),
            home = home.display(),
            url = mock.url(),
            shim = shim_path().display(),
            root = root.display(),
            status = status.display(),
            errors = errors.display(),
            quiet = quiet,
        ),
    )
    .unwrap();
    let tmux = Tmux {
        socket: unique_id("tui"),
    };
    let sh = format!("sh {}", script.display());
    let out = tmux.cmd(&["new-session", "-d", "-s", "t", "-x", "150", "-y", "45", &sh]);
    assert!(out.status.success(), "tmux: {}", String::from_utf8_lossy(&out.stderr));
    // The screen stays readable after claude-shim ends: the resume hint.
    let _ = tmux.cmd(&["set-option", "-t", "t", "remain-on-exit", "on"]);

    // Ready for input (a trust question for the agent's own copy of the project is answered yes).
    let start = Instant::now();
    loop {
        let pane = tmux.pane();
        if pane.contains("for shortcuts") || pane.lines().any(|l| l.trim_start_matches(['│', ' ']).starts_with('>')) {
            break;
        }
        if pane.contains("trust") && pane.contains("Yes") {
            tmux.keys(&["Enter"]);
            std::thread::sleep(Duration::from_millis(500));
        }
        assert!(
            start.elapsed() < Duration::from_secs(60) && !status.exists(),
            "the TUI did not get ready; the screen:\n{pane}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    tmux.text("run the test command");
    std::thread::sleep(Duration::from_millis(300));
    tmux.keys(&["Enter"]);
    wait_for("the answer", &tmux, Duration::from_secs(60), |p| {
        p.contains("mock done") && !mock.tool_results().is_empty()
    });
    let results = mock.tool_results();
    assert!(results[0].contains("TUI-42"), "tool_result: {results:?}");
    // The messages reached the upstream with the real key (whole agent: added by the gateway).
    for s in mock.seen().iter().filter(|s| s.path.starts_with("/v1/messages")) {
        assert_eq!(s.api_key.as_deref(), Some(KEY), "{s:?}");
    }

    // Ctrl-C (or Ctrl-D) twice: the first asks to press it again.
    let start = Instant::now();
    while !status.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{exit_key} did not end claude; the screen:\n{}",
            tmux.pane()
        );
        tmux.keys(&[exit_key]);
        std::thread::sleep(Duration::from_millis(700));
    }
    let code = std::fs::read_to_string(&status).unwrap();
    eprintln!("claude-shim claude {mode} exited {} on {exit_key}", code.trim());
    // The hint at exit names what resumes the session: under the whole
    // agent claude-shim (`claude --resume ID` on the host finds nothing);
    // per command, the line claude-shim adds after Claude Code's.
    let pane = tmux.pane();
    let want = if per_command {
        format!(
            "claude-shim --root {} claude --per-command -- --resume ID",
            root.display()
        )
    } else {
        format!(
            "Resume this session with:\nclaude-shim --root {} claude -- --resume ",
            root.display()
        )
    };
    let flat = pane.replace('\r', "");
    if per_command {
        let errors = std::fs::read_to_string(dir.path().join("stderr")).unwrap_or_default();
        assert!(errors.contains(&want), "stderr: {errors}");
    } else {
        assert!(flat.contains(&want), "the screen at exit:\n{pane}");
        assert!(!flat.contains("\nclaude --resume"), "the screen at exit:\n{pane}");
    }
    // Claude Code's own background traffic (its updater, the plugin
    // marketplace at downloads.claude.ai) is not reported as refused: the
    // user did nothing to cause it (issue 26).
    let errors = std::fs::read_to_string(&errors).unwrap();
    assert!(!errors.contains("refused egress"), "stderr: {errors}");
    if !per_command {
        assert_eq!(
            errors
                .matches("claude-shim: to watch refused hosts while the agent runs: claude-shim --root")
                .count(),
            1,
            "stderr: {errors}"
        );
    }

    // Nothing left behind.
    let needle = dir.path().to_str().unwrap().to_owned();
    let start = Instant::now();
    loop {
        let left: Vec<String> = processes()
            .into_iter()
            .filter(|p| p.mentions(&needle) && !p.cmdline.contains("tmux"))
            .map(|p| format!("{}: {}", p.pid, p.describe()))
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "processes left: {left:#?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let ours = root.join(".claude-shim");
    let state_left: Vec<String> = std::fs::read_dir(&ours)
        .map(|r| {
            r.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                // Kept on purpose: the shared caches and the per-command entry (bin/).
                .filter(|n| !is_kept_cache(n) && n != "bin")
                .collect()
        })
        .unwrap_or_default();
    assert!(
        state_left.is_empty(),
        "state left in {}: {state_left:?}",
        ours.display()
    );
    let mounts: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains(&needle))
        .map(str::to_owned)
        .collect();
    assert!(mounts.is_empty(), "mounts left: {mounts:#?}");
    // A sandbox removes its cgroups after its process ends: give it time.
    let start = Instant::now();
    loop {
        let cgroups: Vec<_> = sandbox_cgroups().difference(&cgroups_before).cloned().collect();
        if cgroups.is_empty() {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "cgroups left: {cgroups:#?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let tmps: Vec<_> = shared_tmps().difference(&tmps_before).cloned().collect();
    assert!(tmps.is_empty(), "shared temporary directories left: {tmps:#?}");
}

#[test]
fn whole_agent_tui_ctrl_c() {
    interactive(false, "C-c");
}

#[test]
fn whole_agent_tui_ctrl_d() {
    interactive(false, "C-d");
}

#[test]
fn per_command_tui_ctrl_c() {
    interactive(true, "C-c");
}

#[test]
fn per_command_tui_ctrl_d() {
    interactive(true, "C-d");
}
