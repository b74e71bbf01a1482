//! `update`: new resource limits for a running container.

use std::io::Read;

use anyhow::{anyhow, Context, Result};
use libcontainer::oci_spec::runtime::{
    LinuxBlockIoBuilder, LinuxCpuBuilder, LinuxMemoryBuilder, LinuxPidsBuilder, LinuxResources, LinuxResourcesBuilder,
};

use crate::runtime::Runtime;

pub fn update(rt: &Runtime, args: &crate::cli::Update) -> Result<i32> {
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

fn from_flags(args: &crate::cli::Update) -> Result<LinuxResources> {
    let mut r = LinuxResourcesBuilder::default();
    if args.memory.is_some() || args.memory_swap.is_some() || args.memory_reservation.is_some() {
        let mut m = LinuxMemoryBuilder::default();
        if let Some(v) = args.memory {
            m = m.limit(v);
        }
        if let Some(v) = args.memory_swap {
            m = m.swap(v);
        }
        if let Some(v) = args.memory_reservation {
            m = m.reservation(v);
        }
        r = r.memory(m.build()?);
    }
    if let Some(v) = args.pids_limit {
        r = r.pids(LinuxPidsBuilder::default().limit(v).build()?);
    }
    if let Some(v) = args.blkio_weight {
        let weight = u16::try_from(v).map_err(|_| anyhow!("use --blkio-weight {v}: it is out of range"))?;
        r = r.block_io(LinuxBlockIoBuilder::default().weight(weight).build()?);
    }
    let cpu = [args.cpu_period, args.cpu_share, args.cpu_rt_period]
        .iter()
        .any(Option::is_some)
        || args.cpu_quota.is_some()
        || args.cpu_rt_runtime.is_some()
        || args.cpuset_cpus.is_some()
        || args.cpuset_mems.is_some();
    if cpu {
        let mut c = LinuxCpuBuilder::default();
        if let Some(v) = args.cpu_quota {
            c = c.quota(v);
        }
        if let Some(v) = args.cpu_period {
            c = c.period(v);
        }
        if let Some(v) = args.cpu_rt_period {
            c = c.realtime_period(v);
        }
        if let Some(v) = args.cpu_rt_runtime {
            c = c.realtime_runtime(v);
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
