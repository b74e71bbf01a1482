//! The census after the kills: processes, cgroups, mounts, network namespaces,
//! nft tables, state and placeholders left, less what is spared on purpose.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::process::Command;
use std::time::{Duration, Instant};

use claude_shim_e2e::*;

use crate::world::{tree, World};

/// Things a census must not count: the live containers and sandbox that
/// share the root on purpose.
#[derive(Default)]
pub(crate) struct Spared {
    /// Container ids, and the sandbox's bundle name prefix.
    pub(crate) names: Vec<String>,
    pub(crate) pids: Vec<i32>,
    /// State entries that were there before the kills (the live sandbox's lease files).
    pub(crate) state: BTreeSet<String>,
}

impl Spared {
    fn covers(&self, text: &str) -> bool {
        self.names.iter().any(|n| text.contains(n.as_str()))
    }
}

/// What is left, by kind.
#[derive(Default)]
pub(crate) struct Census {
    pub(crate) found: BTreeMap<&'static str, Vec<String>>,
}

pub(crate) const KINDS: [&str; 7] = [
    "processes",
    "cgroups",
    "mounts",
    "netns",
    "nft tables",
    "state",
    "placeholders",
];

impl Census {
    fn add(&mut self, kind: &'static str, what: String) {
        self.found.entry(kind).or_default().push(what);
    }

    pub(crate) fn total(&self) -> usize {
        self.found.values().map(Vec::len).sum()
    }

    pub(crate) fn counts(&self) -> String {
        KINDS
            .iter()
            .map(|k| format!("{k} {}", self.found.get(k).map_or(0, Vec::len)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn take(w: &World, spared: &Spared) -> Census {
        let mut c = Census::default();
        let root = w.env.root.to_string_lossy().into_owned();
        let parent = w.cgroup_parent.clone();
        let host_net = fs::metadata("/proc/self/ns/net").map(|m| m.ino()).ok();
        let mut netns = BTreeMap::new();
        for p in processes() {
            let ours = (p.cmdline.contains(&root) || p.cmdline.contains(&w.marker) || p.cgroup.contains(&parent))
                && !p.cmdline.contains("claude_shim_e2e")
                && !p.cmdline.contains("cargo");
            if !ours || spared.pids.contains(&p.pid) || spared.covers(&p.cmdline) || spared.covers(&p.cgroup) {
                continue;
            }
            c.add("processes", format!("{}: {}", p.pid, p.describe()));
            if let Ok(m) = fs::metadata(format!("/proc/{}/ns/net", p.pid)) {
                if Some(m.ino()) != host_net {
                    netns.entry(m.ino()).or_insert(p.pid);
                }
            }
        }
        for (ino, pid) in &netns {
            c.add("netns", format!("net:[{ino}] (entered by pid {pid})"));
            let out = Command::new("nsenter")
                .arg(format!("--net=/proc/{pid}/ns/net"))
                .args(["nft", "list", "tables"])
                .output();
            if let Ok(out) = out {
                for t in String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                {
                    c.add("nft tables", format!("{t} in net:[{ino}]"));
                }
            }
        }
        // claude-shim never makes a table in the host's namespace.
        if let Ok(out) = Command::new("nft").args(["list", "tables"]).output() {
            for t in String::from_utf8_lossy(&out.stdout).lines() {
                if t.contains("claude") {
                    c.add("nft tables", format!("{t} in the host's namespace"));
                }
            }
        }
        if let Ok(hierarchies) = fs::read_dir("/sys/fs/cgroup") {
            for h in hierarchies.flatten() {
                let top = h.path().join(parent.trim_start_matches('/'));
                for d in tree(&top) {
                    let name = d.file_name().unwrap_or_default().to_string_lossy().into_owned();
                    if d.is_dir() && !spared.covers(&name) {
                        c.add("cgroups", d.display().to_string());
                    }
                }
            }
        }
        let scratch = w.env.dir.path().to_string_lossy().into_owned();
        for line in fs::read_to_string("/proc/self/mountinfo").unwrap_or_default().lines() {
            if line.contains(&scratch) {
                c.add("mounts", line.to_owned());
            }
        }
        for e in fs::read_dir(&w.env.root).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name != ".claude-shim" && !spared.covers(&name) {
                c.add("state", e.path().display().to_string());
            }
        }
        for e in fs::read_dir(w.env.root.join(".claude-shim"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = e.file_name().to_string_lossy().into_owned();
            // The shared caches stay by design.
            let cache = claude_shim_e2e::is_kept_cache(&name);
            if !cache && !spared.covers(&name) && !spared.state.contains(&name) {
                c.add("state", e.path().display().to_string());
            }
        }
        for p in tree(&w.work).difference(&w.work_before) {
            c.add("placeholders", p.display().to_string());
        }
        c
    }

    /// Asynchronous ends (a helper stopping after its init) settle within seconds.
    pub(crate) fn settled(w: &World, spared: &Spared) -> Census {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let c = Census::take(w, spared);
            if c.total() == 0 || Instant::now() > deadline {
                return c;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}
