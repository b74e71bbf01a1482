//! `claude`: Claude Code in a sandbox. The whole agent (default) runs inside,
//! with its own configuration directory and the API gateway holding the key
//! outside; `--per-command` runs `claude` on the host and each Bash command
//! through `__shell` (`claude-shim-shell`), Claude Code's
//! CLAUDE_CODE_SHELL_PREFIX, in a sandbox rooted at the project.

use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use claude_shim_bundle::policy::values::HomeMode;

use crate::claude;
use crate::commands::sandbox::{caller_has_terminal, run_policy};
use crate::network::gateway;
use crate::runtime::{foreground, Runtime};
use crate::sandbox;

/// The name the entry point is called by (a link to claude-shim).
pub const SHELL_ENTRY: &str = "claude-shim-shell";
/// What `claude --per-command` tells the entry point: the project root, the
/// directory Claude Code keeps its working-directory file in, the policy,
/// the runtime's state root (where the entry and the calls' temp directories are).
pub const PROJECT_ENV: &str = "CLAUDE_SHIM_PROJECT";
pub const SHARED_TMP_ENV: &str = "CLAUDE_SHIM_SHELL_TMPDIR";
pub const POLICY_ENV: &str = "CLAUDE_SHIM_POLICY";
pub const ROOT_ENV: &str = "CLAUDE_SHIM_SHELL_ROOT";
/// `--systemd-cgroup` of the `claude --per-command` that made the entry ("1" or "0").
pub const SYSTEMD_CGROUP_ENV: &str = "CLAUDE_SHIM_SHELL_SYSTEMD_CGROUP";

pub fn claude(rt: &Runtime, args: &crate::cli::Claude) -> Result<i32> {
    if args.per_command {
        if args.review {
            bail!(
                "run claude --per-command --review: Claude Code's own Write and Edit tools run on the host in --per-command and would write the project; use claude --review (the whole agent in the sandbox)"
            );
        }
        if let Some(p) = args.publish.first() {
            bail!(
                "use --publish {p} with --per-command: nothing a Bash call starts outlives the call, so no server \
                 stays to publish; run the whole agent (without --per-command)"
            );
        }
        return per_command(rt, args);
    }
    foreground::defer_termination()?;
    let cwd = std::env::current_dir().context("read the working directory")?;
    claude::refuse_home(&std::fs::canonicalize(&cwd).with_context(|| format!("open {}", cwd.display()))?)?;
    claude::require_credential()?;
    let upstream = claude::upstream()?;
    let exe = claude::find_claude()?;
    let inv_home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/".into());
    let mut argv = vec![exe.to_string_lossy().into_owned()];
    argv.extend(claude::own_sandbox::SETTINGS_ARGS.map(str::to_owned));
    argv.extend(args.args.iter().cloned());
    let project = std::fs::canonicalize(&cwd).with_context(|| format!("open {}", cwd.display()))?;
    if let Some(f) = claude::own_sandbox::enabled_in(&project, &claude::host_config_dir(&inv_home)) {
        eprintln!("{}", crate::terminal::escaped(&claude::own_sandbox::notice(&f)));
    }
    let inv = sandbox::invocation(None, None, &argv, caller_has_terminal())?;
    let run_as = sandbox::run_as(&inv);
    let mut base = sandbox::load_policy(args.policy.as_deref())?;
    sandbox::add_published(&mut base, &args.publish)?;
    if args.review {
        base.filesystem.workspace = claude_shim_bundle::policy::values::Workspace::Review;
    }
    let name = claude::config_dir_name(run_as);
    // Refused before anything is made: the sandbox reaches the directory
    // through the host's folders above it, unless the home is empty (then
    // through the sandbox's own tmpfs and the mount points made in it).
    let below = (base.filesystem.home == HomeMode::Empty).then_some(inv_home.as_path());
    sandbox::hand_over::check_reachable(&sandbox::state_path(&name)?, run_as, below)?;
    let dir = sandbox::state_dir(&name)?;
    claude::prepare_config_dir(&dir, &claude::host_config_dir(&inv_home))?;
    // The agent writes it as whoever the sandbox runs as.
    sandbox::hand_over::hand_over(&dir, run_as)?;
    // From the caller's policy, never from anything the sandbox can write.
    let server_tools: Vec<&str> = base.claude.server_tools.iter().map(|t| t.as_str()).collect();
    let server_tools = server_tools.join(",");
    let mut policy = claude::whole_agent_policy(base, dir.path())?;
    claude::home::keep_visible(&mut policy, &inv_home, &claude::home::install_dirs(&exe), false)?;
    // The TUI owns the terminal while it runs: refusals are printed at
    // exit, and as they happen by `denials --follow` in another terminal.
    // The "sandbox-" prefix: gc knows a killed run's leftovers by it.
    let id = crate::commands::run::generated_id("sandbox");
    let root = if rt.root == Runtime::new(None, false)?.root {
        String::new()
    } else {
        format!(" --root {}", rt.root.display())
    };
    let announce =
        format!("claude-shim: to watch refused hosts while the agent runs: claude-shim{root} denials --follow {id}");
    // Claude Code's hint at exit names `claude --resume ID`, which on the
    // host finds no such session: the relay names the command that does.
    let own_root = (!root.is_empty()).then_some(rt.root.as_path());
    let mut hint = claude::resume::Hint::new(&claude::resume::command(own_root, false, args.policy.as_deref()));
    foreground::filter_output(Box::new(move |chunk, end| hint.feed(chunk, end)));
    let run = sandbox::run::Run {
        id: &id,
        announce: Some(&announce),
        policy: &policy,
        inv: &inv,
    };
    sandbox::run::run(rt, &run, &mut |c| {
        let mut ann = c.spec.annotations().clone().unwrap_or_default();
        ann.insert(gateway::ANNOTATION.to_owned(), upstream.clone());
        ann.insert(gateway::TOOLS_ANNOTATION.to_owned(), server_tools.clone());
        c.spec.set_annotations(Some(ann));
        Ok(())
    })
}

/// The entry point CLAUDE_CODE_SHELL_PREFIX names: a link to this binary in
/// the runtime's state directory (`<root>/.claude-shim/bin`: /run is a
/// private tmpfs in every sandbox and /run/user is masked, so no sandbox can
/// replace it), made (again) when it is missing or points elsewhere.
fn shell_entry(rt: &Runtime) -> Result<PathBuf> {
    let exe = crate::seal::exe_on_disk()?;
    std::fs::create_dir_all(&rt.root).with_context(|| format!("create state directory {}", rt.root.display()))?;
    let bin = crate::hostfs::Dir::create_beneath(&rt.root, Path::new(".claude-shim/bin"), 0o755)?;
    let link = Path::new(SHELL_ENTRY);
    if bin.read_link(link)?.as_deref() != Some(exe.as_path()) {
        bin.replace_symlink(link, &exe)?;
    }
    Ok(bin.join(link))
}

/// Refuses a place the sandboxes of `project` could write: the shell entry
/// and the directory Claude Code reads are the host's.
fn outside_project(what: &str, path: &Path, project: &Path) -> Result<()> {
    let path = std::fs::canonicalize(path).with_context(|| format!("open {}", path.display()))?;
    if path.starts_with(project) {
        bail!(
            "run claude --per-command: {what} {} lies in the project {}, where its sandboxes can write",
            path.display(),
            project.display()
        );
    }
    Ok(())
}

fn per_command(rt: &Runtime, args: &crate::cli::Claude) -> Result<i32> {
    let policy = sandbox::load_policy(args.policy.as_deref())?;
    if sandbox::run::with_admin_workspace(&policy)?.filesystem.workspace
        == claude_shim_bundle::policy::values::Workspace::Review
    {
        bail!(
            "run claude --per-command: its policy or the admin policy keeps writes for review, and Claude Code's own Write and Edit tools run on the host in --per-command; use claude --review (the whole agent in the sandbox)"
        );
    }
    let exe = claude::find_claude()?;
    let cwd = std::env::current_dir().context("read the working directory")?;
    let cwd = std::fs::canonicalize(&cwd).with_context(|| format!("open {}", cwd.display()))?;
    let project = claude::project_root(&cwd);
    claude::refuse_home(&project)?;
    std::fs::create_dir_all(&rt.root).with_context(|| format!("create state directory {}", rt.root.display()))?;
    outside_project("the state directory", &rt.root, &project)?;
    // Absolute: Claude Code runs the entry from the command's directory, and
    // the entry takes ROOT_ENV only when it is absolute (a relative --root
    // sent every call to the default state root).
    let root = std::fs::canonicalize(&rt.root).with_context(|| format!("open {}", rt.root.display()))?;
    let own = Runtime::new(Some(&root), rt.systemd_cgroup)?;
    let rt = &own;
    let entry = shell_entry(rt)?;
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/".into());
    if let Some(f) = claude::own_sandbox::enabled_in(&project, &claude::host_config_dir(&home)) {
        eprintln!("{}", crate::terminal::escaped(&claude::own_sandbox::notice(&f)));
    }
    // Claude Code writes the shell's working directory into a file in its
    // temp directory after each command (claude::shell_tmp): each call gets
    // a directory of its own bound there, and only that file comes back.
    let uid = nix::unistd::geteuid().as_raw();
    let shared = std::env::temp_dir().join(format!("claude-shim-{uid}-{}", std::process::id()));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&shared)
        .with_context(|| format!("create {}", shared.display()))?;
    // Each Bash call's sandbox reports what it moved aside to claude (the
    // agent); the user hears of it here, once claude has exited.
    let quarantined_before = sandbox::quarantine::store::run_names().unwrap_or_default();
    // Every Bash call runs in one sandbox made now (crate::session).
    let mut session = None;
    let status = outside_project("the temp directory", &shared, &project).and_then(|()| {
        let plan = crate::session::start::Plan {
            policy: args.policy.as_deref(),
            project: &project,
            shared: &shared,
        };
        let s = session.insert(crate::session::start::Session::start(rt, &plan)?);
        let mut cmd = std::process::Command::new(&exe);
        cmd.env(crate::session::SESSION_ENV, s.socket());
        cmd.args(claude::own_sandbox::SETTINGS_ARGS)
            .args(&args.args)
            .env("CLAUDE_CODE_SHELL_PREFIX", &entry)
            .env("CLAUDE_CODE_TMPDIR", &shared)
            .env(PROJECT_ENV, &project)
            .env(SHARED_TMP_ENV, &shared)
            .env(ROOT_ENV, &rt.root)
            .env(SYSTEMD_CGROUP_ENV, if rt.systemd_cgroup { "1" } else { "0" });
        match &args.policy {
            Some(p) => cmd.env(POLICY_ENV, p),
            None => cmd.env_remove(POLICY_ENV),
        };
        cmd.spawn()
            .with_context(|| format!("execute {}", exe.display()))
            .and_then(|mut child| {
                // A session sandbox that ends under claude ends the session:
                // its next call could not run.
                let pid = nix::unistd::Pid::from_raw(child.id() as i32);
                s.watch(move || {
                    eprintln!("claude-shim: the session sandbox ended; stopping claude");
                    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
                })?;
                // The terminal's Ctrl-C is claude's to handle; this process only
                // waits. Ignored after the spawn, so claude keeps default dispositions.
                use nix::sys::signal::{signal, SigHandler, Signal};
                for s in [Signal::SIGINT, Signal::SIGQUIT] {
                    // SAFETY: SIG_IGN installs no handler code.
                    let _ = unsafe { signal(s, SigHandler::SigIgn) };
                }
                child.wait().context("wait for claude")
            })
    });
    if let Some(s) = session {
        s.stop(rt);
    }
    // No sandbox ever saw this directory: Claude Code's alone.
    if let Err(e) = std::fs::remove_dir_all(&shared) {
        tracing::warn!("remove {}: {e}", shared.display());
    }
    match sandbox::quarantine::store::session_lines(&quarantined_before, &project) {
        Ok(lines) => lines.iter().for_each(|l| eprintln!("{}", crate::terminal::escaped(l))),
        Err(e) => eprintln!("claude-shim: warning: failed to read the quarantine: {e:#}"),
    }
    let status = status?;
    // Claude Code's own hint (`claude --resume ID`) resumes it unsandboxed.
    if caller_has_terminal() {
        let default = Runtime::new(None, false).map(|d| d.root == rt.root).unwrap_or(false);
        let own_root = (!default).then_some(rt.root.as_path());
        let command = claude::resume::command(own_root, true, args.policy.as_deref());
        eprintln!("{}", claude::resume::per_command_note(&command));
    }
    Ok(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

/// `claude-shim-shell 'COMMAND'`: one Bash tool call in a sandbox rooted at
/// the project, in the directory Claude Code runs it from.
pub fn shell(rt: &Runtime, command: &[String]) -> Result<i32> {
    let [command] = command else {
        bail!(
            "run a shell command: {SHELL_ENTRY} takes the whole command as one argument, got {}",
            command.len()
        );
    };
    if let Some(socket) = std::env::var_os(crate::session::SESSION_ENV) {
        return shell_in_session(rt, Path::new(&socket), command);
    }
    foreground::defer_termination()?;
    // The state root of the `claude --per-command` that made the entry.
    let own;
    let rt = match std::env::var_os(ROOT_ENV).filter(|r| Path::new(r).is_absolute()) {
        Some(root) => {
            let systemd = match std::env::var(SYSTEMD_CGROUP_ENV).as_deref() {
                Ok("1") => true,
                Ok(_) => false,
                Err(_) => rt.systemd_cgroup,
            };
            own = Runtime::new(Some(Path::new(&root)), systemd)?;
            &own
        }
        None => rt,
    };
    let cwd = std::env::current_dir().context("read the working directory")?;
    let cwd = std::fs::canonicalize(&cwd).with_context(|| format!("open {}", cwd.display()))?;
    let project = match std::env::var_os(PROJECT_ENV) {
        Some(p) => PathBuf::from(p),
        None => claude::project_root(&cwd),
    };
    claude::refuse_home(&project)?;
    let mut policy = sandbox::load_policy(std::env::var(POLICY_ENV).ok().as_deref())?;
    let shell = if Path::new("/bin/bash").exists() {
        "/bin/bash"
    } else {
        "/bin/sh"
    };
    // The command's shell is not the container's init: the kernel ignores
    // signals init has no handler for, so `kill -INT $$` would do nothing
    // (unsandboxed it ends the shell with 130). `; exit $?` keeps the outer
    // shell from exec'ing into the inner one.
    let argv = [
        shell.to_owned(),
        "-c".to_owned(),
        format!("{shell} -c \"$1\"; exit $?"),
        shell.to_owned(),
        command.clone(),
    ];
    let inv = sandbox::invocation(Some(&project), None, &argv, false)?;
    let call = match std::env::var_os(SHARED_TMP_ENV) {
        Some(shared) => Some(
            claude::shell_tmp::CallTmp::new(&rt.root, Path::new(&shared), command)
                .with_context(|| format!("use {SHARED_TMP_ENV}"))?,
        ),
        None => None,
    };
    // The call writes its cwd file there as whoever the sandbox runs as.
    let handed = match &call {
        Some(c) => c
            .own()
            .and_then(|d| sandbox::hand_over::hand_over(&d, sandbox::run_as(&inv))),
        None => Ok(()),
    };
    if let Err(e) = handed {
        if let Some(c) = call {
            c.finish();
        }
        return Err(e);
    }
    if let Some(call) = &call {
        let shared = call
            .shared()
            .to_str()
            .context("the temp directory's path is not UTF-8")?;
        policy.filesystem.writable.push(
            claude_shim_bundle::policy::values::BindPath::try_from(shared.to_owned())
                .map_err(|e| anyhow::anyhow!("use {SHARED_TMP_ENV}: {e}"))?,
        );
    }
    if let Some(home) = std::env::var_os("HOME").map(PathBuf::from) {
        let snapshots = claude::home::snapshots_dir(&claude::host_config_dir(&home));
        claude::home::keep_visible(&mut policy, &home, &[snapshots], true)?;
    }
    let code = run_policy(rt, &policy, &inv, &mut |c| {
        if let Some(p) = c.spec.process_mut() {
            p.set_cwd(cwd.clone());
        }
        match &call {
            Some(call) => call.bind(&mut c.spec),
            None => Ok(()),
        }
    });
    if let Some(call) = call {
        call.finish();
    }
    code
}

/// `claude-shim-shell 'COMMAND'` in the session sandbox of the `claude
/// --per-command` that set CLAUDE_SHIM_SESSION: never anywhere else.
fn shell_in_session(rt: &Runtime, socket: &Path, command: &str) -> Result<i32> {
    let root = std::env::var_os(ROOT_ENV).map(PathBuf::from);
    let project = std::env::var_os(PROJECT_ENV).map(PathBuf::from);
    let shared = std::env::var_os(SHARED_TMP_ENV).map(PathBuf::from);
    let policy = std::env::var(POLICY_ENV).ok();
    let Some(project) = project.filter(|p| p.is_absolute()) else {
        bail!("run a command in the session sandbox: {PROJECT_ENV} is not an absolute path");
    };
    crate::session::client::run(&crate::session::client::Call {
        root: root.as_deref().filter(|r| r.is_absolute()).unwrap_or(&rt.root),
        socket,
        project: &project,
        shared: shared.as_deref(),
        policy: policy.as_deref(),
        command,
    })
}

/// `policy import [FILE]`: the TOML policy on stdout, what it could not
/// translate as comments in it and on stderr.
pub fn policy_import(file: Option<&Path>) -> Result<i32> {
    use claude::import::{Scope, Source};
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/".into());
    let cwd = std::env::current_dir().context("read the working directory")?;
    let config_dir = claude::host_config_dir(&home);
    let env = claude::import::Env {
        home: home.clone(),
        cwd: cwd.clone(),
    };
    let read = |path: &Path| -> Result<serde_json::Value> {
        let raw = std::fs::read(path).with_context(|| format!("read {}", path.display()))?;
        serde_json::from_slice(&raw).with_context(|| format!("parse {}", path.display()))
    };
    let mut sources = Vec::new();
    match file {
        Some(f) => {
            let value = read(f)?;
            let abs = cwd.join(f);
            let dir = abs.parent().unwrap_or(Path::new("/")).to_path_buf();
            let (scope, root) = if claude::import::looks_like_srt(&value) {
                (Scope::Srt, cwd.clone())
            } else if dir == config_dir {
                (Scope::User, config_dir.clone())
            } else if dir.file_name().is_some_and(|n| n == ".claude") {
                // A project's .claude/settings(.local).json: relative to the project.
                (Scope::Project, dir.parent().unwrap_or(Path::new("/")).to_path_buf())
            } else {
                (Scope::Named, dir)
            };
            sources.push(Source {
                name: f.display().to_string(),
                scope,
                root,
                value,
            });
        }
        None => {
            // Claude Code's order of precedence, highest first: managed
            // (the file, then its drop-ins, the last one winning), the
            // project's local and shared settings (in the directory claude
            // starts in), the user's.
            let managed = Path::new(claude::import::MANAGED_DIR);
            let mut drop_ins: Vec<PathBuf> = std::fs::read_dir(managed.join("managed-settings.d"))
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                    n.ends_with(".json") && !n.starts_with('.') && p.is_file()
                })
                .collect();
            drop_ins.sort();
            drop_ins.reverse();
            let mut candidates: Vec<(PathBuf, Scope, PathBuf)> =
                drop_ins.into_iter().map(|p| (p, Scope::Managed, cwd.clone())).collect();
            candidates.push((managed.join("managed-settings.json"), Scope::Managed, cwd.clone()));
            candidates.push((cwd.join(".claude/settings.local.json"), Scope::Local, cwd.clone()));
            candidates.push((cwd.join(".claude/settings.json"), Scope::Project, cwd.clone()));
            candidates.push((config_dir.join("settings.json"), Scope::User, config_dir.clone()));
            for (path, scope, root) in candidates {
                // The home's .claude/settings.json is the user's, not a project's.
                if !path.is_file() || sources.iter().any(|s: &Source| Path::new(&s.name) == path) {
                    continue;
                }
                if scope == Scope::Project && path == config_dir.join("settings.json") {
                    continue;
                }
                sources.push(Source {
                    name: path.display().to_string(),
                    scope,
                    root,
                    value: read(&path)?,
                });
            }
            if sources.is_empty() {
                bail!(
                    "import a policy: no Claude Code settings file found ({}, .claude/settings.local.json, .claude/settings.json, {}); name one",
                    managed.join("managed-settings.json").display(),
                    config_dir.join("settings.json").display()
                );
            }
        }
    }
    let (text, notes) = claude::import::import(&sources, &env).map_err(|e| anyhow::anyhow!("import a policy: {e}"))?;
    print!("{text}");
    for n in &notes {
        eprintln!("claude-shim: not translated: {n}");
    }
    Ok(0)
}
