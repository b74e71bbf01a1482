//! The container's network, after `create` built it and before `start` runs
//! it: the mode comes from the spec's annotations (`prepare`, before
//! libcontainer sees the spec), and `attach` makes it so in the container's
//! network namespace: loopback only (none; in a namespace someone else wired,
//! such as a Kubernetes pod's, a filter that passes only lo), a proxy that
//! admits the listed hosts (allowlist), or pasta behind an nftables filter
//! (public). Helpers
//! started here are recorded in the container's meta.json as they start and
//! stopped at delete (`stop_helpers`). Every failure refuses the container.

pub mod gateway;
pub mod log;
pub mod netns;
pub mod nft;
pub mod policy;
pub mod process;
pub mod proxy;
pub mod watch;
pub mod wire;

use std::fs;
use std::net::IpAddr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use ipnet::IpNet;
use libcontainer::oci_spec::runtime::{Capability, LinuxNamespaceType, Spec};
use serde::{Deserialize, Serialize};

pub use self::policy::{Mode, MODE_ANNOTATION, POLICY_ANNOTATION};
use self::policy::{Policy, RawPolicy};
use crate::state::Meta;

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

/// What a container's network is to be; saved as <state>/network.json for the helpers.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub mode: Mode,
    pub policy: RawPolicy,
    /// The runtime is unprivileged: enter the container's user namespace to act on its network.
    #[serde(default)]
    pub join_user: bool,
    /// The spec joins a network namespace by path (a pod's, made by the CRI
    /// and wired by CNI): its interfaces are not ours to remove.
    #[serde(default)]
    pub joined: bool,
    #[serde(default)]
    pub pasta: Option<PathBuf>,
    #[serde(default)]
    pub nft: Option<PathBuf>,
    /// The upstream URL of `claude-shim claude`'s API gateway (allowlist mode only).
    #[serde(default)]
    pub gateway: Option<String>,
    /// Unprivileged: where the createContainer hook sends the container's namespaces.
    #[serde(skip)]
    ns_socket: Option<std::os::fd::OwnedFd>,
}

impl Plan {
    pub fn load(state_dir: &Path) -> Result<Self> {
        let path = state_dir.join("network.json");
        let raw = fs::read(&path).with_context(|| format!("read {}", path.display()))?;
        serde_json::from_slice(&raw).with_context(|| format!("parse {}", path.display()))
    }

    fn save(&self, state_dir: &Path) -> Result<()> {
        let path = state_dir.join("network.json");
        fs::write(&path, serde_json::to_vec_pretty(self)?).with_context(|| format!("write {}", path.display()))
    }

    pub fn policy(&self) -> Result<Policy> {
        Ok(Policy::parse(&self.policy)?)
    }
}

/// A tool claude-shim runs: its override variable, else PATH, else the
/// usual directories (an unprivileged PATH often lacks /usr/sbin).
fn find_tool(name: &str, env: &str, package: &str) -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(env) {
        let p = PathBuf::from(p);
        if is_executable(&p) {
            return Ok(p);
        }
        bail!("use {} ({env}): it is not an executable file", p.display());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::env::split_paths(&path).chain(["/usr/sbin", "/usr/bin", "/sbin", "/bin"].map(PathBuf::from));
    for d in dirs {
        let p = d.join(name);
        if is_executable(&p) {
            return Ok(p);
        }
    }
    bail!("find {name}: it is not on PATH nor in /usr/sbin, /usr/bin (install Debian's {package}, or set {env})")
}

fn is_executable(p: &Path) -> bool {
    p.is_file() && nix::unistd::access(p, nix::unistd::AccessFlags::X_OK).is_ok()
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

    let gateway = match annotations.get(gateway::ANNOTATION) {
        Some(url) if mode == Mode::Allowlist => {
            gateway::Upstream::parse(url).with_context(|| format!("read annotation {}", gateway::ANNOTATION))?;
            Some(url.clone())
        }
        Some(_) => bail!(
            "{what}: annotation {} needs network mode allowlist (the gateway lives in the proxy)",
            gateway::ANNOTATION
        ),
        None => None,
    };
    let mut plan = Plan {
        mode,
        policy: raw,
        join_user: false,
        joined: netns.path().is_some(),
        pasta: None,
        nft: None,
        gateway,
        ns_socket: None,
    };
    match mode {
        Mode::None if plan.joined => {
            plan.nft = Some(find_tool("nft", NFT_ENV, "nftables").with_context(|| what.clone())?);
        }
        Mode::None => {}
        // The proxy is a fork of this process (process::fork_helper): nothing to find.
        Mode::Allowlist => set_proxy_env(spec),
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
    if !is_executable(&exe) {
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

/// Records a helper the moment it exists: name, pid, start time.
pub type Record<'a> = dyn FnMut(&str, i32, u64) -> Result<()> + 'a;

/// Makes the plan so in the namespace of the created (not yet started)
/// container whose init is `init_pid`. Helpers are recorded through `record`
/// as soon as they run, so that a failure here (or a crash) leaves nothing
/// `delete --force` cannot stop.
pub fn attach(plan: &mut Plan, id: &str, state_dir: &Path, init_pid: i32, record: &mut Record<'_>) -> Result<()> {
    let started = Instant::now();
    let init_start = process::start_time(init_pid).ok_or_else(|| anyhow!("read the start time of pid {init_pid}"))?;
    let ns = match plan.ns_socket.take() {
        Some(sock) => netns::receive_ns(&sock)?,
        None => netns::NsFds::open_proc(init_pid)?,
    };
    let inode = netns::ns_inode(&ns.net)?;
    if inode == netns::ns_path_inode("/proc/self/ns/net")?
        || netns::ns_path_inode("/proc/1/ns/net").is_ok_and(|n| n == inode)
    {
        bail!("use the network namespace of container {id}: it is the host's");
    }
    let ifaces = netns::interfaces(init_pid)?;
    let foreign = ifaces.iter().any(|i| i != "lo");
    if plan.joined && plan.mode == Mode::None {
        // A pod's namespace: its eth0 stays (other containers of the pod
        // share it, CNI tears it down), and an output filter passes only lo.
        // Each container of the pod installs the same table again.
        netns::loopback(&ns, &[]).context("bring up lo")?;
        let nft = plan
            .nft
            .as_ref()
            .ok_or_else(|| anyhow!("mode none in a joined namespace without an nft path"))?;
        nft::install(nft, &ns, &nft::loopback_only())
            .with_context(|| format!("confine the network namespace of container {id} to loopback"))?;
        plan.save(state_dir)?;
        tracing::debug!(
            "network mode none of {id}: joined namespace with {} filtered to lo in {} ms",
            ifaces.join(", "),
            started.elapsed().as_millis()
        );
        return Ok(());
    }
    if foreign {
        bail!(
            "use the network namespace of container {id}: it already has interfaces ({}), only lo is expected",
            ifaces.join(", ")
        );
    }
    // Unprivileged, the runtime acts on the container's network from inside
    // the container's user namespace (which it owns); root needs not.
    plan.join_user = ns.user.is_some();
    plan.save(state_dir)?;

    match plan.mode {
        Mode::None => {
            netns::loopback(&ns, &[]).context("bring up lo")?;
        }
        Mode::Allowlist | Mode::Public => {
            let (helper, helper_pid) = start_watch(id, state_dir, init_pid, init_start, &ns, record)?;
            if plan.mode == Mode::Public {
                filter_public(plan, init_pid, &ns, helper_pid)
                    .with_context(|| format!("filter the egress of {helper}"))?;
            }
        }
    }
    tracing::debug!(
        "network mode {} of {id} ready in {} ms",
        plan.mode.as_str(),
        started.elapsed().as_millis()
    );
    Ok(())
}

fn start_watch(
    id: &str,
    state_dir: &Path,
    init_pid: i32,
    init_start: u64,
    ns: &netns::NsFds,
    record: &mut Record<'_>,
) -> Result<(String, i32)> {
    let opts = HelperOpts {
        id: id.to_owned(),
        state_dir: state_dir.to_owned(),
        init_pid,
        init_start,
    };
    let t = Instant::now();
    // Forked, not exec'd (process::fork_helper): this process is single-threaded here.
    let (ready, _) = process::fork_helper(&ns.for_helper(), Duration::from_secs(15), true, || watch::run(&opts))
        .with_context(|| format!("start the network helpers of container {id}"))?;
    // "ok <watch pid> <helper name> <helper pid>"
    let (watch_pid, name, pid) = match ready.words.as_slice() {
        [_, w, n, p] => (
            w.parse::<i32>().map_err(|_| anyhow!("read the watch pid {w:?}"))?,
            n.clone(),
            p.parse::<i32>().map_err(|_| anyhow!("read the {n} pid {p:?}"))?,
        ),
        other => bail!("start the network helpers of container {id}: unexpected answer {other:?}"),
    };
    tracing::debug!("{id}: watch and {name} ready in {} ms", t.elapsed().as_millis());
    for (n, p) in [("watch", watch_pid), (name.as_str(), pid)] {
        let start = process::start_time(p).ok_or_else(|| anyhow!("start {n} for container {id}: it exited at once"))?;
        record(n, p, start)?;
    }
    Ok((name, pid))
}

/// Waits for pasta's routes, then installs and proves the egress filter.
fn filter_public(plan: &Plan, init_pid: i32, ns: &netns::NsFds, pasta_pid: i32) -> Result<()> {
    let init = init_pid.to_string();
    let pasta = process::pidfd_open(pasta_pid).context("watch pasta")?;
    let host_routes = netns::routes("self");
    let want_v6 = netns::has_default_route(&host_routes, true);
    let t = Instant::now();
    let deadline = t + Duration::from_secs(5);
    loop {
        let r = netns::routes(&init);
        if netns::has_default_route(&r, false) && (!want_v6 || netns::has_default_route(&r, true)) {
            break;
        }
        if process::wait_exit(&pasta, Duration::from_millis(0)) {
            bail!("pasta exited before the namespace had its routes (see pasta.log)");
        }
        if Instant::now() > deadline {
            bail!("wait for pasta's default route: none after 5 s");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    tracing::debug!("pasta's routes in place after {} ms", t.elapsed().as_millis());
    let ns_routes = netns::routes(&init);
    let mut local: Vec<IpNet> = netns::local_networks(&ns_routes);
    local.extend(netns::local_networks(&host_routes));
    local.extend(netns::host_addresses().into_iter().map(IpNet::from));
    let resolv = fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    let (resolvers, loopback): (Vec<IpAddr>, Vec<IpAddr>) =
        netns::nameservers(&resolv).into_iter().partition(|a| !a.is_loopback());
    if !loopback.is_empty() {
        tracing::warn!("resolvers on the host's loopback ({loopback:?}) are not reachable from a public-mode sandbox");
    }
    let facts = nft::Facts { local, resolvers };
    let rules = nft::rules(&plan.policy()?, &facts);
    netns::loopback(ns, &[]).context("bring up lo")?;
    let nft = plan
        .nft
        .as_ref()
        .ok_or_else(|| anyhow!("public mode without an nft path"))?;
    let t = Instant::now();
    nft::install(nft, ns, &rules)?;
    tracing::debug!(
        "{} nft rules installed and read back in {} ms",
        rules.len(),
        t.elapsed().as_millis()
    );
    if process::wait_exit(&pasta, Duration::from_millis(0)) {
        bail!("pasta exited while the filter was installed (see pasta.log)");
    }
    Ok(())
}

/// Whether the recorded helper is still the process we started.
fn is_ours(meta: &Meta, name: &str, pid: i32) -> Option<std::os::fd::OwnedFd> {
    match meta.helper_starts.get(name) {
        Some(start) => process::open_verified(pid, *start),
        // A meta.json without start times: fall back to the program's name.
        None => {
            let fd = process::pidfd_open(pid).ok()?;
            let cmdline = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            let want = if name == "pasta" { "pasta" } else { "__network" };
            text.contains(want).then_some(fd)
        }
    }
}

/// The order helpers are stopped in: the watcher first, so that it does not
/// report the others' ends as failures.
fn stop_order(meta: &Meta) -> Vec<(&String, &i32)> {
    let mut v: Vec<(&String, &i32)> = meta.helpers.iter().collect();
    v.sort_by_key(|(n, _)| (n.as_str() != "watch", n.to_string()));
    v
}

/// Ends every helper recorded for the container.
pub fn stop_helpers(meta: &Meta) {
    for (name, pid) in stop_order(meta) {
        match is_ours(meta, name, *pid) {
            Some(fd) => {
                tracing::debug!("stopping helper {name} (pid {pid})");
                process::terminate(&fd, Duration::from_secs(2));
            }
            None => tracing::debug!("helper {name} (pid {pid}) had already exited"),
        }
    }
}

/// Helper names and pids for `state`, with whether each is still running.
pub fn describe_helpers(meta: &Meta) -> String {
    let mut parts: Vec<String> = meta
        .helpers
        .iter()
        .map(|(name, pid)| {
            let alive = is_ours(meta, name, *pid).is_some();
            format!("{name}={pid}{}", if alive { "" } else { "(exited)" })
        })
        .collect();
    parts.sort();
    parts.join(",")
}

/// Annotations `state` adds for a container with networking: its helpers
/// and the logs they write.
pub fn state_annotations(meta: &Meta, state_dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if meta.helpers.is_empty() {
        return out;
    }
    out.push(("run.claude-shim.helpers".to_owned(), describe_helpers(meta)));
    for (key, file) in [
        ("run.claude-shim.network.log", "network.log"),
        ("run.claude-shim.proxy.log", "proxy.log"),
    ] {
        let p = state_dir.join(file);
        if p.exists() {
            out.push((key.to_owned(), p.to_string_lossy().into_owned()));
        }
    }
    out
}

/// `claude-shim __network ROLE`: the helpers, started by `create` only.
#[derive(clap::Args, Debug)]
pub struct HelperArgs {
    #[command(subcommand)]
    pub role: HelperRole,
}

#[derive(clap::Subcommand, Debug)]
pub enum HelperRole {
    /// Start the mode's egress helper and stop it when the container's init exits
    Watch(HelperOpts),
    /// createContainer hook: send the container's namespaces to the runtime (unprivileged runtimes)
    Hook {
        #[arg(long)]
        state_dir: PathBuf,
    },
}

#[derive(clap::Args, Debug, Clone)]
pub struct HelperOpts {
    #[arg(long)]
    pub id: String,
    /// The container's directory under <root>/.claude-shim
    #[arg(long)]
    pub state_dir: PathBuf,
    #[arg(long)]
    pub init_pid: i32,
    /// The init's start time (/proc/<pid>/stat field 22), so a reused pid is not taken for it
    #[arg(long)]
    pub init_start: u64,
}

pub fn run_helper(args: &HelperArgs) -> Result<i32> {
    match &args.role {
        HelperRole::Watch(o) => watch::run(o)?,
        HelperRole::Hook { state_dir } => netns::hook(state_dir)?,
    }
    Ok(0)
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
    }

    #[test]
    fn the_watcher_stops_first() {
        let mut meta = Meta::default();
        meta.helpers.insert("pasta".into(), 3);
        meta.helpers.insert("watch".into(), 2);
        meta.helpers.insert("proxy".into(), 4);
        let names: Vec<&str> = stop_order(&meta).into_iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["watch", "pasta", "proxy"]);
    }
}
