//! `spec`: write runc's default config.json (or its rootless variant).

use std::io::Write;

use anyhow::{bail, Context, Result};
use libcontainer::oci_spec::runtime::Spec;

pub fn default_spec(rootless: bool) -> Spec {
    let mut spec = if rootless {
        Spec::rootless(nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw())
    } else {
        Spec::default()
    };
    // A cgroup namespace only where cgroups are v2 alone, as in runc's
    // template (oci-spec lists one always): on a v1 or hybrid host runc's
    // containers see the host's cgroup paths, and its bats suite expects them.
    if !crate::runtime::cgroup_v2::is_unified() {
        if let Some(linux) = spec.linux_mut().as_mut() {
            if let Some(ns) = linux.namespaces_mut().as_mut() {
                ns.retain(|n| n.typ() != libcontainer::oci_spec::runtime::LinuxNamespaceType::Cgroup);
            }
        }
    }
    if let Some(p) = spec.process_mut() {
        p.set_terminal(Some(true));
        p.set_args(Some(vec!["sh".to_owned()]));
        // No inheritable or ambient capabilities, as in runc's template since
        // CVE-2022-29162: with them, a file capability or an exec'd
        // program gains what the container was never meant to pass on.
        if let Some(mut caps) = p.capabilities().clone() {
            caps.set_inheritable(None);
            caps.set_ambient(None);
            p.set_capabilities(Some(caps));
        }
    }
    spec
}

pub fn spec(args: &liboci_cli::Spec) -> Result<i32> {
    let dir = args.bundle.clone().unwrap_or_else(|| ".".into());
    let path = dir.join("config.json");
    if path.exists() {
        bail!("write {}: it exists; remove it first", path.display());
    }
    let json = serde_json::to_string_pretty(&default_spec(args.rootless))?;
    let mut f = std::fs::File::create_new(&path).with_context(|| format!("write {}", path.display()))?;
    writeln!(f, "{json}").with_context(|| format!("write {}", path.display()))?;
    Ok(0)
}
