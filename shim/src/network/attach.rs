//! `attach`, the second step of a container's network: makes the plan so in
//! the namespace of the created (not yet started) container, starting and
//! recording its helpers.

use std::fs;
use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use ipnet::IpNet;

use super::args::HelperOpts;
use super::plan::Plan;
use super::policy::Mode;
use super::{netns, nft, process, routing, watch};

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

    if plan.mode == Mode::None {
        netns::loopback(&ns, &[]).context("bring up lo")?;
    }
    if plan.mode != Mode::None || !plan.publish.is_empty() {
        let published = std::mem::take(&mut plan.published);
        let helpers = start_watch(id, state_dir, init_pid, init_start, &ns, &published, record)?;
        drop(published);
        if plan.mode == Mode::Public {
            let pasta = helpers
                .iter()
                .find(|(n, _)| n == "pasta")
                .map(|(_, p)| *p)
                .ok_or_else(|| anyhow!("start pasta for container {id}: the watch started no pasta"))?;
            filter_public(plan, init_pid, &ns, pasta).context("filter the egress of pasta")?;
        }
    }
    tracing::debug!(
        "network mode {} of {id} ready in {} ms",
        plan.mode.as_str(),
        started.elapsed().as_millis()
    );
    Ok(())
}

/// Forks the watch, which starts the helpers (`watch::run`) and reports
/// them; each is recorded. Returns their names and pids.
fn start_watch(
    id: &str,
    state_dir: &Path,
    init_pid: i32,
    init_start: u64,
    ns: &netns::NsFds,
    published: &[std::os::fd::OwnedFd],
    record: &mut Record<'_>,
) -> Result<Vec<(String, i32)>> {
    let opts = HelperOpts {
        id: id.to_owned(),
        state_dir: state_dir.to_owned(),
        init_pid,
        init_start,
    };
    let t = Instant::now();
    // After the namespaces, at publish::first_fd, as the watch expects them.
    let mut fds = ns.for_helper();
    fds.extend(published.iter());
    // Forked, not exec'd (process::fork_helper): this process is single-threaded here.
    let (ready, _) = process::fork_helper(&fds, Duration::from_secs(15), true, || watch::run(&opts))
        .with_context(|| format!("start the network helpers of container {id}"))?;
    // "ok <watch pid> (<helper name> <helper pid>)..."
    let words = &ready.words;
    let bad = || anyhow!("start the network helpers of container {id}: unexpected answer {words:?}");
    if words.len() < 4 || words.len() % 2 != 0 {
        return Err(bad());
    }
    let watch_pid = words[1].parse::<i32>().map_err(|_| bad())?;
    let mut helpers = vec![("watch".to_owned(), watch_pid)];
    for pair in words[2..].chunks(2) {
        helpers.push((pair[0].clone(), pair[1].parse::<i32>().map_err(|_| bad())?));
    }
    tracing::debug!(
        "{id}: network helpers {helpers:?} ready in {} ms",
        t.elapsed().as_millis()
    );
    for (n, p) in &helpers {
        let start =
            process::start_time(*p).ok_or_else(|| anyhow!("start {n} for container {id}: it exited at once"))?;
        record(n, *p, start)?;
    }
    helpers.remove(0);
    Ok(helpers)
}

/// Waits for pasta's routes, then installs and proves the egress filter.
fn filter_public(plan: &Plan, init_pid: i32, ns: &netns::NsFds, pasta_pid: i32) -> Result<()> {
    let init = init_pid.to_string();
    let pasta = process::pidfd_open(pasta_pid).context("watch pasta")?;
    let host_routes = routing::routes("self");
    let want_v6 = routing::has_default_route(&host_routes, true);
    let t = Instant::now();
    let deadline = t + Duration::from_secs(5);
    loop {
        let r = routing::routes(&init);
        if routing::has_default_route(&r, false) && (!want_v6 || routing::has_default_route(&r, true)) {
            break;
        }
        if process::wait_exit(&pasta, Duration::from_millis(0)) {
            bail!("pasta exited before the namespace had its routes (see network.log; pasta itself logs to the system log)");
        }
        if Instant::now() > deadline {
            bail!("wait for pasta's default route: none after 5 s");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    tracing::debug!("pasta's routes in place after {} ms", t.elapsed().as_millis());
    let ns_routes = routing::routes(&init);
    let mut local: Vec<IpNet> = routing::local_networks(&ns_routes);
    local.extend(routing::local_networks(&host_routes));
    local.extend(routing::host_addresses().into_iter().map(IpNet::from));
    let resolv = fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    let (resolvers, loopback): (Vec<IpAddr>, Vec<IpAddr>) = routing::nameservers(&resolv)
        .into_iter()
        .partition(|a| !a.is_loopback());
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
        bail!("pasta exited while the filter was installed (see network.log; pasta itself logs to the system log)");
    }
    Ok(())
}
