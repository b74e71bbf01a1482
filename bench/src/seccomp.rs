//! The seccomp profiles of the syscall metric: the engines' default profile
//! (containers-common's seccomp.json, which podman hands runc, crun and runsc)
//! resolved into an OCI LinuxSeccomp for this architecture and capability set,
//! claude-shim's agent profile as shipped, and the filter Claude Code's
//! sandbox puts around bwrap (no AF_UNIX sockets), compiled to BPF for
//! `bwrap --seccomp`.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::{json, Value};

/// Where Debian's golang-github-containers-common puts the engines' default profile.
pub const CONTAINERS_DEFAULT: &str = "/usr/share/containers/seccomp.json";

/// Resolves moby's profile format (archMap, includes/excludes by arch and
/// capability) into the OCI form every runtime reads.
pub fn oci_from_moby(profile: &Value, arch: &str, caps: &[&str]) -> Result<Value> {
    let arch_names: Vec<Value> = profile["archMap"]
        .as_array()
        .context("read archMap")?
        .iter()
        .find(|m| m["architecture"] == json!(oci_arch(arch)))
        .map(|m| {
            let mut v = vec![m["architecture"].clone()];
            v.extend(m["subArchitectures"].as_array().cloned().unwrap_or_default());
            v
        })
        .with_context(|| format!("find architecture {arch} in archMap"))?;
    let has = |list: &Value, want: &dyn Fn(&str) -> bool| {
        list.as_array()
            .is_some_and(|l| l.iter().filter_map(Value::as_str).any(want))
    };
    let mut rules = Vec::new();
    for rule in profile["syscalls"].as_array().context("read syscalls")? {
        let inc = &rule["includes"];
        let exc = &rule["excludes"];
        let arch_ok = inc["arches"].as_array().is_none_or(|a| a.is_empty()) || has(&inc["arches"], &|a| a == arch);
        let caps_ok = inc["caps"]
            .as_array()
            .is_none_or(|c| c.iter().filter_map(Value::as_str).all(|c| caps.contains(&c)));
        let excluded = has(&exc["arches"], &|a| a == arch) || has(&exc["caps"], &|c| caps.contains(&c));
        if !(arch_ok && caps_ok) || excluded {
            continue;
        }
        let mut r = json!({ "names": rule["names"], "action": rule["action"] });
        if let Some(args) = rule["args"].as_array().filter(|a| !a.is_empty()) {
            r["args"] = json!(args);
        }
        if let Some(e) = rule["errnoRet"].as_u64() {
            r["errnoRet"] = json!(e);
        }
        rules.push(r);
    }
    let mut out = json!({
        "defaultAction": profile["defaultAction"],
        "architectures": arch_names,
        "syscalls": rules,
    });
    if let Some(e) = profile["defaultErrnoRet"].as_u64() {
        out["defaultErrnoRet"] = json!(e);
    }
    Ok(out)
}

fn oci_arch(arch: &str) -> &'static str {
    match arch {
        "amd64" => "SCMP_ARCH_X86_64",
        "arm64" => "SCMP_ARCH_AARCH64",
        _ => "SCMP_ARCH_NATIVE",
    }
}

pub fn load_containers_default(caps: &[&str]) -> Result<Value> {
    let raw = fs::read(CONTAINERS_DEFAULT).with_context(|| format!("read {CONTAINERS_DEFAULT}"))?;
    let v: Value = serde_json::from_slice(&raw).with_context(|| format!("parse {CONTAINERS_DEFAULT}"))?;
    oci_from_moby(&v, "amd64", caps)
}

pub fn load_oci(path: &Path) -> Result<Value> {
    let raw = fs::read(path).with_context(|| format!("read {}", path.display()))?;
    serde_json::from_slice(&raw).with_context(|| format!("parse {}", path.display()))
}

/// Claude Code's sandbox filter (its apply-seccomp helper, seed 002): every
/// syscall allowed except creating AF_UNIX sockets, which fails with EPERM.
pub fn write_bwrap_bpf(path: &Path) -> Result<()> {
    use libseccomp::{ScmpAction, ScmpArgCompare, ScmpCompareOp, ScmpFilterContext, ScmpSyscall};
    let mut f = ScmpFilterContext::new(ScmpAction::Allow).context("create a seccomp filter")?;
    f.add_rule_conditional(
        ScmpAction::Errno(libc::EPERM),
        ScmpSyscall::from_name("socket").context("find syscall socket")?,
        &[ScmpArgCompare::new(0, ScmpCompareOp::Equal, libc::AF_UNIX as u64)],
    )
    .context("add the AF_UNIX rule")?;
    let mut file = fs::File::create(path).with_context(|| format!("create {}", path.display()))?;
    f.export_bpf(&mut file)
        .with_context(|| format!("write {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moby() -> Value {
        json!({
            "defaultAction": "SCMP_ACT_ERRNO",
            "defaultErrnoRet": 38,
            "archMap": [
                {"architecture": "SCMP_ARCH_X86_64", "subArchitectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"]},
                {"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": ["SCMP_ARCH_ARM"]}
            ],
            "syscalls": [
                {"names": ["getppid", "read"], "action": "SCMP_ACT_ALLOW", "args": [], "includes": {}, "excludes": {}},
                {"names": ["arch_prctl"], "action": "SCMP_ACT_ALLOW", "includes": {"arches": ["amd64", "x32"]}, "excludes": {}},
                {"names": ["sync_file_range2"], "action": "SCMP_ACT_ALLOW", "includes": {"arches": ["ppc64le"]}, "excludes": {}},
                {"names": ["mount"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}, "excludes": {}},
                {"names": ["mount"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1, "includes": {}, "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
                {"names": ["personality"], "action": "SCMP_ACT_ALLOW",
                 "args": [{"index": 0, "value": 0, "valueTwo": 0, "op": "SCMP_CMP_EQ"}], "includes": {}, "excludes": {}}
            ]
        })
    }

    fn names(v: &Value) -> Vec<String> {
        v["syscalls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| format!("{}:{}", r["names"][0].as_str().unwrap(), r["action"].as_str().unwrap()))
            .collect()
    }

    #[test]
    fn moby_profile_resolves_for_amd64_without_sys_admin() {
        let v = oci_from_moby(&moby(), "amd64", &["CAP_KILL"]).unwrap();
        assert_eq!(v["defaultErrnoRet"], 38);
        assert_eq!(
            v["architectures"],
            json!(["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"])
        );
        assert_eq!(
            names(&v),
            [
                "getppid:SCMP_ACT_ALLOW",
                "arch_prctl:SCMP_ACT_ALLOW",
                "mount:SCMP_ACT_ERRNO",
                "personality:SCMP_ACT_ALLOW"
            ]
        );
        assert!(v["syscalls"][0].get("args").is_none(), "empty args are dropped");
        assert_eq!(v["syscalls"][3]["args"][0]["op"], "SCMP_CMP_EQ");
        assert_eq!(v["syscalls"][2]["errnoRet"], 1);
    }

    #[test]
    fn moby_profile_with_sys_admin_allows_mount() {
        let v = oci_from_moby(&moby(), "amd64", &["CAP_SYS_ADMIN"]).unwrap();
        assert!(names(&v).contains(&"mount:SCMP_ACT_ALLOW".to_owned()));
        assert!(!names(&v).contains(&"mount:SCMP_ACT_ERRNO".to_owned()));
    }

    #[test]
    fn the_installed_containers_profile_resolves() {
        // hack/bench installs golang-github-containers-common; CI has it.
        let v = load_containers_default(&["CAP_KILL"]).unwrap();
        assert_eq!(v["defaultAction"], "SCMP_ACT_ERRNO");
        assert!(v["syscalls"].as_array().unwrap().len() > 5);
    }

    #[test]
    fn the_bwrap_filter_compiles_to_bpf() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.bpf");
        write_bwrap_bpf(&p).unwrap();
        let len = fs::metadata(&p).unwrap().len();
        assert!(
            len > 0 && len.is_multiple_of(8),
            "BPF is 8-byte instructions, got {len} bytes"
        );
    }
}
