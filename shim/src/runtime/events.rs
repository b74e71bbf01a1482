//! `events`: a container's cgroup statistics as runc's event stream, one
//! JSON line per event: `{"type":"stats","id":ID,"data":{...}}` with the data
//! in runc's `types.Stats` shape (its names, its omitted zeros), and
//! `{"type":"oom","id":ID}` each time the OOM killer ends a process in the
//! container's memory cgroup.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use libcgroups::common::CgroupManager;
use libcgroups::stats::{BlkioDeviceStat, MemoryData, Stats};
use libcontainer::container::ContainerStatus;
use serde::Serialize;
use serde_json::{json, Map, Value};

use super::base::Runtime;
use super::cgroup::cgroup_manager;
use super::cgroup_v2;

/// One event, its keys in runc's order (`type`, `id`, `data`).
#[derive(Serialize)]
pub struct Event<'a> {
    #[serde(rename = "type")]
    pub kind: &'a str,
    pub id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl Runtime {
    /// The cgroup path of a running container (`events` refuses others, as runc).
    pub fn events_cgroup(&self, id: &str) -> Result<(PathBuf, bool)> {
        let c = self.load(id)?;
        if !matches!(c.status(), ContainerStatus::Running | ContainerStatus::Paused) {
            bail!("read events of container {id}: container is not running");
        }
        let spec = c.spec().map_err(|e| anyhow!("read config of container {id}: {e}"))?;
        Ok((spec.cgroup_path, c.systemd()))
    }

    /// The container's statistics in runc's shape.
    pub fn stats(&self, id: &str, path: &Path, systemd: bool) -> Result<Value> {
        let m = cgroup_manager(path, id, systemd)?;
        let stats = m
            .stats()
            .map_err(|e| anyhow!("read statistics of container {id}: {e}"))?;
        Ok(runc_stats(&stats))
    }

    /// Whether the container still exists and runs (the stream ends otherwise).
    pub fn still_running(&self, id: &str) -> bool {
        self.load(id)
            .is_ok_and(|c| matches!(c.status(), ContainerStatus::Running | ContainerStatus::Paused))
    }
}

/// How many processes the OOM killer ended in the memory cgroup at `path`:
/// memory.events on cgroup v2, memory.oom_control's oom_kill on v1.
pub fn oom_kills(path: &Path) -> Option<u64> {
    if cgroup_v2::is_unified() {
        return cgroup_v2::oom_kills(path);
    }
    let file = Path::new("/sys/fs/cgroup/memory")
        .join(path.strip_prefix("/").unwrap_or(path))
        .join("memory.oom_control");
    fs::read_to_string(file)
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("oom_kill "))
        .and_then(|n| n.trim().parse().ok())
}

/// Inserts `value` under `key` unless it is zero or empty (Go's omitempty).
fn put(m: &mut Map<String, Value>, key: &str, value: Value) {
    let empty = match &value {
        Value::Number(n) => n.as_u64() == Some(0),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::String(s) => s.is_empty(),
        Value::Null => true,
        Value::Bool(b) => !b,
    };
    if !empty {
        m.insert(key.to_owned(), value);
    }
}

fn memory_entry(d: &MemoryData) -> Value {
    let mut m = Map::new();
    m.insert("limit".into(), json!(d.limit));
    put(&mut m, "usage", json!(d.usage));
    put(&mut m, "max", json!(d.max_usage));
    m.insert("failcnt".into(), json!(d.fail_count));
    Value::Object(m)
}

fn blkio_entries(entries: &[BlkioDeviceStat]) -> Value {
    entries
        .iter()
        .map(|e| {
            let mut m = Map::new();
            put(&mut m, "major", json!(e.major));
            put(&mut m, "minor", json!(e.minor));
            put(&mut m, "op", json!(e.op_type.clone().unwrap_or_default()));
            put(&mut m, "value", json!(e.value));
            Value::Object(m)
        })
        .collect()
}

/// libcgroups' statistics as runc's `types.Stats` (runc's events/types.go).
fn runc_stats(s: &Stats) -> Value {
    let mut usage = Map::new();
    put(&mut usage, "total", json!(s.cpu.usage.usage_total));
    put(&mut usage, "percpu", json!(s.cpu.usage.per_core_usage_total));
    put(&mut usage, "percpu_kernel", json!(s.cpu.usage.per_core_usage_kernel));
    put(&mut usage, "percpu_user", json!(s.cpu.usage.per_core_usage_user));
    usage.insert("kernel".into(), json!(s.cpu.usage.usage_kernel));
    usage.insert("user".into(), json!(s.cpu.usage.usage_user));
    let mut throttling = Map::new();
    put(&mut throttling, "periods", json!(s.cpu.throttling.periods));
    put(
        &mut throttling,
        "throttledPeriods",
        json!(s.cpu.throttling.throttled_periods),
    );
    put(&mut throttling, "throttledTime", json!(s.cpu.throttling.throttled_time));

    let mut memory = Map::new();
    put(&mut memory, "cache", json!(s.memory.cache));
    memory.insert("usage".into(), memory_entry(&s.memory.memory));
    memory.insert("swap".into(), memory_entry(&s.memory.memswap));
    memory.insert("kernel".into(), memory_entry(&s.memory.kernel));
    memory.insert("kernelTCP".into(), memory_entry(&s.memory.kernel_tcp));
    put(&mut memory, "raw", json!(s.memory.stats));

    let mut pids = Map::new();
    put(&mut pids, "current", json!(s.pids.current));
    put(&mut pids, "limit", json!(s.pids.limit));

    let mut blkio = Map::new();
    for (key, entries) in [
        ("ioServiceBytesRecursive", &s.blkio.service_bytes),
        ("ioServicedRecursive", &s.blkio.serviced),
        ("ioQueueRecursive", &s.blkio.queued),
        ("ioServiceTimeRecursive", &s.blkio.service_time),
        ("ioWaitTimeRecursive", &s.blkio.wait_time),
        ("ioMergedRecursive", &s.blkio.merged),
        ("ioTimeRecursive", &s.blkio.time),
        ("sectorsRecursive", &s.blkio.sectors),
    ] {
        put(&mut blkio, key, blkio_entries(entries));
    }

    let hugetlb: Map<String, Value> = s
        .hugetlb
        .iter()
        .map(|(size, h)| {
            let mut m = Map::new();
            put(&mut m, "usage", json!(h.usage));
            put(&mut m, "max", json!(h.max_usage));
            m.insert("failcnt".into(), json!(h.fail_count));
            (size.clone(), Value::Object(m))
        })
        .collect();

    json!({
        "cpu": {"usage": usage, "throttling": throttling},
        "cpuset": {},
        "memory": memory,
        "pids": pids,
        "blkio": blkio,
        "hugetlb": hugetlb,
        "intel_rdt": {},
        "network_interfaces": null,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_take_runcs_names_and_omit_its_zeros() {
        let mut s = Stats::default();
        s.pids.current = 3;
        s.cpu.usage.usage_total = 42;
        s.memory.memory.usage = 4096;
        let v = runc_stats(&s);
        assert_eq!(v["pids"], json!({"current": 3}));
        assert_eq!(v["cpu"]["usage"], json!({"total": 42, "kernel": 0, "user": 0}));
        assert_eq!(v["memory"]["usage"], json!({"limit": 0, "usage": 4096, "failcnt": 0}));
        assert_eq!(v["blkio"], json!({}));
        let line = serde_json::to_string(&Event {
            kind: "stats",
            id: "c1",
            data: Some(v),
        })
        .unwrap();
        assert!(line.starts_with(r#"{"type":"stats","id":"c1","data":{"#), "{line}");
        let oom = serde_json::to_string(&Event {
            kind: "oom",
            id: "c1",
            data: None,
        })
        .unwrap();
        assert_eq!(oom, r#"{"type":"oom","id":"c1"}"#);
    }
}
