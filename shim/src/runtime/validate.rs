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

use anyhow::{bail, Result};
use oci_spec::runtime::{Process, Spec};
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
        ids_in_range(p)?;
    }
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

/// Refuses what an exec's process must not hold.
pub fn process(process: &Process) -> Result<()> {
    let value = serde_json::to_value(process)?;
    if let Some(field) = nul_field(&value, "process") {
        bail!("{field} holds a NUL byte");
    }
    ids_in_range(process)
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
