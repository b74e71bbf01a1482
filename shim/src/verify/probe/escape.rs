//! Escape chains, each run to its end in a disposable child so that a step
//! that unexpectedly works cannot change the probe: the seed's nested user
//! namespace chain (unshare, map root, pivot_root, umount2, rename a protected
//! file), the cgroup v1 release_agent escape (CVE-2022-0492), and whether an
//! execve after dropping every capability regains any (the path a setuid-root
//! file takes; no_new_privs is what stops it).

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use nix::errno::Errno;
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::{unshare, CloneFlags};
use serde::{Deserialize, Serialize};

use super::status::ProcStatus;
use super::sys::{self, End};
use crate::verify::expect::errno_name;
use crate::verify::outcome::Finding;
use crate::verify::plan::StatusField;

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
struct Step {
    step: String,
    /// None: it worked; Some(errno name): refused.
    refused: Option<String>,
}

fn step(steps: &mut Vec<Step>, name: &str, r: Result<(), Errno>) -> bool {
    steps.push(Step {
        step: name.to_owned(),
        refused: r.err().map(errno_name),
    });
    r.is_ok()
}

/// `unshare --map-root-user`: setgroups deny, then map uid and gid 0 onto ours.
fn map_root(uid: u32, gid: u32) -> Result<(), Errno> {
    let write = |path: &str, text: String| {
        fs::write(path, text).map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("0 {uid} 1"))?;
    write("/proc/self/gid_map", format!("0 {gid} 1"))
}

fn run_steps(f: impl FnOnce(&mut Vec<Step>)) -> Result<Vec<Step>, String> {
    let out = sys::in_child(|| {
        let mut steps = Vec::new();
        f(&mut steps);
        serde_json::to_vec(&steps).unwrap_or_default()
    });
    match out {
        Ok((bytes, end)) => serde_json::from_slice(&bytes).map_err(|_| match end {
            End::Exited(c) => format!("the chain's child exited with {c} without a result"),
            End::Signaled(s) => format!("the chain's child died of {s}"),
        }),
        Err(e) => Err(format!("fork: {}", errno_name(e))),
    }
}

fn describe(steps: &[Step]) -> String {
    match steps.first() {
        Some(Step {
            step,
            refused: Some(errno),
        }) if steps.len() == 1 => format!("refused at {step}: {errno}"),
        _ => steps
            .iter()
            .map(|s| format!("{}: {}", s.step, s.refused.as_deref().unwrap_or("ok")))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

fn refused_at_first_with_eperm(steps: &[Step]) -> bool {
    steps.first().and_then(|s| s.refused.as_deref()) == Some("EPERM")
}

/// The seed's chain. PROBES.md 1: it must stop at the first step with EPERM
/// (ENOSPC would only mean a namespace limit was hit), and the file must be
/// as it was.
pub fn nested_userns(protected: &Path) -> Finding {
    let before = match fs::read(protected) {
        Ok(b) => b,
        Err(e) => {
            return Finding::fail(format!(
                "cannot check: {} is not readable ({})",
                protected.display(),
                errno_name(Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))
            ))
        }
    };
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    let protected = protected.to_path_buf();
    let moved = {
        let mut s = protected.clone().into_os_string();
        s.push(".claude-shim-probe");
        std::path::PathBuf::from(s)
    };
    let chain = run_steps(|steps| {
        if !step(
            steps,
            "unshare(NEWUSER|NEWNS)",
            unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS),
        ) {
            return;
        }
        step(steps, "map root", map_root(uid, gid));
        step(
            steps,
            "make / private",
            mount(
                None::<&str>,
                "/",
                None::<&str>,
                MsFlags::MS_REC | MsFlags::MS_PRIVATE,
                None::<&str>,
            ),
        );
        step(steps, "chdir /", nix::unistd::chdir("/"));
        step(steps, "pivot_root(., .)", nix::unistd::pivot_root(".", "."));
        step(steps, "umount2(., MNT_DETACH)", umount2(".", MntFlags::MNT_DETACH));
        let renamed =
            fs::rename(&protected, &moved).map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)));
        if renamed.is_ok() {
            // Put it back at once; the finding is already a FAIL.
            let _ = fs::rename(&moved, &protected);
        }
        step(steps, "rename the protected file", renamed);
    });
    let after = fs::read(&protected).ok();
    let unchanged = after.as_deref() == Some(before.as_slice());
    let file = if unchanged { "file unchanged" } else { "FILE CHANGED" };
    match chain {
        Ok(steps) => Finding::judge(
            refused_at_first_with_eperm(&steps) && unchanged,
            format!("{}; {file}", describe(&steps)),
        ),
        Err(why) => Finding::fail(format!("{why}; {file}")),
    }
}

/// CVE-2022-0492: from a new user, mount and cgroup namespace, mount a cgroup
/// v1 hierarchy (whose release_agent runs as root on the host). Nothing is
/// ever written to release_agent; the mount lives in the child's namespace and
/// goes with it.
pub fn cgroup_release_agent() -> Finding {
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    let chain = run_steps(|steps| {
        if !step(
            steps,
            "unshare(NEWUSER|NEWNS|NEWCGROUP)",
            unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWCGROUP),
        ) {
            return;
        }
        step(steps, "map root", map_root(uid, gid));
        step(
            steps,
            "make / private",
            mount(
                None::<&str>,
                "/",
                None::<&str>,
                MsFlags::MS_REC | MsFlags::MS_PRIVATE,
                None::<&str>,
            ),
        );
        let target = ["/sys/fs/cgroup", "/tmp", "/mnt", "/"]
            .into_iter()
            .find(|p| Path::new(p).is_dir())
            .unwrap_or("/");
        // The exploit mounts a v1 controller nobody else mounted (rdma);
        // try each enabled one, as it would.
        let mut mounted = Err(Errno::ENOENT);
        let mut tried = "none".to_owned();
        for controller in v1_controllers() {
            mounted = mount(
                Some("cgroup"),
                target,
                Some("cgroup"),
                MsFlags::empty(),
                Some(controller.as_str()),
            );
            tried = controller;
            if mounted.is_ok() {
                break;
            }
        }
        step(steps, &format!("mount cgroup v1 ({tried})"), mounted);
        if mounted.is_ok() {
            let agent = Path::new(target).join("release_agent");
            step(
                steps,
                "release_agent present",
                if agent.exists() { Ok(()) } else { Err(Errno::ENOENT) },
            );
            let _ = umount2(target, MntFlags::MNT_DETACH);
        }
    });
    match chain {
        Ok(steps) => Finding::judge(refused_at_first_with_eperm(&steps), describe(&steps)),
        Err(why) => Finding::fail(why),
    }
}

/// Enabled v1 controllers of /proc/cgroups: rdma (the exploit's choice), then unmounted ones, first.
fn v1_controllers() -> Vec<String> {
    let text = fs::read_to_string("/proc/cgroups").unwrap_or_default();
    let mut found: Vec<(bool, bool, String)> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4 && f[3] == "1").then(|| (f[0] != "rdma", f[1] != "0", f[0].to_owned()))
        })
        .collect();
    // A hierarchy nobody mounted yet (hierarchy 0) is the one the exploit creates.
    found.sort();
    found.into_iter().map(|(_, _, name)| name).collect()
}

/// The fields `__probe --print-status` prints: what an execve left.
pub const EXEC_STATUS_FIELDS: &[StatusField] = &[
    StatusField::CapPrm,
    StatusField::CapEff,
    StatusField::CapAmb,
    StatusField::NoNewPrivs,
];

/// `__probe --print-status`: this process's privileges as one JSON object.
pub fn print_status() -> anyhow::Result<()> {
    let s = ProcStatus::read_self()?;
    let mut out = serde_json::Map::new();
    for f in EXEC_STATUS_FIELDS {
        out.insert(f.key().to_owned(), s.get(*f).into());
    }
    out.insert("Uid".into(), s.ids("Uid").into());
    println!("{}", serde_json::Value::Object(out));
    Ok(())
}

/// Drops every capability, then executes the probe again (as root, the
/// kernel's rule for a setuid-root file applies to any execve) and reads
/// what the new program holds.
pub fn exec_gains_nothing() -> Finding {
    let (uid, euid) = (nix::unistd::getuid(), nix::unistd::geteuid());
    if !uid.is_root() && !euid.is_root() {
        return Finding::not_applicable(
            format!("runs as uid {uid}"),
            "no setuid-root file to exercise without root; NoNewPrivs covers setuid",
        );
    }
    let out = sys::in_child(|| {
        if let Err(e) = sys::drop_capabilities() {
            return format!("!capset: {}", errno_name(e)).into_bytes();
        }
        match Command::new("/proc/self/exe")
            .args([crate::verify::PROBE_VERB, "--print-status"])
            .env_clear()
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
        {
            Ok(o) => o.stdout,
            Err(e) => format!("!execve: {e}").into_bytes(),
        }
    });
    let bytes = match out {
        Ok((b, _)) => b,
        Err(e) => return Finding::fail(format!("cannot check: fork: {}", errno_name(e))),
    };
    let text = String::from_utf8_lossy(&bytes);
    if let Some(err) = text.strip_prefix('!') {
        return Finding::fail(format!("cannot check: {err}"));
    }
    let Ok(v) = serde_json::from_str::<serde_json::Value>(text.trim()) else {
        return Finding::fail(format!("cannot check: unreadable status {:?}", text.trim()));
    };
    let get = |k: &str| v[k].as_u64();
    match (get("CapPrm"), get("CapEff"), get("CapAmb")) {
        (Some(prm), Some(eff), Some(amb)) => Finding::judge(
            prm | eff | amb == 0,
            format!("after execve: CapPrm {prm:016x} CapEff {eff:016x} CapAmb {amb:016x}"),
        ),
        _ => Finding::fail(format!("cannot check: status without capabilities: {v}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(step: &str, refused: Option<&str>) -> Step {
        Step {
            step: step.into(),
            refused: refused.map(str::to_owned),
        }
    }

    #[test]
    fn only_a_refusal_at_the_first_step_with_eperm_passes() {
        assert!(refused_at_first_with_eperm(&[s("unshare", Some("EPERM"))]));
        assert!(!refused_at_first_with_eperm(&[s("unshare", Some("ENOSPC"))]));
        assert!(!refused_at_first_with_eperm(&[
            s("unshare", None),
            s("rename", Some("EROFS"))
        ]));
        assert!(!refused_at_first_with_eperm(&[]));
        assert_eq!(describe(&[s("unshare", Some("EPERM"))]), "refused at unshare: EPERM");
        assert_eq!(
            describe(&[s("unshare", None), s("rename", Some("EROFS"))]),
            "unshare: ok, rename: EROFS"
        );
    }

    // Unfiltered and as root, the chain gets past its first step: the probe
    // reports it (and puts a renamed file back).
    #[test]
    fn unconfined_the_chain_is_not_refused() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("config");
        fs::write(&f, b"[core]\n").unwrap();
        let found = nested_userns(&f);
        assert_eq!(found.pass, Some(false), "{found:?}");
        assert!(found.observed.starts_with("unshare(NEWUSER|NEWNS): ok"), "{found:?}");
        assert!(found.observed.ends_with("file unchanged"), "{found:?}");
        assert_eq!(fs::read(&f).unwrap(), b"[core]\n");
        let found = nested_userns(&d.path().join("absent"));
        assert_eq!(found.pass, Some(false));
        assert!(found.observed.starts_with("cannot check"), "{found:?}");
    }
}
