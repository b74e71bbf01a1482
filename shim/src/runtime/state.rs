//! `state` and `list`: containers as runc's state JSON; and what the OOM
//! killer did to one.

use std::fs;
use std::io::ErrorKind;

use anyhow::{Context, Result};
use libcontainer::container::{Container, ContainerStatus};

use super::base::{status_name, Runtime};
use super::cgroup_v2;

impl Runtime {
    /// runc's `state` JSON.
    pub fn state_json(&self, id: &str) -> Result<serde_json::Value> {
        let c = self.load(id)?;
        Ok(self.state_of(&c))
    }

    fn state_of(&self, c: &Container) -> serde_json::Value {
        let meta = self.read_meta(c.id()).unwrap_or_default();
        let status = c.status();
        let pid = match status {
            ContainerStatus::Stopped => 0,
            _ => c.pid().map(|p| p.as_raw()).unwrap_or(0),
        };
        let mut v = serde_json::json!({
            "ociVersion": libcontainer::oci_spec::runtime::VERSION,
            "id": c.id(),
            "pid": pid,
            "status": status_name(status),
            "bundle": meta.bundle,
            "rootfs": meta.rootfs,
            "created": c.created().map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)).unwrap_or_default(),
            "owner": c.creator().map(|o| o.to_string_lossy().into_owned()).unwrap_or_default(),
        });
        if let Some(a) = &c.state.annotations {
            v["annotations"] = serde_json::json!(a);
        }
        for (key, value) in crate::network::state_annotations(&meta, &self.meta_dir(c.id())) {
            v["annotations"][key] = serde_json::json!(value);
        }
        v
    }

    /// Every container under the root, as runc's state JSON.
    pub fn list(&self) -> Result<Vec<serde_json::Value>> {
        let entries = match fs::read_dir(&self.root) {
            Ok(e) => e,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("read state directory {}", self.root.display())),
        };
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || !entry.path().join("state.json").exists() {
                continue;
            }
            if let Ok(c) = self.load(&name) {
                out.push(self.state_of(&c));
            }
        }
        out.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
        Ok(out)
    }

    /// How many of the container's processes the OOM killer ended (cgroup v2).
    pub fn oom_kills(&self, id: &str) -> Option<u64> {
        let c = self.load(id).ok()?;
        let path = self.effective_spec(id).ok()?.linux().as_ref()?.cgroups_path().clone()?;
        if c.systemd() || !cgroup_v2::is_unified() {
            return None;
        }
        cgroup_v2::oom_kills(&path).filter(|n| *n > 0)
    }
}
