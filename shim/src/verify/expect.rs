//! What the probe must find inside a sandbox. `verify` derives an
//! `Expectations` from the policy (and from facts only the host can see: its
//! namespace inodes, its pids, its session), hands it to the probe as JSON, and
//! the probe checks each item from inside. Every field is explicit: an empty
//! list means "nothing of this kind to check", never "use a default".

use std::collections::BTreeMap;
use std::path::PathBuf;

#[cfg(test)]
use nix::errno::Errno;
use serde::{Deserialize, Serialize};

pub use super::errnos::{errno_name, Errnos, SyscallExpect};
use super::error::VerifyError;

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Expectations {
    pub env: EnvExpect,
    /// The uid and gid the sandbox's process runs as; None: not checked.
    pub user: Option<UserIds>,
    /// Who that is on the host and the root-only files it must not read;
    /// None: not checked.
    pub root_only: Option<RootOnlyExpect>,
    /// Fields of /proc/self/status.
    pub status: StatusExpect,
    pub namespaces: NamespaceExpect,
    pub pid: PidExpect,
    pub tty: TtyExpect,
    pub paths: PathsExpect,
    pub sockets: SocketsExpect,
    pub escapes: EscapesExpect,
    /// One entry per syscall probe (names from `syscalls::CATALOG`), with what
    /// the sandbox's seccomp profile must make of it.
    pub syscalls: BTreeMap<String, SyscallExpect>,
    pub network: NetworkExpect,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct EnvExpect {
    /// Variables that must hold exactly this value: the IS_SANDBOX=1 sentinel,
    /// GIT_CONFIG_GLOBAL of the curated gitconfig, ...
    pub equals: BTreeMap<String, String>,
    /// Variables that must be absent: tokens, SSH_AUTH_SOCK, ...
    pub absent: Vec<String>,
    /// When set, the only variable names allowed: the environment was built
    /// from an allow-list, not filtered from the caller's.
    pub allowed: Option<Vec<String>>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct UserIds {
    pub uid: u32,
    pub gid: u32,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RootOnlyExpect {
    /// Who the process is on the host, in words ("runs as uid 1000 (the
    /// working directory's owner)", "uid 0, root-only files masked").
    pub run_as: String,
    /// Files of the host only root may read (/etc/shadow, /etc/gshadow):
    /// inside they must read as nothing (refused, empty or absent).
    pub unreadable: Vec<PathBuf>,
}

/// The values /proc/self/status must show (proc(5)).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct StatusExpect {
    /// NoNewPrivs: 1 means setuid bits and file capabilities are ignored at execve.
    pub no_new_privs: u64,
    /// Seccomp: 2 is SECCOMP_MODE_FILTER.
    pub seccomp: u64,
    pub cap_inh: u64,
    pub cap_prm: u64,
    pub cap_eff: u64,
    pub cap_bnd: u64,
    pub cap_amb: u64,
}

impl StatusExpect {
    /// The sandbox's: no_new_privs, a filter, no capability in any set.
    #[cfg(test)]
    pub const LOCKED: StatusExpect = StatusExpect {
        no_new_privs: 1,
        seccomp: 2,
        cap_inh: 0,
        cap_prm: 0,
        cap_eff: 0,
        cap_bnd: 0,
        cap_amb: 0,
    };
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct NamespaceExpect {
    /// Namespace kind (as in /proc/self/ns: pid, ipc, uts, mnt, net, cgroup,
    /// user, time) -> the host's inode, which the sandbox's must differ from.
    /// The probe cannot see the host's; `HostFacts` reads them.
    pub differ_from_host: BTreeMap<String, u64>,
    /// The sandbox's hostname (its own UTS namespace).
    pub hostname: Option<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PidExpect {
    /// The probe is the sandbox's process itself, so it must be pid 1 of a new
    /// pid namespace.
    pub probe_is_init: bool,
    /// Pids of host processes alive while the probe runs (the verifying
    /// process, the runtime, helpers such as pasta): kill(pid, 0) must give ESRCH.
    pub host_pids: Vec<i32>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TtyExpect {
    /// The caller's session id: the sandbox must run in another session
    /// (TIOCSTI needs the terminal to be the caller's controlling one).
    /// None: the session check is not applicable.
    pub caller_sid: Option<i32>,
    /// Probe fds 0, 1 and 2: a terminal there must refuse TIOCSTI unless it is
    /// the sandbox's own pty.
    pub probe_stdio: bool,
    /// st_dev of the host's /dev/pts: a pty of that devpts instance is never
    /// the sandbox's own, even if the sandbox sees it at /dev/pts.
    pub host_pts_dev: Option<u64>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PathsExpect {
    /// Absent, an empty file, or an empty directory: ~/.ssh, ~/.netrc,
    /// ~/.Xauthority, /run/user, /run/secrets, /tmp (IDE sockets), the
    /// masked files of /proc.
    pub hidden: Vec<PathBuf>,
    /// Existing paths whose writes are refused with one of the errnos.
    pub read_only: Vec<ReadOnlyPath>,
    /// Existing directories where a file can be created (or files that open
    /// for writing).
    pub writable: Vec<PathBuf>,
    /// Existing directories that are mount points of their own, so they
    /// cannot be renamed or replaced (rename refused with EBUSY): a
    /// repository's `.git`, or the empty one of a project without.
    pub pinned: Vec<PathBuf>,
    /// The caller's home, when the policy empties it.
    #[serde(default)]
    pub empty_home: Option<EmptyHome>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct EmptyHome {
    pub path: PathBuf,
    /// The names in it that may show: the first component of every path the
    /// policy binds back into it (a tool directory, the agent's state).
    pub kept: Vec<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ReadOnlyPath {
    pub path: PathBuf,
    /// EROFS for a read-only mount; /proc/sys may also give EACCES.
    pub refused_with: Errnos,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SocketsExpect {
    /// Unix socket paths that must not accept a connection: the engine's
    /// socket, $SSH_AUTH_SOCK, IDE sockets under the host's /tmp.
    pub unix: Vec<PathBuf>,
    /// Abstract unix socket names (without the leading NUL) that a host process
    /// listens on; unreachable from another network namespace.
    pub abstract_names: Vec<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct EscapesExpect {
    /// The seed's chain: unshare(NEWUSER|NEWNS), pivot_root, umount2(MNT_DETACH),
    /// rename of a protected file: refused at the first step, file unchanged.
    pub nested_userns: Option<NestedUserns>,
    /// CVE-2022-0492: unshare -UrmC then mount cgroup v1: refused at unshare.
    pub cgroup_release_agent: bool,
    /// After dropping every capability, an execve (the path a setuid-root file
    /// takes) regains none.
    pub exec_gains_nothing: bool,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct NestedUserns {
    /// A file the sandbox protects (e.g. <workdir>/.git/config); it must exist.
    pub protected_file: PathBuf,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct NetworkExpect {
    /// The sandbox's network mode (annotation run.claude-shim.network): none,
    /// allowlist or public. None: no network check.
    pub mode: Option<String>,
    /// Changing the network namespace from inside (an address through
    /// rtnetlink, the nftables filter through nfnetlink) must be refused with
    /// EPERM: the sandbox holds no CAP_NET_ADMIN over its network namespace.
    pub tamper_refused: bool,
    /// Direct connections that must fail at once, with one of the errnos:
    /// private ranges, metadata, the host's addresses and gateways, and (in
    /// none and allowlist mode) any address at all.
    pub direct: Vec<DirectTarget>,
    /// Allowlist mode: the proxy's listeners inside the sandbox and the
    /// requests whose answer is known from the policy.
    pub proxy: Option<ProxyExpect>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DirectTarget {
    /// What the address stands for ("metadata", "host address", "gateway").
    pub what: String,
    pub addr: std::net::SocketAddr,
    pub refused_with: Errnos,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ProxyExpect {
    /// HTTP CONNECT listener (127.0.0.1:3128).
    pub http: std::net::SocketAddr,
    /// SOCKS5 listener (127.0.0.1:1080).
    pub socks: std::net::SocketAddr,
    pub requests: Vec<ProxyRequest>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ProxyRequest {
    /// What the target stands for ("allowed", "off the list", "metadata").
    pub what: String,
    /// A name or an address literal (IPv6 without brackets).
    pub host: String,
    pub port: u16,
    /// Through the SOCKS5 listener instead of HTTP CONNECT.
    pub socks: bool,
    /// The policy admits it: the proxy must not answer 403 (the upstream
    /// may still be unreachable). Otherwise the proxy must refuse it.
    pub admit: bool,
    /// A plain http:// request the proxy must answer 400 before it connects
    /// anywhere, instead of a CONNECT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plain: Option<PlainHttp>,
    /// Text the refusal must hold, where the reason is the point of the check
    /// (a blocked range, not merely a name off the list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// Plain-HTTP requests that carry a second destination past the checked one.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PlainHttp {
    /// A Host header naming another host than the request target.
    HostMismatch,
    /// A second request after the first on one connection.
    Pipelined,
}

impl ProxyRequest {
    /// host:port as a client writes it (IPv6 literals in brackets).
    pub fn target(&self) -> String {
        match self.host.parse::<std::net::Ipv6Addr>() {
            Ok(_) => format!("[{}]:{}", self.host, self.port),
            Err(_) => format!("{}:{}", self.host, self.port),
        }
    }
}

/// Namespace kinds as /proc/self/ns names them.
pub const NAMESPACE_KINDS: &[&str] = &["pid", "ipc", "uts", "mnt", "net", "cgroup", "user", "time"];

/// Network modes of the contract (run.claude-shim.network).
pub const NETWORK_MODES: &[&str] = &["none", "allowlist", "public"];

impl Expectations {
    /// Refuses expectations the probe could not check as written: an unknown
    /// namespace kind, syscall probe or network mode, a relative path, an empty
    /// errno set. A typo must not turn into a check that silently never runs.
    pub fn validate(&self) -> Result<(), VerifyError> {
        let bad = |field: &str, why: String| Err(VerifyError::Expectations(format!("{field}: {why}")));
        for kind in self.namespaces.differ_from_host.keys() {
            if !NAMESPACE_KINDS.contains(&kind.as_str()) {
                return bad(
                    "namespaces.differ_from_host",
                    format!("unknown namespace {kind:?} (known: {})", NAMESPACE_KINDS.join(", ")),
                );
            }
        }
        for (name, expect) in &self.syscalls {
            if super::syscalls::find(name).is_none() {
                return bad("syscalls", format!("no probe named {name:?}"));
            }
            if let SyscallExpect::Blocked(e) | SyscallExpect::Refused(e) = expect {
                if e.0.is_empty() {
                    return bad("syscalls", format!("{name:?} is blocked with no errno"));
                }
            }
        }
        let paths = self
            .paths
            .hidden
            .iter()
            .chain(self.paths.writable.iter())
            .chain(self.paths.read_only.iter().map(|r| &r.path))
            .chain(self.paths.pinned.iter())
            .chain(self.paths.empty_home.iter().map(|h| &h.path))
            .chain(self.sockets.unix.iter())
            .chain(self.root_only.iter().flat_map(|r| r.unreadable.iter()))
            .chain(self.escapes.nested_userns.iter().map(|n| &n.protected_file));
        for p in paths {
            if !p.is_absolute() {
                return bad("paths", format!("{} is not absolute", p.display()));
            }
        }
        for r in &self.paths.read_only {
            if r.refused_with.0.is_empty() {
                return bad("paths.read_only", format!("{} has no errno", r.path.display()));
            }
        }
        match &self.network.mode {
            Some(mode) if !NETWORK_MODES.contains(&mode.as_str()) => {
                return bad("network.mode", format!("unknown mode {mode:?}"));
            }
            Some(mode) if mode != "allowlist" && self.network.proxy.is_some() => {
                return bad("network.proxy", format!("mode {mode} runs no proxy"));
            }
            None if self.network.tamper_refused || !self.network.direct.is_empty() || self.network.proxy.is_some() => {
                return bad("network", "network checks without a network mode".into());
            }
            _ => {}
        }
        for d in &self.network.direct {
            if d.refused_with.0.is_empty() {
                return bad("network.direct", format!("{} has no errno", d.addr));
            }
        }
        if let Some(p) = &self.network.proxy {
            for r in &p.requests {
                if r.host.is_empty() || r.port == 0 {
                    return bad("network.proxy", format!("request {:?} names no host and port", r.what));
                }
            }
        }
        Ok(())
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("expectations serialize to JSON")
    }

    pub fn from_json(raw: &str) -> Result<Self, VerifyError> {
        let exp: Self = serde_json::from_str(raw).map_err(|e| VerifyError::Expectations(e.to_string()))?;
        exp.validate()?;
        Ok(exp)
    }
}

/// A complete set of expectations for unit tests.
#[cfg(test)]
pub(crate) fn sample() -> Expectations {
    Expectations {
        env: EnvExpect {
            equals: [("IS_SANDBOX".to_owned(), "1".to_owned())].into(),
            absent: vec!["GITHUB_TOKEN".into()],
            allowed: None,
        },
        user: Some(UserIds { uid: 0, gid: 0 }),
        root_only: Some(RootOnlyExpect {
            run_as: "uid 0, root-only files masked".into(),
            unreadable: vec!["/etc/shadow".into()],
        }),
        status: StatusExpect::LOCKED,
        namespaces: NamespaceExpect {
            differ_from_host: [("pid".to_owned(), 4026531836)].into(),
            hostname: None,
        },
        pid: PidExpect {
            probe_is_init: true,
            host_pids: vec![1],
        },
        tty: TtyExpect {
            caller_sid: Some(1),
            probe_stdio: true,
            host_pts_dev: None,
        },
        paths: PathsExpect {
            hidden: vec!["/root/.ssh".into()],
            read_only: vec![ReadOnlyPath {
                path: "/etc".into(),
                refused_with: Errnos::of(&[Errno::EROFS]),
            }],
            writable: vec!["/tmp".into()],
            pinned: vec!["/work/.git".into()],
            empty_home: None,
        },
        sockets: SocketsExpect {
            unix: vec![],
            abstract_names: vec![],
        },
        escapes: EscapesExpect {
            nested_userns: None,
            cgroup_release_agent: true,
            exec_gains_nothing: true,
        },
        syscalls: [
            ("mount".to_owned(), SyscallExpect::Blocked(Errnos::of(&[Errno::EPERM]))),
            ("fork".to_owned(), SyscallExpect::Allowed),
        ]
        .into(),
        network: NetworkExpect {
            mode: Some("allowlist".into()),
            tamper_refused: true,
            direct: vec![DirectTarget {
                what: "metadata".into(),
                addr: "169.254.169.254:80".parse().unwrap(),
                refused_with: Errnos::of(&[Errno::ENETUNREACH]),
            }],
            proxy: Some(ProxyExpect {
                http: "127.0.0.1:3128".parse().unwrap(),
                socks: "127.0.0.1:1080".parse().unwrap(),
                requests: vec![ProxyRequest {
                    what: "off the list".into(),
                    host: "example.invalid".into(),
                    port: 443,
                    socks: false,
                    admit: false,
                    plain: None,
                    why: None,
                }],
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_json() {
        let e = sample();
        let json = e.to_json();
        assert!(json.contains(r#""mount":{"blocked":["EPERM"]}"#), "{json}");
        assert!(json.contains(r#""fork":"allowed""#), "{json}");
        assert_eq!(Expectations::from_json(&json).unwrap(), e);
    }

    #[test]
    fn unknown_fields_and_names_are_refused() {
        let mut v: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
        v["status"]["capeff"] = 0.into();
        let err = Expectations::from_json(&v.to_string()).unwrap_err().to_string();
        assert!(err.contains("capeff"), "{err}");

        let mut e = sample();
        e.syscalls.insert("mont".into(), SyscallExpect::Allowed);
        let err = e.validate().unwrap_err().to_string();
        assert!(err.contains("mont"), "{err}");

        let mut e = sample();
        e.namespaces.differ_from_host.insert("network".into(), 1);
        assert!(e.validate().is_err());

        let mut e = sample();
        e.paths.hidden.push("relative/.ssh".into());
        assert!(e.validate().is_err());

        let mut e = sample();
        e.network.mode = Some("public".into());
        let err = e.validate().unwrap_err().to_string();
        assert!(err.contains("runs no proxy"), "{err}");
        e.network.mode = None;
        assert!(e.validate().is_err());
        let mut e = sample();
        e.network.direct[0].refused_with = Errnos::of(&[]);
        assert!(e.validate().is_err());

        let mut v: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
        v["syscalls"]["mount"] = serde_json::json!({"blocked": ["EPREM"]});
        let err = Expectations::from_json(&v.to_string()).unwrap_err().to_string();
        assert!(err.contains("EPREM"), "{err}");
    }

    #[test]
    fn missing_sections_are_refused() {
        let mut v: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
        v.as_object_mut().unwrap().remove("escapes");
        assert!(Expectations::from_json(&v.to_string()).is_err());
    }
}
