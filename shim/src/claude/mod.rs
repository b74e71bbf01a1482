//! What `claude-shim claude` needs to know about Claude Code: where its
//! configuration lives, the agent's own copy of it (seeded from the host's,
//! never the credentials, with first-run state prepared so it starts
//! offline), the project a per-command sandbox is rooted at, and the policy
//! changes each mode makes. The sandboxing itself is `sandbox`'s.

pub mod home;
pub mod import;
pub mod own_sandbox;
pub mod resume;
pub mod shell_tmp;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use claude_shim_bundle::policy::values::{BindPath, EnvName, EnvPattern, NetworkMode, WorkdirPath};
use claude_shim_bundle::{Policy, RunAs};
use serde_json::{json, Value};

use crate::hostfs::{Dir, Kind};
use crate::network::gateway;

/// The key the agent holds: worthless, so that reading it gains nothing.
pub const PLACEHOLDER_KEY: &str = "sk-ant-claude-shim-placeholder-the-gateway-holds-the-key";

/// What of the host's configuration the agent's starts with. Never
/// `.credentials.json`, never `.claude.json` (it holds MCP servers and
/// per-project state of the host's agent).
pub const SEEDED: &[&str] = &[
    "CLAUDE.md",
    "settings.json",
    "agents",
    "commands",
    "plugins",
    "skills",
    "output-styles",
];

/// The caller's variables a sandboxed agent keeps (model choice and quiet
/// modes); the credential and the base URL are the gateway's.
pub const PASSED_ENV: &[&str] = &[
    "ANTHROPIC_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "DISABLE_TELEMETRY",
    "DISABLE_ERROR_REPORTING",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
];

/// Variables Claude Code 2.1 reads (seen in its binary) that turn off
/// traffic the agent does not need: the auto-updater and the official
/// plugin marketplace (both fetch from downloads.claude.ai), telemetry,
/// error reports, and the rest of its non-essential requests.
pub const QUIET_ENV: &[&str] = &[
    "DISABLE_AUTOUPDATER",
    "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
    "DISABLE_TELEMETRY",
    "DISABLE_ERROR_REPORTING",
];

/// The agent's configuration directory's name under the state directory:
/// `claude`, or `claude-<uid>` when the sandbox runs as another user than the
/// caller (root in that user's project), so that agents working as two
/// different users share nothing.
pub fn config_dir_name(run_as: RunAs) -> String {
    match run_as {
        RunAs::Owner { uid, .. } => format!("claude-{uid}"),
        RunAs::Caller { .. } | RunAs::RootMasked => "claude".to_owned(),
    }
}

/// The host's Claude Code configuration directory (`CLAUDE_CONFIG_DIR` or `~/.claude`).
pub fn host_config_dir(home: &Path) -> PathBuf {
    match std::env::var_os("CLAUDE_CONFIG_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => home.join(".claude"),
    }
}

/// The agent's `.claude.json` is read back as untrusted data, bounded
/// (Claude Code's grows with its history of projects).
const STATE_LIMIT: u64 = 64 << 20;
/// How deep a seeded directory is copied.
const SEED_DEPTH: usize = 16;

/// The agent's configuration directory (a handle: the sandbox writes there,
/// so nothing in it is followed), seeded from `host` where it has nothing
/// yet, first-run state prepared. A link planted as `.claude.json` is an
/// error: reading through it would copy a host file in.
pub fn prepare_config_dir(agent: &Dir, host: &Path) -> Result<()> {
    match Dir::open(host) {
        Ok(host) => {
            for name in SEEDED {
                let name = Path::new(name);
                if agent.stat(name)?.is_none() {
                    copy_tree(&host, agent, name, 0)?;
                }
            }
        }
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(e.into()),
    }
    let state = Path::new(".claude.json");
    let mut v: Value = match agent.read(state, STATE_LIMIT) {
        Ok(raw) => serde_json::from_slice(&raw).with_context(|| format!("parse {}", agent.join(state).display()))?,
        Err(e) if e.is_not_found() => json!({}),
        Err(e) => return Err(e.into()),
    };
    first_run_state(&mut v);
    agent.replace(state, &serde_json::to_vec_pretty(&v)?, 0o600)?;
    Ok(())
}

/// Onboarding done (it would contact api.anthropic.com directly, whatever
/// the base URL) and the placeholder key approved (the TUI asks once about
/// a key found in the environment; it keeps the key's last 20 characters).
pub fn first_run_state(v: &mut Value) {
    if !v.is_object() {
        *v = json!({});
    }
    v["hasCompletedOnboarding"] = json!(true);
    let tail: String = PLACEHOLDER_KEY[PLACEHOLDER_KEY.len() - 20..].to_owned();
    let responses = &mut v["customApiKeyResponses"];
    if !responses.is_object() {
        *responses = json!({"approved": [], "rejected": []});
    }
    let approved = &mut responses["approved"];
    if !approved.is_array() {
        *approved = json!([]);
    }
    let list = approved.as_array_mut().expect("made an array above");
    if !list.iter().any(|x| x.as_str() == Some(&tail)) {
        list.push(json!(tail));
    }
}

/// Copies `rel` from `host` to `agent`: regular files and directories;
/// links and anything else are skipped (a link could point at the
/// credentials), and so is what the agent already has.
fn copy_tree(host: &Dir, agent: &Dir, rel: &Path, depth: usize) -> Result<()> {
    let Some(st) = host.stat(rel)? else {
        return Ok(());
    };
    match st.kind {
        Kind::Dir if depth < SEED_DEPTH => {
            match agent.create_dir(rel, st.mode & 0o777 | 0o700) {
                Ok(()) => {}
                Err(e) if e.is_exists() => {}
                Err(e) => return Err(e.into()),
            }
            for (name, _) in host.list(rel)? {
                copy_tree(host, agent, &rel.join(name), depth + 1)?;
            }
        }
        Kind::File => {
            let mut to = match agent.create_new(rel, st.mode & 0o777) {
                Ok(f) => f,
                Err(e) if e.is_exists() => return Ok(()),
                Err(e) => return Err(e.into()),
            };
            let mut from = host.open_file(rel)?;
            std::io::copy(&mut from, &mut to)
                .with_context(|| format!("copy {} to {}", host.join(rel).display(), agent.join(rel).display()))?;
        }
        _ => {}
    }
    Ok(())
}

/// The caller's upstream: their `ANTHROPIC_BASE_URL`, or the API's.
pub fn upstream() -> Result<String> {
    let url = std::env::var("ANTHROPIC_BASE_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| "https://api.anthropic.com".to_owned());
    gateway::Upstream::parse(&url).context("use ANTHROPIC_BASE_URL as the gateway's upstream")?;
    Ok(url)
}

/// Refuses a start without a credential for the gateway to add.
pub fn require_credential() -> Result<()> {
    if gateway::Credential::from_env().is_none() {
        bail!(
            "start the API gateway: no credential in the environment (set one of {})",
            gateway::CREDENTIAL_VARS.join(", ")
        );
    }
    Ok(())
}

fn env_name(s: &str) -> EnvName {
    EnvName::try_from(s.to_owned()).expect("a fixed variable name")
}

/// The whole-agent policy: `base` plus the agent's own writable
/// configuration directory, the gateway's address and the placeholder key.
/// Network mode none becomes allowlist with nothing allowed (the gateway
/// lives in the proxy); public is refused (its egress has no gateway).
pub fn whole_agent_policy(mut base: Policy, config_dir: &Path) -> Result<Policy> {
    match base.network.mode {
        NetworkMode::Allowlist => {}
        NetworkMode::None => {
            base.network.mode = NetworkMode::Allowlist;
            base.network.allow.clear();
        }
        NetworkMode::Public => {
            bail!(
                "run claude in policy {}: network mode public has no API gateway; use allowlist or none",
                base.origin
            )
        }
    }
    let dir = config_dir.to_str().context("the state directory's path is not UTF-8")?;
    base.filesystem
        .writable
        .push(BindPath::try_from(dir.to_owned()).map_err(|e| anyhow::anyhow!("{e}"))?);
    // When the working directory is the home, its .claude.json stays read-only too.
    if let Ok(p) = WorkdirPath::new(".claude.json") {
        base.filesystem.protected.push(p);
    }
    for name in PASSED_ENV {
        base.environment
            .allow
            .push(EnvPattern::try_from((*name).to_owned()).expect("a fixed variable name"));
    }
    let set = &mut base.environment.set;
    set.insert(env_name("ANTHROPIC_BASE_URL"), gateway::BASE_URL.to_owned());
    set.insert(env_name("ANTHROPIC_API_KEY"), PLACEHOLDER_KEY.to_owned());
    set.insert(env_name("CLAUDE_CONFIG_DIR"), dir.to_owned());
    // Claude Code's own background traffic (updates, the plugin
    // marketplace, telemetry, error reports): off, so the proxy does not
    // refuse it and the user is not told about requests they did not cause.
    for name in QUIET_ENV {
        set.insert(env_name(name), "1".to_owned());
    }
    Ok(base)
}

/// Refuses the home directory (or a directory holding it) as the project
/// of `claude`: the sandbox could write the start-up files the host runs.
/// `/` is the compiler's to refuse.
pub fn refuse_home(project: &Path) -> Result<()> {
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_absolute()) else {
        return Ok(());
    };
    let home = std::fs::canonicalize(&home).unwrap_or(home);
    let why = "whose shell, git and desktop start-up files the host runs";
    // Said here, before any other check blames what lies below it (the
    // state directory, the temp directory).
    if project == Path::new("/") {
        bail!("run claude from a project directory: / is the whole host, which the sandbox would make writable");
    }
    if project == home {
        bail!(
            "run claude from a project directory: {} is your home directory, {why}",
            project.display()
        );
    }
    if home.starts_with(project) {
        bail!(
            "run claude from a project directory: {} holds your home directory {}, {why}",
            project.display(),
            home.display()
        );
    }
    Ok(())
}

/// The project a per-command sandbox is rooted at: the git top level of
/// `start`, else `start` itself.
pub fn project_root(start: &Path) -> PathBuf {
    for dir in start.ancestors() {
        if dir.join(".git").exists() {
            return dir.to_path_buf();
        }
    }
    start.to_path_buf()
}

/// Finds `claude` on PATH (absolute, symlinks resolved, so the same file
/// runs inside, where the host's / is mounted read-only).
pub fn find_claude() -> Result<PathBuf> {
    crate::program::on_path("claude")
        .ok_or_else(|| anyhow::anyhow!("find claude: it is not on PATH (npm install -g @anthropic-ai/claude-code)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_run_state_keeps_what_is_there() {
        let mut v = json!({"theme": "dark", "customApiKeyResponses": {"approved": ["x"], "rejected": ["y"]}});
        first_run_state(&mut v);
        first_run_state(&mut v);
        assert_eq!(v["theme"], "dark");
        assert_eq!(v["hasCompletedOnboarding"], true);
        assert_eq!(
            v["customApiKeyResponses"]["approved"],
            json!(["x", &PLACEHOLDER_KEY[PLACEHOLDER_KEY.len() - 20..]])
        );
        assert_eq!(v["customApiKeyResponses"]["rejected"], json!(["y"]));
        let mut bad = json!([1]);
        first_run_state(&mut bad);
        assert_eq!(bad["hasCompletedOnboarding"], true);
    }

    fn agent_dir(path: &Path) -> Dir {
        Dir::create_beneath(path.parent().unwrap(), Path::new(path.file_name().unwrap()), 0o700).unwrap()
    }

    #[test]
    fn seeding_copies_settings_never_credentials() {
        let t = tempfile::tempdir().unwrap();
        let (host, dir) = (t.path().join("host"), t.path().join("agent"));
        std::fs::create_dir_all(host.join("agents")).unwrap();
        std::fs::write(host.join("settings.json"), "{\"a\":1}").unwrap();
        std::fs::write(host.join("agents/x.md"), "x").unwrap();
        std::fs::write(host.join(".credentials.json"), "secret").unwrap();
        std::os::unix::fs::symlink(host.join(".credentials.json"), host.join("CLAUDE.md")).unwrap();
        prepare_config_dir(&agent_dir(&dir), &host).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("settings.json")).unwrap(), "{\"a\":1}");
        assert_eq!(std::fs::read_to_string(dir.join("agents/x.md")).unwrap(), "x");
        assert!(!dir.join(".credentials.json").exists());
        assert!(!dir.join("CLAUDE.md").exists(), "a symlink is not followed");
        // The agent's own edits stay.
        std::fs::write(dir.join("settings.json"), "{}").unwrap();
        prepare_config_dir(&agent_dir(&dir), &host).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("settings.json")).unwrap(), "{}");
        let state: Value = serde_json::from_slice(&std::fs::read(dir.join(".claude.json")).unwrap()).unwrap();
        assert_eq!(state["hasCompletedOnboarding"], true);
    }

    /// The links of issue 23, planted by the agent in its own directory:
    /// the next start writes through none and copies no host file in.
    #[test]
    fn links_the_agent_planted_are_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let (host, dir, home) = (t.path().join("host"), t.path().join("agent"), t.path().join("home"));
        std::fs::create_dir_all(&host).unwrap();
        std::fs::create_dir_all(home.join("victim")).unwrap();
        std::fs::write(host.join("settings.json"), "{}").unwrap();
        std::fs::write(host.join(".credentials.json"), "{\"secret\":\"oauth\"}").unwrap();
        std::fs::write(home.join(".bashrc"), "host\n").unwrap();
        prepare_config_dir(&agent_dir(&dir), &host).unwrap();
        let link = |target: &Path, name: &str| {
            let _ = std::fs::remove_file(dir.join(name));
            std::os::unix::fs::symlink(target, dir.join(name)).unwrap();
        };
        // The temp name the old code wrote through, and the seeded names.
        link(&home.join(".bashrc"), ".claude.json.claude-shim.tmp");
        link(&home.join("victim"), "agents");
        std::fs::remove_file(dir.join("settings.json")).unwrap();
        link(&home.join(".bashrc"), "settings.json");
        prepare_config_dir(&agent_dir(&dir), &host).unwrap();
        assert_eq!(std::fs::read_to_string(home.join(".bashrc")).unwrap(), "host\n");
        assert_eq!(std::fs::read_dir(home.join("victim")).unwrap().count(), 0);
        // .claude.json as a link to the credentials: refused, never read.
        link(&host.join(".credentials.json"), ".claude.json");
        let e = prepare_config_dir(&agent_dir(&dir), &host).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "read {}: a symbolic link is in the way (claude-shim follows none where a sandbox can write)",
                dir.join(".claude.json").display()
            )
        );
        assert!(dir.join(".claude.json").is_symlink());
        let copied = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .any(|e| e.file_type().unwrap().is_file() && std::fs::read_to_string(e.path()).unwrap().contains("oauth"));
        assert!(!copied, "the credentials were copied in");
        // The agent's directory itself replaced by a link: not followed either.
        std::fs::remove_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(&home, &dir).unwrap();
        let e = Dir::create_beneath(t.path(), Path::new("agent"), 0o700).err().unwrap();
        assert!(e.is_link(), "{e}");
    }

    #[test]
    fn the_project_is_the_git_top_level() {
        let t = tempfile::tempdir().unwrap();
        let sub = t.path().join("repo/a/b");
        std::fs::create_dir_all(&sub).unwrap();
        assert_eq!(project_root(&sub), sub);
        std::fs::create_dir(t.path().join("repo/.git")).unwrap();
        assert_eq!(project_root(&sub), t.path().join("repo"));
    }

    #[test]
    fn the_whole_agent_policy_has_the_gateway_and_no_key() {
        let p = whole_agent_policy(Policy::embedded_offline(), Path::new("/s/claude")).unwrap();
        assert_eq!(p.network.mode, NetworkMode::Allowlist);
        assert!(p.network.allow.is_empty());
        assert_eq!(p.environment.set[&env_name("ANTHROPIC_API_KEY")], PLACEHOLDER_KEY);
        assert_eq!(p.environment.set[&env_name("ANTHROPIC_BASE_URL")], gateway::BASE_URL);
        assert_eq!(p.environment.set[&env_name("CLAUDE_CONFIG_DIR")], "/s/claude");
    }
}
