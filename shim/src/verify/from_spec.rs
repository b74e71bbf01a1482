//! What the probe must find, derived from a sandbox's compiled spec and the
//! policy's invocation: the spec says what was asked (mounts, namespaces,
//! capabilities, seccomp), the host says what must stay out of reach (its
//! namespaces, its pids, its secrets and sockets). Used by `claude-shim verify`.

mod network;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use claude_shim_bundle::policy::is_secret_name;
use claude_shim_bundle::{Invocation, Policy, RunAs};
use nix::errno::Errno;
use oci_spec::runtime::{Capability, LinuxNamespaceType, Spec};

use super::expect::{
    EmptyHome, EnvExpect, Errnos, EscapesExpect, NamespaceExpect, NestedUserns, PathsExpect, PidExpect, ReadOnlyPath,
    RootOnlyExpect, SocketsExpect, StatusExpect, TtyExpect, UserIds,
};
use super::{Expectations, HostFacts};
use network::network_expect;
pub use network::Reach;

/// Names a secret must never be passed under, whether or not the caller has them set.
const ALWAYS_ABSENT: &[&str] = &[
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "SSH_AUTH_SOCK",
    "AWS_SECRET_ACCESS_KEY",
    "CLAUDE_CODE_OAUTH_TOKEN",
];

fn cap_bits(set: Option<&std::collections::HashSet<Capability>>) -> u64 {
    let Some(set) = set else { return 0 };
    set.iter().map(|c| 1u64 << cap_number(*c)).sum()
}

fn cap_number(c: Capability) -> u32 {
    let name = format!("CAP_{c}").to_ascii_uppercase();
    crate::commands::features::CAPABILITIES
        .iter()
        .position(|n| *n == name)
        .unwrap_or(63) as u32
}

fn ns_kind(t: LinuxNamespaceType) -> Option<&'static str> {
    Some(match t {
        LinuxNamespaceType::Pid => "pid",
        LinuxNamespaceType::Ipc => "ipc",
        LinuxNamespaceType::Uts => "uts",
        LinuxNamespaceType::Mount => "mnt",
        LinuxNamespaceType::Network => "net",
        LinuxNamespaceType::Cgroup => "cgroup",
        LinuxNamespaceType::User => "user",
        LinuxNamespaceType::Time => "time",
    })
}

/// How many of the census's sockets become rows (those the sandbox covers
/// first): a desktop has hundreds, mostly behind the private /run and /tmp.
const CENSUS_ROWS: usize = 24;

fn is_socket(p: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_socket())
}

/// Host unix sockets the sandbox must not reach: the caller's agent socket,
/// engine sockets, sockets in the host's /tmp (IDE and agent bridges), and
/// the socket census's (those the sandbox covers with /dev/null first, then
/// those it does not show), but the ones the policy names.
fn host_sockets(
    policy: &Policy,
    inv: &Invocation,
    mounts: &[oci_spec::runtime::Mount],
    census: Vec<PathBuf>,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some((_, v)) = inv.env.iter().find(|(k, _)| k == "SSH_AUTH_SOCK") {
        out.push(PathBuf::from(v));
    }
    for p in [
        "/run/docker.sock",
        "/var/run/docker.sock",
        "/run/podman/podman.sock",
        "/run/containerd/containerd.sock",
    ] {
        out.push(PathBuf::from(p));
    }
    if let Ok(entries) = std::fs::read_dir("/tmp") {
        out.extend(entries.flatten().map(|e| e.path()).filter(|p| is_socket(p)).take(8));
    }
    out.retain(|p| is_socket(p) && !p.starts_with(&inv.workdir));
    let covered = mounts
        .iter()
        .filter(|m| m.source().as_deref() == Some(Path::new("/dev/null")) && is_socket(m.destination()))
        .map(|m| m.destination().clone());
    let named: Vec<PathBuf> = policy
        .filesystem
        .unix_sockets
        .iter()
        .map(|b| b.path.expand(&inv.home))
        .flat_map(|p| [std::fs::canonicalize(&p).unwrap_or_else(|_| p.clone()), p])
        .collect();
    let mut rows: Vec<PathBuf> = Vec::new();
    for p in covered.chain(census) {
        let real = std::fs::canonicalize(&p).unwrap_or_else(|_| p.clone());
        if rows.len() < CENSUS_ROWS && is_socket(&real) && !named.contains(&real) && !rows.contains(&p) {
            rows.push(p);
        }
    }
    for p in rows {
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// The home the spec empties (a writable tmpfs at the caller's home), with
/// the names of what comes back in it.
fn empty_home(inv: &Invocation, mounts: &[oci_spec::runtime::Mount]) -> Option<EmptyHome> {
    let home = std::fs::canonicalize(&inv.home).ok()?;
    mounts.iter().find(|m| {
        m.destination() == &home
            && m.typ().as_deref() == Some("tmpfs")
            && !m.options().iter().flatten().any(|o| o == "ro")
    })?;
    let mut kept: Vec<String> = mounts
        .iter()
        .filter_map(|m| m.destination().strip_prefix(&home).ok())
        .filter_map(|rel| rel.components().next())
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    kept.sort();
    kept.dedup();
    Some(EmptyHome { path: home, kept })
}

/// Files only root may read, checked from inside whoever the sandbox runs as.
const ROOT_ONLY_FILES: &[&str] = &["/etc/shadow", "/etc/gshadow"];

/// Who the spec runs its process as on the host (what `RunAs` decided).
fn run_as(inv: &Invocation, spec: &Spec) -> RunAs {
    if inv.unprivileged {
        return RunAs::Caller {
            uid: inv.uid,
            gid: inv.gid,
        };
    }
    let user = spec.process().as_ref().map(|p| p.user().clone()).unwrap_or_default();
    let linux = spec.linux().clone().unwrap_or_default();
    let mapped = |maps: Option<&Vec<oci_spec::runtime::LinuxIdMapping>>, id: u32| {
        maps.and_then(|m| m.iter().find(|m| m.container_id() == id).map(|m| m.host_id()))
            .unwrap_or(id)
    };
    let uid = mapped(linux.uid_mappings().as_ref(), user.uid());
    let gid = mapped(linux.gid_mappings().as_ref(), user.gid());
    if uid == 0 {
        RunAs::RootMasked
    } else {
        RunAs::Owner { uid, gid }
    }
}

/// The identity row and the root-only files of the host the sandbox shows
/// (its own root's, with a rootfs, are not the host's).
fn root_only_expect(inv: &Invocation, spec: &Spec) -> RootOnlyExpect {
    use std::os::unix::fs::PermissionsExt;
    let mounts = spec.mounts().clone().unwrap_or_default();
    let shows_host = |p: &Path| {
        mounts.iter().any(|m| {
            m.destination() != Path::new("/")
                && p.starts_with(m.destination())
                && m.source().as_deref() == Some(m.destination().as_path())
        })
    };
    let unreadable = ROOT_ONLY_FILES
        .iter()
        .map(PathBuf::from)
        .filter(|p| {
            std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o004 == 0)
                && !p.starts_with(&inv.workdir)
                && shows_host(p)
        })
        .collect();
    RootOnlyExpect {
        run_as: run_as(inv, spec).describe(),
        unreadable,
    }
}

/// A few abstract unix sockets of the host (/proc/net/unix, names after '@').
fn host_abstract_sockets() -> Vec<String> {
    let text = std::fs::read_to_string("/proc/net/unix").unwrap_or_default();
    let mut out: Vec<String> = text
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(7))
        .filter_map(|p| p.strip_prefix('@'))
        .filter(|n| !n.is_empty() && n.is_ascii())
        .map(str::to_owned)
        .collect();
    out.sort();
    out.dedup();
    out.truncate(4);
    out
}

/// Fails where the host cannot be read for what the sandbox must not
/// reach (its socket census): fewer rows would pass for proof.
pub fn expectations(
    policy: &Policy,
    inv: &Invocation,
    spec: &Spec,
    facts: &HostFacts,
    reach: &Reach,
) -> anyhow::Result<Expectations> {
    let census = crate::sandbox::sockets::census()?;
    let process = spec.process().clone().unwrap_or_default();
    let linux = spec.linux().clone().unwrap_or_default();
    let env_names: Vec<String> = process
        .env()
        .iter()
        .flatten()
        .filter_map(|e| e.split_once('=').map(|(k, _)| k.to_owned()))
        .collect();
    let equals: BTreeMap<String, String> = process
        .env()
        .iter()
        .flatten()
        .filter_map(|e| e.split_once('='))
        .filter(|(k, _)| *k == "IS_SANDBOX")
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let mut absent: BTreeSet<String> = ALWAYS_ABSENT.iter().map(|s| s.to_string()).collect();
    absent.extend(inv.env.iter().map(|(k, _)| k.clone()).filter(|k| is_secret_name(k)));
    absent.retain(|k| !env_names.contains(k));
    let _ = policy;

    let caps = process.capabilities().clone().unwrap_or_default();
    let status = StatusExpect {
        no_new_privs: u64::from(process.no_new_privileges() == Some(true)),
        seccomp: if linux.seccomp().is_some() { 2 } else { 0 },
        cap_inh: cap_bits(caps.inheritable().as_ref()),
        cap_prm: cap_bits(caps.permitted().as_ref()),
        cap_eff: cap_bits(caps.effective().as_ref()),
        cap_bnd: cap_bits(caps.bounding().as_ref()),
        cap_amb: cap_bits(caps.ambient().as_ref()),
    };

    let mut differ = BTreeMap::new();
    for ns in linux.namespaces().iter().flatten().filter(|n| n.path().is_none()) {
        if let Some(kind) = ns_kind(ns.typ()) {
            if let Some(inode) = facts.namespaces.get(kind) {
                differ.insert(kind.to_owned(), *inode);
            }
        }
    }

    // Paths: what the mounts say must be hidden, read-only and writable.
    let mounts = spec.mounts().clone().unwrap_or_default();
    let mut hidden: Vec<PathBuf> = Vec::new();
    let mut read_only = vec![ro("/", &[Errno::EROFS]), ro("/sys", &[Errno::EROFS])];
    let mut writable = vec![inv.workdir.clone()];
    for m in &mounts {
        let opts = m.options().clone().unwrap_or_default();
        let is_ro = opts.iter().any(|o| o == "ro");
        let dest = m.destination();
        let from_devnull = m.source().as_deref() == Some(Path::new("/dev/null"));
        if from_devnull && is_socket(dest) {
            // A covered socket: a socket row checks it refuses connections.
            continue;
        }
        if from_devnull || (m.typ().as_deref() == Some("tmpfs") && is_ro) {
            hidden.push(dest.clone());
        } else if m.typ().as_deref() == Some("tmpfs") && dest == Path::new("/tmp") {
            writable.push(dest.clone());
        } else if is_ro && dest.starts_with(&inv.workdir) && *dest != inv.workdir {
            read_only.push(ro_path(dest.clone()));
        }
    }
    for top in ["/etc", "/usr"] {
        if mounts.iter().any(|m| m.destination() == Path::new(top)) {
            read_only.push(ro(top, &[Errno::EROFS]));
        }
    }
    // The home is read-only where it shows: under a bind of the host's tree
    // (a home in /tmp or /var/tmp is behind the private tmpfs and absent).
    let home_bound = mounts
        .iter()
        .filter(|m| inv.home.starts_with(m.destination()))
        .max_by_key(|m| m.destination().components().count())
        .is_some_and(|m| {
            m.typ().as_deref() == Some("bind") && m.source().as_deref() == Some(m.destination().as_path())
        });
    if home_bound && inv.home.is_dir() && !inv.workdir.starts_with(&inv.home) && inv.home != Path::new("/") {
        // Run as the project's owner, root's home may refuse it at the door.
        let refused: &[Errno] = match run_as(inv, spec) {
            RunAs::Owner { .. } => &[Errno::EROFS, Errno::EACCES],
            _ => &[Errno::EROFS],
        };
        read_only.push(ReadOnlyPath {
            path: inv.home.clone(),
            refused_with: Errnos::of(refused),
        });
    }
    for p in linux.masked_paths().iter().flatten() {
        hidden.push(PathBuf::from(p));
    }
    for p in policy.filesystem.masked_paths() {
        hidden.push(p);
    }
    // The host's /tmp must not show, unless the working directory lives in it.
    if !inv.workdir.starts_with("/tmp") {
        hidden.push(PathBuf::from("/tmp"));
    }
    hidden.sort();
    hidden.dedup();
    read_only.push(ReadOnlyPath {
        path: PathBuf::from("/proc/sys/kernel/core_pattern"),
        refused_with: Errnos::of(&[Errno::EROFS, Errno::EACCES]),
    });
    if Path::new("/proc/sysrq-trigger").exists() {
        read_only.push(ReadOnlyPath {
            path: PathBuf::from("/proc/sysrq-trigger"),
            refused_with: Errnos::of(&[Errno::EROFS, Errno::EACCES]),
        });
    }

    let protected = inv.workdir.join(".git/config");
    let nested_userns = protected.is_file().then_some(NestedUserns {
        protected_file: protected,
    });

    Ok(Expectations {
        env: EnvExpect {
            equals,
            absent: absent.into_iter().collect(),
            allowed: Some(env_names),
        },
        user: Some(UserIds {
            uid: process.user().uid(),
            gid: process.user().gid(),
        }),
        root_only: Some(root_only_expect(inv, spec)),
        status,
        namespaces: NamespaceExpect {
            differ_from_host: differ,
            hostname: spec.hostname().clone(),
        },
        pid: PidExpect {
            probe_is_init: true,
            host_pids: vec![facts.pid, std::os::unix::process::parent_id() as i32],
        },
        tty: TtyExpect {
            caller_sid: Some(facts.sid),
            probe_stdio: true,
            host_pts_dev: facts.pts_dev,
        },
        paths: PathsExpect {
            hidden,
            read_only,
            writable,
            pinned: pinned(inv, &mounts),
            empty_home: empty_home(inv, &mounts),
        },
        sockets: SocketsExpect {
            unix: host_sockets(policy, inv, &mounts, census),
            abstract_names: host_abstract_sockets(),
        },
        escapes: EscapesExpect {
            nested_userns,
            cgroup_release_agent: true,
            exec_gains_nothing: true,
        },
        syscalls: linux
            .seccomp()
            .as_ref()
            .map(super::syscalls::expectations_for)
            .unwrap_or_default(),
        network: network_expect(spec, facts, reach),
    })
}

/// The repositories' mount points of their own in the working directory
/// (`compile::mounts::git`): each `.git` directory bound onto itself, each
/// level of a `modules/` under one, and the empty read-only `.git` of a
/// project without (which does not exist yet when this runs: a `.git`
/// bound read-only is a gitdir file only if the host has a file there).
fn pinned(inv: &Invocation, mounts: &[oci_spec::runtime::Mount]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = mounts
        .iter()
        .filter(|m| {
            let dest = m.destination();
            let self_bind = m.typ().as_deref() == Some("bind") && m.source().as_deref() == Some(dest.as_path());
            let ro = m.options().iter().flatten().any(|o| o == "ro");
            let in_git = dest.components().any(|c| c.as_os_str() == ".git");
            self_bind
                && dest.starts_with(&inv.workdir)
                && *dest != inv.workdir
                && if ro {
                    dest.file_name().is_some_and(|n| n == ".git") && !dest.is_file()
                } else {
                    in_git
                }
        })
        .map(|m| m.destination().clone())
        .collect();
    out.sort();
    out.dedup();
    out
}

fn ro(p: &str, errnos: &[Errno]) -> ReadOnlyPath {
    ReadOnlyPath {
        path: PathBuf::from(p),
        refused_with: Errnos::of(errnos),
    }
}

fn ro_path(p: PathBuf) -> ReadOnlyPath {
    ReadOnlyPath {
        path: p,
        refused_with: Errnos::of(&[Errno::EROFS]),
    }
}
