//! The machine a result came from: kernel, OS, CPU model and count, memory,
//! cgroup layout, KVM, and the load average before and after the run (a busy
//! machine is said to be busy beside its figures).

use std::fs;
use std::path::Path;

use serde::Serialize;

use crate::parse::{self, LoadAvg};

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub kernel: String,
    pub os: String,
    pub cpu_model: String,
    pub cpus: usize,
    pub mem_total_mib: u64,
    /// "v1 hybrid (cgroup2 at /sys/fs/cgroup/unified)", "v2", "v1".
    pub cgroup: String,
    pub kvm: bool,
    pub loadavg_before: Option<LoadAvg>,
    pub loadavg_after: Option<LoadAvg>,
}

fn read(p: &str) -> String {
    fs::read_to_string(p).unwrap_or_default()
}

pub fn loadavg() -> Option<LoadAvg> {
    parse::loadavg(&read("/proc/loadavg"))
}

/// `PRETTY_NAME` of os-release(5).
pub fn os_name(os_release: &str) -> Option<String> {
    os_release
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim().trim_matches('"').to_owned())
}

pub fn cgroup_layout() -> String {
    let fstype = |p: &str| nix::sys::statfs::statfs(p).map(|s| s.filesystem_type()).ok();
    match fstype("/sys/fs/cgroup") {
        Some(t) if t == nix::sys::statfs::CGROUP2_SUPER_MAGIC => "v2".to_owned(),
        Some(_) if fstype("/sys/fs/cgroup/unified") == Some(nix::sys::statfs::CGROUP2_SUPER_MAGIC) => {
            "v1 hybrid (cgroup2 at /sys/fs/cgroup/unified)".to_owned()
        }
        Some(_) => "v1".to_owned(),
        None => "none".to_owned(),
    }
}

pub fn collect() -> Machine {
    let cpuinfo = read("/proc/cpuinfo");
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .and_then(|r| r.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    let mem_total_mib = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kib| kib / 1024);
    Machine {
        kernel: nix::sys::utsname::uname()
            .map(|u| format!("{} {}", u.sysname().to_string_lossy(), u.release().to_string_lossy()))
            .unwrap_or_default(),
        os: os_name(&read("/etc/os-release")).unwrap_or_else(|| "unknown".to_owned()),
        cpu_model,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        mem_total_mib,
        cgroup: cgroup_layout(),
        kvm: Path::new("/dev/kvm").exists(),
        loadavg_before: loadavg(),
        loadavg_after: None,
    }
}

impl Machine {
    /// One line for tables and plots.
    pub fn line(&self) -> String {
        format!(
            "{}, {}, {} x {}, {} MiB, cgroup {}{}",
            self.os,
            self.kernel,
            self.cpus,
            self.cpu_model,
            self.mem_total_mib,
            self.cgroup,
            if self.kvm { ", /dev/kvm present" } else { "" }
        )
    }

    /// Said beside the figures when the machine was not quiet.
    pub fn busy_warning(&self) -> Option<String> {
        let worst = [self.loadavg_before, self.loadavg_after]
            .iter()
            .flatten()
            .map(|l| l.one)
            .fold(0.0_f64, f64::max);
        (worst > 0.5 * self.cpus as f64).then(|| {
            format!(
                "the machine was busy (1-minute load average up to {worst:.2} on {} CPUs): figures are noisy, rerun on a quiet machine",
                self.cpus
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_release_pretty_name() {
        let s = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\n";
        assert_eq!(os_name(s).as_deref(), Some("Debian GNU/Linux 12 (bookworm)"));
        assert_eq!(os_name("NAME=x\n"), None);
    }

    #[test]
    fn busy_machine_is_said_to_be_busy() {
        let mut m = collect();
        m.cpus = 2;
        let l = |one| parse::loadavg(&format!("{one} 0 0 1/1 1")).unwrap();
        m.loadavg_before = Some(l(0.2));
        m.loadavg_after = Some(l(0.3));
        assert_eq!(m.busy_warning(), None);
        m.loadavg_after = Some(l(1.7));
        assert!(m.busy_warning().unwrap().contains("1.70"));
    }
}
