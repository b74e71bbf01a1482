//! Capability names the runtime does not know, in config.json or an exec's
//! process file: dropped with a warning, as runc does ("ignoring unknown or
//! unavailable capabilities"), instead of failing the whole parse. A name
//! dropped grants nothing, so the process only ever holds less than asked.

use anyhow::{anyhow, Result};
use libcontainer::oci_spec::runtime::Capability;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Parses `raw` as `T`; if that fails, tries again without the capability
/// names oci-spec does not know (in the capability sets at `caps_at`, a JSON
/// pointer) and warns about them. Any other error is the first parse's, with
/// its line and column.
pub fn parse<T: DeserializeOwned>(raw: &[u8], caps_at: &str, what: &str) -> Result<T> {
    let first = match serde_json::from_slice::<T>(raw) {
        Ok(t) => return Ok(t),
        Err(e) => e,
    };
    let failed = || anyhow!("parse {what}: {first}");
    let mut v: Value = serde_json::from_slice(raw).map_err(|_| failed())?;
    let dropped = v.pointer_mut(caps_at).map(drop_unknown).unwrap_or_default();
    if dropped.is_empty() {
        return Err(failed());
    }
    let t = serde_json::from_value::<T>(v).map_err(|_| failed())?;
    tracing::warn!("{what}: ignoring unknown capabilities: {}", dropped.join(", "));
    Ok(t)
}

/// Removes every name that is not a capability from each set of `caps`;
/// returns them, each once.
fn drop_unknown(caps: &mut Value) -> Vec<String> {
    let mut dropped = Vec::new();
    let Some(sets) = caps.as_object_mut() else {
        return dropped;
    };
    for set in sets.values_mut() {
        let Some(names) = set.as_array_mut() else { continue };
        names.retain(|n| {
            let known = serde_json::from_value::<Capability>(n.clone()).is_ok();
            if !known {
                let name = n.as_str().map_or_else(|| n.to_string(), str::to_owned);
                if !dropped.contains(&name) {
                    dropped.push(name);
                }
            }
            known
        });
    }
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;
    use libcontainer::oci_spec::runtime::Process;

    #[test]
    fn unknown_names_are_dropped_and_the_rest_kept() {
        let raw = br#"{"cwd": "/", "args": ["true"], "user": {"uid": 0, "gid": 0},
            "capabilities": {"bounding": ["CAP_KILL", "CAP_BOGUS"], "effective": ["CAP_BOGUS", "CAP_CHOWN"]}}"#;
        let p: Process = parse(raw, "/capabilities", "process.json").unwrap();
        let caps = p.capabilities().as_ref().unwrap();
        assert_eq!(caps.bounding().as_ref().unwrap().len(), 1);
        assert!(caps.bounding().as_ref().unwrap().contains(&Capability::Kill));
        assert!(caps.effective().as_ref().unwrap().contains(&Capability::Chown));
    }

    #[test]
    fn other_errors_keep_their_place() {
        let raw = br#"{"cwd": "/", "args": ["true"], "user": {"uid": "x", "gid": 0}}"#;
        let e = parse::<Process>(raw, "/capabilities", "process.json")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("parse process.json: ") && e.contains("line 1"), "{e}");
    }
}
