//! `update`: new resource limits for a running container.

use std::io::Read;

use anyhow::{anyhow, Context, Result};
use libcontainer::oci_spec::runtime::{
    LinuxCpuBuilder, LinuxMemoryBuilder, LinuxPidsBuilder, LinuxResources, LinuxResourcesBuilder,
};

use crate::runtime::Runtime;

pub fn update(rt: &Runtime, args: &liboci_cli::Update) -> Result<i32> {
    let resources = match &args.resources {
        Some(path) => {
            let mut raw = String::new();
            if path.as_os_str() == "-" {
                std::io::stdin()
                    .read_to_string(&mut raw)
                    .context("read resources from stdin")?;
            } else {
                raw = crate::bounded::read_to_string(path, crate::bounded::SPEC_LIMIT)
                    .with_context(|| format!("read resources {}", path.display()))?;
            }
            serde_json::from_str::<LinuxResources>(&raw).map_err(|e| anyhow!("parse resources: {e}"))?
        }
        None => from_flags(args)?,
    };
    rt.update(&args.container_id, &resources)?;
    Ok(0)
}

fn from_flags(args: &liboci_cli::Update) -> Result<LinuxResources> {
    let mut r = LinuxResourcesBuilder::default();
    if args.memory.is_some() || args.memory_swap.is_some() || args.memory_reservation.is_some() {
        let mut m = LinuxMemoryBuilder::default();
        if let Some(v) = args.memory {
            m = m.limit(v as i64);
        }
        if let Some(v) = args.memory_swap {
            m = m.swap(v);
        }
        if let Some(v) = args.memory_reservation {
            m = m.reservation(v as i64);
        }
        r = r.memory(m.build()?);
    }
    if let Some(v) = args.pids_limit {
        r = r.pids(LinuxPidsBuilder::default().limit(v).build()?);
    }
    if args.cpu_quota.is_some() || args.cpu_period.is_some() || args.cpu_share.is_some() || args.cpuset_cpus.is_some() {
        let mut c = LinuxCpuBuilder::default();
        if let Some(v) = args.cpu_quota {
            c = c.quota(v as i64);
        }
        if let Some(v) = args.cpu_period {
            c = c.period(v);
        }
        if let Some(v) = args.cpu_share {
            c = c.shares(v);
        }
        if let Some(v) = &args.cpuset_cpus {
            c = c.cpus(v.clone());
        }
        if let Some(v) = &args.cpuset_mems {
            c = c.mems(v.clone());
        }
        r = r.cpu(c.build()?);
    }
    Ok(r.build()?)
}
