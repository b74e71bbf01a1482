//! `claude`: Claude Code in a sandbox. The whole agent (default) runs inside,
//! with its own configuration directory and the API gateway holding the key
//! outside; `--per-command` runs `claude` on the host and each Bash command
//! through `__shell` (`claude-shim-shell`), Claude Code's
//! CLAUDE_CODE_SHELL_PREFIX, in a sandbox rooted at the project.

use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::claude;
use crate::commands::sandbox::{caller_has_terminal, run_policy};
use crate::network::gateway;
use crate::runtime::{foreground, Runtime};
use crate::sandbox;

/// The name the entry point is called by (a link to claude-shim).
pub const SHELL_ENTRY: &str = "claude-shim-shell";
/// What `claude --per-command` tells the entry point: the project root, the
/// directory Claude Code keeps its working-directory file in, the policy.
pub const PROJECT_ENV: &str = "CLAUDE_SHIM_PROJECT";
pub const SHARED_TMP_ENV: &str = "CLAUDE_SHIM_SHELL_TMPDIR";
pub const POLICY_ENV: &str = "CLAUDE_SHIM_POLICY";

pub fn claude(rt: &Runtime, args: &crate::cli::Claude) -> Result<i32> {
    if args.per_command {
        return per_command(args);
    }
    foreground::defer_termination()?;
    claude::require_credential()?;
    let upstream = claude::upstream()?;
    let exe = claude::find_claude()?;
    let inv_home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/".into());
    let dir = claude::state_home()?.join("claude");
    claude::prepare_config_dir(&dir, &claude::host_config_dir(&inv_home))?;
    let policy = claude::whole_agent_policy(sandbox::load_policy(args.policy.as_deref())?, &dir)?;
    let mut argv = vec![exe.to_string_lossy().into_owned()];
    argv.extend(args.args.iter().cloned());
    let inv = sandbox::invocation(None, None, &argv, caller_has_terminal())?;
    run_policy(rt, &policy, &inv, &mut |c| {
        let mut ann = c.spec.annotations().clone().unwrap_or_default();
        ann.insert(gateway::ANNOTATION.to_owned(), upstream.clone());
        c.spec.set_annotations(Some(ann));
        Ok(())
    })
}

/// The entry point CLAUDE_CODE_SHELL_PREFIX names: a link to this binary in
/// the state directory, made (again) when it is missing or points elsewhere.
fn shell_entry() -> Result<PathBuf> {
    let exe = crate::seal::exe_on_disk()?;
    let bin = claude::state_home()?.join("bin");
    std::fs::create_dir_all(&bin).with_context(|| format!("create {}", bin.display()))?;
    let link = bin.join(SHELL_ENTRY);
    if std::fs::read_link(&link).ok().as_deref() != Some(exe.as_path()) {
        let tmp = bin.join(format!(".{SHELL_ENTRY}.{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&exe, &tmp).with_context(|| format!("link {}", tmp.display()))?;
        std::fs::rename(&tmp, &link).with_context(|| format!("link {}", link.display()))?;
    }
    Ok(link)
}

fn per_command(args: &crate::cli::Claude) -> Result<i32> {
    let exe = claude::find_claude()?;
    let cwd = std::env::current_dir().context("read the working directory")?;
    let cwd = std::fs::canonicalize(&cwd).with_context(|| format!("open {}", cwd.display()))?;
    let project = claude::project_root(&cwd);
    let entry = shell_entry()?;
    // Claude Code writes the shell's working directory into a file in its
    // temp directory after each command; the sandboxes get this directory
    // writable so that a `cd` carries over to the next command.
    let uid = nix::unistd::geteuid().as_raw();
    let shared = std::env::temp_dir().join(format!("claude-shim-{uid}-{}", std::process::id()));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&shared)
        .with_context(|| format!("create {}", shared.display()))?;
    let mut cmd = std::process::Command::new(&exe);
    cmd.args(&args.args)
        .env("CLAUDE_CODE_SHELL_PREFIX", &entry)
        .env("CLAUDE_CODE_TMPDIR", &shared)
        .env(PROJECT_ENV, &project)
        .env(SHARED_TMP_ENV, &shared);
    match &args.policy {
        Some(p) => cmd.env(POLICY_ENV, p),
        None => cmd.env_remove(POLICY_ENV),
    };
    let status = cmd
        .spawn()
        .with_context(|| format!("execute {}", exe.display()))
        .and_then(|mut child| {
            // The terminal's Ctrl-C is claude's to handle; this process only
            // waits. Ignored after the spawn, so claude keeps default dispositions.
            use nix::sys::signal::{signal, SigHandler, Signal};
            for s in [Signal::SIGINT, Signal::SIGQUIT] {
                // SAFETY: SIG_IGN installs no handler code.
                let _ = unsafe { signal(s, SigHandler::SigIgn) };
            }
            child.wait().context("wait for claude")
        });
    if let Err(e) = std::fs::remove_dir_all(&shared) {
        tracing::warn!("remove {}: {e}", shared.display());
    }
    let status = status?;
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
    foreground::defer_termination()?;
    let cwd = std::env::current_dir().context("read the working directory")?;
    let cwd = std::fs::canonicalize(&cwd).with_context(|| format!("open {}", cwd.display()))?;
    let project = match std::env::var_os(PROJECT_ENV) {
        Some(p) => PathBuf::from(p),
        None => claude::project_root(&cwd),
    };
    let mut policy = sandbox::load_policy(std::env::var(POLICY_ENV).ok().as_deref())?;
    if let Some(shared) = std::env::var_os(SHARED_TMP_ENV) {
        let shared = Path::new(&shared);
        let shared = shared
            .to_str()
            .filter(|_| shared.is_absolute() && shared.is_dir())
            .with_context(|| format!("use {SHARED_TMP_ENV}={}: not an absolute directory", shared.display()))?;
        policy.filesystem.writable.push(
            claude_shim_bundle::policy::values::BindPath::try_from(shared.to_owned())
                .map_err(|e| anyhow::anyhow!("use {SHARED_TMP_ENV}: {e}"))?,
        );
    }
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
    run_policy(rt, &policy, &inv, &mut |c| {
        if let Some(p) = c.spec.process_mut() {
            p.set_cwd(cwd.clone());
        }
        Ok(())
    })
}
