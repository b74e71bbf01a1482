//! Checks of a spec (or an exec's process) that libcontainer does not make,
//! run before anything is created. Each failure names the field.
//!
//! - No string may hold a NUL byte: every one of them ends up as a C string
//!   (an argv or envp entry, a path, a mount option, a hostname), and
//!   libcontainer's init panics on the conversion instead of failing (issue 11).
//! - A namespace type is listed once: the OCI spec leaves two entries of one
//!   type undefined, and libcontainer silently uses one of them.
//! - A user or group id is in 0..=2147483647, as runc requires: 4294967295
//!   is (uid_t)-1, which setuid/setgid take as "leave unchanged", so the
//!   process would keep the runtime's root.
//! - `linux.resources.unified` only where cgroup v2 is the whole setup.
//! - rlimits with soft above hard, relative hook paths and an AppArmor
//!   profile the machine cannot apply are refused naming what is wrong; the
//!   kernel or libcontainer said only EINVAL or ENOENT.

use anyhow::{bail, Result};
use oci_spec::runtime::{LinuxResources, Process, Spec};
use serde_json::Value;

/// The largest id runc accepts (the kernel's ids are signed in places).
const MAX_ID: u32 = i32::MAX as u32;

/// Refuses what the whole spec must not hold.
pub fn spec(spec: &Spec) -> Result<()> {
    let value = serde_json::to_value(spec)?;
    if let Some(field) = nul_field(&value, "") {
        bail!("{field} holds a NUL byte");
    }
    if let Some(p) = spec.process() {
        process_fields(p)?;
    }
    hooks_absolute(spec)?;
    let resources = spec.linux().as_ref().and_then(|l| l.resources().as_ref());
    unified_only_on_v2(resources)?;
    let mut seen = Vec::new();
    for (i, ns) in spec
        .linux()
        .as_ref()
        .and_then(|l| l.namespaces().as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        if seen.contains(&ns.typ()) {
            bail!("linux.namespaces[{i}]: the {} namespace is listed twice", ns.typ());
        }
        seen.push(ns.typ());
    }
    Ok(())
}

/// `linux.resources.unified` names cgroup v2 files: on v1 hierarchies they
/// do not exist, and libcgroups' v1 manager skips them without a word (runc:
/// "cannot use unified on cgroup v1").
pub fn unified_only_on_v2(resources: Option<&LinuxResources>) -> Result<()> {
    let unified = resources.and_then(|r| r.unified().as_ref()).filter(|u| !u.is_empty());
    if let Some(files) = unified {
        if !super::cgroup_v2::is_unified() {
            let mut names: Vec<&String> = files.keys().collect();
            names.sort();
            bail!(
                "linux.resources.unified sets {}: cgroup v2 files, and this machine's cgroups are v1",
                names.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(", ")
            );
        }
    }
    Ok(())
}

/// Refuses what an exec's process must not hold.
pub fn process(process: &Process) -> Result<()> {
    let value = serde_json::to_value(process)?;
    if let Some(field) = nul_field(&value, "process") {
        bail!("{field} holds a NUL byte");
    }
    process_fields(process)
}

/// The checks of a process a create and an exec share.
fn process_fields(process: &Process) -> Result<()> {
    ids_in_range(process)?;
    rlimits_ordered(process)?;
    super::apparmor::check("process.apparmorProfile", process.apparmor_profile().as_deref())
}

/// setrlimit(2) refuses a soft limit above the hard one with a bare EINVAL
/// from inside the init; say which limit and both values.
fn rlimits_ordered(process: &Process) -> Result<()> {
    for (i, r) in process.rlimits().iter().flatten().enumerate() {
        if r.soft() > r.hard() {
            bail!(
                "process.rlimits[{i}] {}: the soft limit {} is above the hard limit {}",
                serde_json::to_value(r.typ())?.as_str().unwrap_or("?"),
                r.soft(),
                r.hard()
            );
        }
    }
    Ok(())
}

/// The runtime spec wants every hook's path absolute; a relative one failed
/// at start with "No such file or directory" and no path.
fn hooks_absolute(spec: &Spec) -> Result<()> {
    let Some(h) = spec.hooks() else { return Ok(()) };
    let kinds = [
        ("prestart", h.prestart()),
        ("createRuntime", h.create_runtime()),
        ("createContainer", h.create_container()),
        ("startContainer", h.start_container()),
        ("poststart", h.poststart()),
        ("poststop", h.poststop()),
    ];
    for (kind, hooks) in kinds {
        for (i, hook) in hooks.iter().flatten().enumerate() {
            if !hook.path().is_absolute() {
                bail!(
                    "hooks.{kind}[{i}].path {:?}: it must be an absolute path (runtime spec)",
                    hook.path().display().to_string()
                );
            }
        }
    }
    Ok(())
}

fn ids_in_range(process: &Process) -> Result<()> {
    let user = process.user();
    let ids = [("uid", user.uid()), ("gid", user.gid())]
        .into_iter()
        .map(|(f, id)| (f.to_owned(), id))
        .chain(
            user.additional_gids()
                .iter()
                .flatten()
                .enumerate()
                .map(|(i, id)| (format!("additionalGids[{i}]"), *id)),
        );
    for (field, id) in ids {
        if id > MAX_ID {
            bail!("process.user.{field}: {id} is out of range (uids and gids must be in 0-{MAX_ID})");
        }
    }
    Ok(())
}

/// The path of the first string (or object key) in `v` that holds a NUL.
fn nul_field(v: &Value, at: &str) -> Option<String> {
    match v {
        Value::String(s) if s.contains('\0') => Some(at.to_owned()),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| nul_field(item, &format!("{at}[{i}]"))),
        Value::Object(map) => map.iter().find_map(|(k, item)| {
            let path = if at.is_empty() { k.clone() } else { format!("{at}.{k}") };
            if k.contains('\0') {
                return Some(format!("{path:?}"));
            }
            nul_field(item, &path)
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_bytes_are_refused_with_their_field() {
        let mut s = Spec::default();
        spec(&s).unwrap();
        let mut p = s.process().clone().unwrap();
        p.set_env(Some(vec!["PATH=/bin".into(), "A=x\0y".into()]));
        s.set_process(Some(p.clone()));
        assert_eq!(spec(&s).unwrap_err().to_string(), "process.env[1] holds a NUL byte");
        assert_eq!(process(&p).unwrap_err().to_string(), "process.env[1] holds a NUL byte");
        let mut s = Spec::default();
        s.set_hostname(Some("a\0b".into()));
        assert_eq!(spec(&s).unwrap_err().to_string(), "hostname holds a NUL byte");
    }

    #[test]
    fn rlimits_and_hooks_are_refused_with_what_is_wrong() {
        use oci_spec::runtime::{HookBuilder, HooksBuilder, PosixRlimitBuilder, PosixRlimitType};
        let mut s = Spec::default();
        let mut p = s.process().clone().unwrap();
        let r = PosixRlimitBuilder::default()
            .typ(PosixRlimitType::RlimitNofile)
            .soft(2048u64)
            .hard(1024u64)
            .build()
            .unwrap();
        p.set_rlimits(Some(vec![r]));
        assert_eq!(
            process(&p).unwrap_err().to_string(),
            "process.rlimits[0] RLIMIT_NOFILE: the soft limit 2048 is above the hard limit 1024"
        );
        let hook = HookBuilder::default().path("hooks/x").build().unwrap();
        s.set_hooks(Some(HooksBuilder::default().poststop(vec![hook]).build().unwrap()));
        assert_eq!(
            spec(&s).unwrap_err().to_string(),
            "hooks.poststop[0].path \"hooks/x\": it must be an absolute path (runtime spec)"
        );
    }

    #[test]
    fn duplicate_namespaces_are_refused() {
        let mut s = Spec::default();
        let mut linux = s.linux().clone().unwrap();
        let mut ns = linux.namespaces().clone().unwrap();
        ns.push(ns[0].clone());
        let i = ns.len() - 1;
        linux.set_namespaces(Some(ns));
        s.set_linux(Some(linux));
        let err = spec(&s).unwrap_err().to_string();
        assert!(err.starts_with(&format!("linux.namespaces[{i}]: the ")), "{err}");
        assert!(err.ends_with("namespace is listed twice"), "{err}");
    }

    #[test]
    fn ids_past_runcs_range_are_refused_with_their_field() {
        let mut s = Spec::default();
        let mut p = s.process().clone().unwrap();
        let mut u = p.user().clone();
        u.set_uid(i32::MAX as u32);
        u.set_additional_gids(Some(vec![5, u32::MAX]));
        p.set_user(u.clone());
        s.set_process(Some(p.clone()));
        let err = spec(&s).unwrap_err().to_string();
        assert_eq!(
            err,
            "process.user.additionalGids[1]: 4294967295 is out of range (uids and gids must be in 0-2147483647)"
        );
        u.set_additional_gids(None);
        u.set_gid(u32::MAX);
        p.set_user(u);
        assert!(process(&p)
            .unwrap_err()
            .to_string()
            .starts_with("process.user.gid: 4294967295"));
    }
}
