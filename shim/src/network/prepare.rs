//! `prepare`, the first step of a container's network: reads the mode from
//! the spec's annotations before libcontainer sees the spec, refuses what
//! cannot be enforced, finds the tools the mode runs, and hands `attach` a
//! `Plan`.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use libcontainer::oci_spec::runtime::{Capability, LinuxNamespaceType, Spec};

use super::gateway;
use super::netns;
use super::plan::Plan;
use super::policy::{Mode, Policy, RawPolicy, MODE_ANNOTATION, POLICY_ANNOTATION};
use claude_shim_bundle::annotations::{NETWORK_PUBLISH as PUBLISH_ANNOTATION, WORKDIR as WORKDIR_ANNOTATION};

/// The environment of an allowlist sandbox (the contract with the policy crate).
pub const PROXY_ENV: &[(&str, &str)] = &[
    ("HTTP_PROXY", "http://127.0.0.1:3128"),
    ("HTTPS_PROXY", "http://127.0.0.1:3128"),
    ("ALL_PROXY", "socks5h://127.0.0.1:1080"),
    ("NO_PROXY", "localhost,127.0.0.1,::1"),
    ("http_proxy", "http://127.0.0.1:3128"),
    ("https_proxy", "http://127.0.0.1:3128"),
    ("all_proxy", "socks5h://127.0.0.1:1080"),
    ("no_proxy", "localhost,127.0.0.1,::1"),
];

/// Environment variables that override where the tools are found.
pub const PASTA_ENV: &str = "CLAUDE_SHIM_PASTA";
pub const NFT_ENV: &str = "CLAUDE_SHIM_NFT";

/// A tool claude-shim runs: its override variable, else PATH, else the
/// usual directories (an unprivileged PATH often lacks /usr/sbin).
pub fn find_tool(name: &str, env: &str, package: &str) -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(env) {
        let p = PathBuf::from(p);
        if crate::program::is_executable(&p) {
            return Ok(p);
        }
        bail!("use {} ({env}): it is not an executable file", p.display());
    }
    match crate::program::find(name) {
        Some(p) => Ok(p),
        None => bail!(
            "find {name}: it is not on PATH nor in /usr/sbin, /usr/bin (install Debian's {package}, or set {env})"
        ),
    }
}

/// Reads the mode from the spec's annotations and checks, before anything
/// exists, that it can be enforced; in allowlist mode sets the proxy
/// environment. None: no annotation, the container keeps what its spec says.
pub fn prepare(spec: &mut Spec, state_dir: &Path) -> Result<Option<Plan>> {
    let annotations = spec.annotations().clone().unwrap_or_default();
    let Some(mode) = annotations.get(MODE_ANNOTATION) else {
        if annotations.contains_key(POLICY_ANNOTATION) {
            bail!("read annotation {POLICY_ANNOTATION}: it needs {MODE_ANNOTATION} beside it");
        }
        return Ok(None);
    };
    let mode = Mode::parse(mode.trim())?;
    let raw: RawPolicy = match annotations.get(POLICY_ANNOTATION) {
        Some(json) => serde_json::from_str(json).with_context(|| format!("parse annotation {POLICY_ANNOTATION}"))?,
        None => RawPolicy::default(),
    };
    let policy = Policy::parse(&raw).with_context(|| format!("read annotation {POLICY_ANNOTATION}"))?;
    let what = format!("enforce network mode {}", mode.as_str());

    let netns = spec
        .linux()
        .as_ref()
        .and_then(|l| l.namespaces().as_ref())
        .and_then(|ns| ns.iter().find(|n| n.typ() == LinuxNamespaceType::Network).cloned());
    let Some(netns) = netns else {
        bail!("{what}: the spec shares the host's network namespace (give it a network namespace)");
    };
    if let Some(path) = netns.path() {
        // Joining a namespace by path: it must not be ours, or pid 1's.
        let target = fs::metadata(path)
            .with_context(|| {
                format!(
                    "{what}: check that {} is not the host's network namespace",
                    path.display()
                )
            })?
            .ino();
        let ino = |p: &str| fs::metadata(p).map(|m| m.ino()).ok();
        if Some(target) == ino("/proc/self/ns/net") || Some(target) == ino("/proc/1/ns/net") {
            bail!(
                "{what}: the spec joins {}, which is the host's network namespace",
                path.display()
            );
        }
    }

    // The rules are only as good as the container's inability to change them.
    let caps = spec.process().as_ref().and_then(|p| p.capabilities().clone());
    let Some(caps) = caps else {
        bail!("{what}: the spec has no process.capabilities, so the container would keep CAP_NET_ADMIN");
    };
    if caps.bounding().is_none() {
        bail!("{what}: process.capabilities has no bounding set, so the container could regain CAP_NET_ADMIN");
    }
    for (set, name) in [
        (caps.bounding(), "bounding"),
        (caps.effective(), "effective"),
        (caps.permitted(), "permitted"),
        (caps.inheritable(), "inheritable"),
        (caps.ambient(), "ambient"),
    ] {
        if set.as_ref().is_some_and(|s| s.contains(&Capability::NetAdmin)) {
            bail!("{what}: process.capabilities.{name} holds CAP_NET_ADMIN, with which the container could change its network");
        }
    }

    let tools = annotations.get(gateway::TOOLS_ANNOTATION);
    let gateway = match annotations.get(gateway::ANNOTATION) {
        Some(url) if mode == Mode::Allowlist => Some(gateway::Config::parse(url, tools.map(String::as_str))?),
        Some(_) => bail!(
            "{what}: annotation {} needs network mode allowlist (the gateway lives in the proxy)",
            gateway::ANNOTATION
        ),
        None if tools.is_some() => bail!(
            "{what}: annotation {} needs annotation {} beside it",
            gateway::TOOLS_ANNOTATION,
            gateway::ANNOTATION
        ),
        None => None,
    };
    let publish = match annotations.get(PUBLISH_ANNOTATION) {
        Some(list) => super::publish::parse(list).with_context(|| format!("read annotation {PUBLISH_ANNOTATION}"))?,
        None => Vec::new(),
    };
    if !publish.is_empty() && netns.path().is_some() {
        bail!(
            "publish ports: the spec joins the network namespace {} (a pod's); publish them through its engine",
            netns
                .path()
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        );
    }
    let mut plan = Plan {
        mode,
        policy: raw,
        join_user: false,
        joined: netns.path().is_some(),
        pasta: None,
        nft: None,
        gateway,
        published: super::publish::bind(&publish)?,
        publish,
        workdir: annotations.get(WORKDIR_ANNOTATION).map(PathBuf::from),
        ns_socket: None,
    };
    match mode {
        Mode::None if plan.joined => {
            plan.nft = Some(find_tool("nft", NFT_ENV, "nftables").with_context(|| what.clone())?);
        }
        Mode::None => {}
        // The proxy is a fork of this process (process::fork_helper): nothing to find.
        Mode::Allowlist => {
            set_proxy_env(spec);
            add_ssh_proxy(spec)?;
        }
        Mode::Public => {
            if let Some(d) = policy.deny.iter().find(|d| d.is_name()) {
                bail!("{what}: deny entry {d:?} is a host name, and public mode filters addresses only (use allowlist mode, or an address)", d = d.to_string());
            }
            if !policy.allow.is_empty() {
                tracing::warn!("network mode public admits every public address; the allow entries are not used");
            }
            plan.pasta = Some(find_tool("pasta", PASTA_ENV, "passt").with_context(|| what.clone())?);
            plan.nft = Some(find_tool("nft", NFT_ENV, "nftables").with_context(|| what.clone())?);
            if !nix::unistd::geteuid().is_root() {
                netns::tun_accessible().with_context(|| what.clone())?;
            }
        }
    }
    if !nix::unistd::geteuid().is_root() {
        add_ns_hook(spec, state_dir)?;
        plan.ns_socket = Some(netns::bind_ns_socket(state_dir)?);
    }
    Ok(Some(plan))
}

/// Unprivileged, the runtime cannot open the namespaces of the init it just
/// created (libcontainer keeps it non-dumpable until it execs; ptrace(2)
/// "Ptrace access mode checking"), so a createContainer hook, which runs in
/// those namespaces as a fresh exec, sends them over (`netns::hook`).
fn add_ns_hook(spec: &mut Spec, state_dir: &Path) -> Result<()> {
    use libcontainer::oci_spec::runtime::HookBuilder;
    let exe = crate::seal::exe_on_disk()?;
    if !crate::program::is_executable(&exe) {
        bail!("run the network hook: {} is not an executable file", exe.display());
    }
    let hook = HookBuilder::default()
        .path(exe.clone())
        .args(vec![
            exe.to_string_lossy().into_owned(),
            "__network".to_owned(),
            "hook".to_owned(),
            "--state-dir".to_owned(),
            state_dir.to_string_lossy().into_owned(),
        ])
        .timeout(10)
        .build()
        .map_err(|e| anyhow!("build the network hook: {e}"))?;
    let mut hooks = spec.hooks().clone().unwrap_or_default();
    let mut list = hooks.create_container().clone().unwrap_or_default();
    list.push(hook);
    hooks.set_create_container(Some(list));
    spec.set_hooks(Some(hooks));
    Ok(())
}

fn set_proxy_env(spec: &mut Spec) {
    let Some(process) = spec.process_mut() else { return };
    let mut env: Vec<String> = process
        .env()
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| {
            let key = e.split('=').next().unwrap_or_default();
            !PROXY_ENV.iter().any(|(k, _)| *k == key)
        })
        .collect();
    env.extend(PROXY_ENV.iter().map(|(k, v)| format!("{k}={v}")));
    process.set_env(Some(env));
}

/// ssh has no proxy setting of its own: the runtime's own binary is bound
/// read-only into the sandbox's /dev and named in GIT_SSH_COMMAND as
/// ProxyCommand (`connect`; the bundle sets it, an engine's spec gets it
/// here), so git over SSH goes through the proxy, which still decides. A spec
/// without a /dev mount is left as it is: ssh then has no way out. A spec's
/// own GIT_SSH_COMMAND is kept.
fn add_ssh_proxy(spec: &mut Spec) -> Result<()> {
    use super::connect::{git_ssh_command, CONNECT_PATH};
    use libcontainer::oci_spec::runtime::MountBuilder;
    let mut mounts = spec.mounts().clone().unwrap_or_default();
    if !mounts.iter().any(|m| m.destination() == Path::new("/dev")) {
        return Ok(());
    }
    if let Some(process) = spec.process_mut() {
        let mut env = process.env().clone().unwrap_or_default();
        if !env.iter().any(|e| e.starts_with("GIT_SSH_COMMAND=")) {
            env.push(format!("GIT_SSH_COMMAND={}", git_ssh_command()));
            process.set_env(Some(env));
        }
    }
    let exe = crate::seal::exe_on_disk()?;
    mounts.retain(|m| m.destination() != Path::new(CONNECT_PATH));
    mounts.push(
        MountBuilder::default()
            .destination(PathBuf::from(CONNECT_PATH))
            .typ("bind")
            .source(exe)
            .options(vec!["bind".into(), "ro".into(), "nosuid".into(), "nodev".into()])
            .build()
            .map_err(|e| anyhow!("bind the ssh proxy command into the container: {e}"))?,
    );
    spec.set_mounts(Some(mounts));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_with(annotations: &[(&str, &str)], edit: impl FnOnce(&mut serde_json::Value)) -> Spec {
        let mut v = serde_json::to_value(Spec::default()).unwrap();
        v["annotations"] = serde_json::json!(annotations
            .iter()
            .map(|(k, val)| (k.to_string(), val.to_string()))
            .collect::<std::collections::HashMap<_, _>>());
        edit(&mut v);
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn no_annotation_changes_nothing() {
        let mut s = spec_with(&[], |_| {});
        let before = serde_json::to_value(&s).unwrap();
        assert!(prepare(&mut s, Path::new("/nonexistent")).unwrap().is_none());
        assert_eq!(serde_json::to_value(&s).unwrap(), before);
    }

    #[test]
    fn allowlist_sets_the_proxy_environment() {
        let mut s = spec_with(&[(MODE_ANNOTATION, "allowlist")], |v| {
            v["process"]["env"] = serde_json::json!(["PATH=/bin", "HTTP_PROXY=http://elsewhere:1"]);
        });
        let plan = prepare(&mut s, Path::new("/nonexistent")).unwrap().unwrap();
        assert_eq!(plan.mode, Mode::Allowlist);
        let env = s.process().as_ref().unwrap().env().clone().unwrap();
        assert!(env.contains(&"PATH=/bin".to_owned()));
        assert!(env.contains(&"HTTP_PROXY=http://127.0.0.1:3128".to_owned()));
        assert!(env.contains(&"all_proxy=socks5h://127.0.0.1:1080".to_owned()));
        assert!(!env.iter().any(|e| e.contains("elsewhere")));
    }

    #[test]
    fn the_gateway_and_its_server_tools_reach_the_plan() {
        let ann = [
            (MODE_ANNOTATION, "allowlist"),
            (gateway::ANNOTATION, "http://127.0.0.1:9/base"),
            (gateway::TOOLS_ANNOTATION, "web_search, mcp"),
        ];
        let plan = prepare(&mut spec_with(&ann, |_| {}), Path::new("/nonexistent"))
            .unwrap()
            .unwrap();
        let want = gateway::Config {
            upstream: "http://127.0.0.1:9/base".into(),
            server_tools: vec!["web_search".into(), "mcp".into()],
        };
        assert_eq!(plan.gateway.as_ref(), Some(&want));
        let saved: Plan = serde_json::from_value(serde_json::to_value(&plan).unwrap()).unwrap();
        assert_eq!(saved.gateway, Some(want));
        let plan = prepare(&mut spec_with(&ann[..2], |_| {}), Path::new("/nonexistent"))
            .unwrap()
            .unwrap();
        assert_eq!(plan.gateway.unwrap().server_tools, Vec::<String>::new());
    }

    fn refused(ann: &[(&str, &str)], edit: impl FnOnce(&mut serde_json::Value), want: &str) {
        let mut s = spec_with(ann, edit);
        let e = format!("{:#}", prepare(&mut s, Path::new("/nonexistent")).unwrap_err());
        assert!(e.contains(want), "{ann:?}: {e}");
    }

    #[test]
    fn refusals_name_the_reason() {
        refused(&[(MODE_ANNOTATION, "open")], |_| {}, "is not a mode");
        refused(&[(POLICY_ANNOTATION, "{}")], |_| {}, "needs run.claude-shim.network");
        refused(
            &[(MODE_ANNOTATION, "none")],
            |v| v["linux"]["namespaces"] = serde_json::json!([{"type": "pid"}, {"type": "mount"}]),
            "shares the host's network namespace",
        );
        refused(
            &[(MODE_ANNOTATION, "none")],
            |v| v["process"]["capabilities"]["bounding"] = serde_json::json!(["CAP_NET_ADMIN"]),
            "CAP_NET_ADMIN",
        );
        refused(
            &[(MODE_ANNOTATION, "none")],
            |v| {
                v["process"].as_object_mut().unwrap().remove("capabilities");
            },
            "no process.capabilities",
        );
        refused(
            &[
                (MODE_ANNOTATION, "allowlist"),
                (POLICY_ANNOTATION, r#"{"allow":["*"]}"#),
            ],
            |_| {},
            "\"*\"",
        );
        refused(
            &[
                (MODE_ANNOTATION, "public"),
                (POLICY_ANNOTATION, r#"{"deny":["evil.com"]}"#),
            ],
            |_| {},
            "is a host name",
        );
        refused(
            &[
                (MODE_ANNOTATION, "allowlist"),
                (POLICY_ANNOTATION, r#"{"allow":[],"extra":1}"#),
            ],
            |_| {},
            "unknown field",
        );
        refused(
            &[
                (MODE_ANNOTATION, "allowlist"),
                (gateway::ANNOTATION, "http://127.0.0.1:9"),
                (gateway::TOOLS_ANNOTATION, "web_search,web_browse"),
            ],
            |_| {},
            "read annotation run.claude-shim.gateway.server-tools: unknown server tool \"web_browse\"",
        );
        refused(
            &[
                (MODE_ANNOTATION, "allowlist"),
                (gateway::TOOLS_ANNOTATION, "web_search"),
            ],
            |_| {},
            "needs annotation run.claude-shim.gateway beside it",
        );
    }
}
