//! The list of checks an `Expectations` asks for, in the order the probe runs
//! them. Host and probe compute the same plan from the same expectations: the
//! probe executes it, the host knows from it which results must come back (a
//! check that never reports is a FAIL, not a silent gap).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::expect::{Errnos, Expectations, ProxyRequest, SyscallExpect};
use super::syscalls;

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Group {
    Sentinel,
    Env,
    Privileges,
    Namespaces,
    Terminal,
    Filesystem,
    Sockets,
    Escapes,
    Seccomp,
    Network,
}

impl Group {
    pub fn name(self) -> &'static str {
        match self {
            Group::Sentinel => "sentinel",
            Group::Env => "env",
            Group::Privileges => "privileges",
            Group::Namespaces => "namespaces",
            Group::Terminal => "terminal",
            Group::Filesystem => "filesystem",
            Group::Sockets => "sockets",
            Group::Escapes => "escapes",
            Group::Seccomp => "seccomp",
            Group::Network => "network",
        }
    }
}

/// A field of /proc/self/status and how it is written there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusField {
    NoNewPrivs,
    Seccomp,
    CapInh,
    CapPrm,
    CapEff,
    CapBnd,
    CapAmb,
}

impl StatusField {
    pub fn key(self) -> &'static str {
        match self {
            StatusField::NoNewPrivs => "NoNewPrivs",
            StatusField::Seccomp => "Seccomp",
            StatusField::CapInh => "CapInh",
            StatusField::CapPrm => "CapPrm",
            StatusField::CapEff => "CapEff",
            StatusField::CapBnd => "CapBnd",
            StatusField::CapAmb => "CapAmb",
        }
    }

    /// Capability sets are hexadecimal masks; the others decimal.
    pub fn is_mask(self) -> bool {
        !matches!(self, StatusField::NoNewPrivs | StatusField::Seccomp)
    }

    pub fn show(self, v: u64) -> String {
        if self.is_mask() {
            format!("{v:016x}")
        } else {
            v.to_string()
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    EnvEquals {
        name: String,
        value: String,
    },
    EnvAbsent {
        name: String,
    },
    EnvAllowed {
        names: Vec<String>,
    },
    UserIds {
        uid: u32,
        gid: u32,
    },
    Status {
        field: StatusField,
        want: u64,
    },
    NamespaceDiffers {
        kind: String,
        host_inode: u64,
    },
    Hostname {
        name: String,
    },
    PidIsInit,
    HostPidsInvisible {
        pids: Vec<i32>,
    },
    Session {
        caller_sid: i32,
    },
    Tiocsti {
        fd: i32,
        host_pts_dev: Option<u64>,
    },
    Hidden {
        path: PathBuf,
    },
    ReadOnly {
        path: PathBuf,
        refused_with: Errnos,
    },
    Writable {
        path: PathBuf,
    },
    Pinned {
        path: PathBuf,
    },
    UnixSocket {
        path: PathBuf,
    },
    EmptyHome {
        path: PathBuf,
        kept: Vec<String>,
    },
    AbstractSocket {
        name: String,
    },
    NestedUserns {
        protected_file: PathBuf,
    },
    CgroupReleaseAgent,
    ExecGainsNothing,
    /// No descriptor beyond 0-2 at the probe's start.
    InheritedFds,
    Syscall {
        probe: &'static str,
        expect: SyscallExpect,
    },
    Network {
        mode: String,
    },
    /// rtnetlink: add an address to lo.
    NetlinkAddress,
    /// nfnetlink: delete claude-shim's nftables table.
    NftablesDelete,
    Direct {
        addr: std::net::SocketAddr,
        refused_with: Errnos,
    },
    Proxy {
        listener: std::net::SocketAddr,
        request: ProxyRequest,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// Unique within a plan; the key host and probe agree on.
    pub id: String,
    pub group: Group,
    /// What passing looks like, for the report.
    pub expected: String,
    pub kind: Kind,
}

fn check(id: impl Into<String>, group: Group, expected: impl Into<String>, kind: Kind) -> Check {
    Check {
        id: id.into(),
        group,
        expected: expected.into(),
        kind,
    }
}

/// The checks of `exp`, in run order: reads of the pristine sandbox (hidden
/// paths, /tmp empty) come before the checks that write.
pub fn plan(exp: &Expectations) -> Vec<Check> {
    let mut p = Vec::new();
    for (name, value) in &exp.env.equals {
        let group = if name == "IS_SANDBOX" {
            Group::Sentinel
        } else {
            Group::Env
        };
        p.push(check(
            format!("env {name}"),
            group,
            format!("{name}={value}"),
            Kind::EnvEquals {
                name: name.clone(),
                value: value.clone(),
            },
        ));
    }
    for name in &exp.env.absent {
        p.push(check(
            format!("env {name} absent"),
            Group::Env,
            "absent",
            Kind::EnvAbsent { name: name.clone() },
        ));
    }
    if let Some(names) = &exp.env.allowed {
        p.push(check(
            "env allow-list",
            Group::Env,
            format!("only {} allowed names", names.len()),
            Kind::EnvAllowed { names: names.clone() },
        ));
    }

    if let Some(u) = exp.user {
        let on_host = exp
            .root_only
            .as_ref()
            .map(|r| format!(": {}", r.run_as))
            .unwrap_or_default();
        p.push(check(
            "user ids",
            Group::Privileges,
            format!("uid {} gid {}{on_host}", u.uid, u.gid),
            Kind::UserIds { uid: u.uid, gid: u.gid },
        ));
    }
    for path in exp.root_only.iter().flat_map(|r| r.unreadable.iter()) {
        p.push(check(
            format!("root-only {}", path.display()),
            Group::Privileges,
            "unreadable",
            Kind::Hidden { path: path.clone() },
        ));
    }
    let s = exp.status;
    for (field, want) in [
        (StatusField::NoNewPrivs, s.no_new_privs),
        (StatusField::Seccomp, s.seccomp),
        (StatusField::CapInh, s.cap_inh),
        (StatusField::CapPrm, s.cap_prm),
        (StatusField::CapEff, s.cap_eff),
        (StatusField::CapBnd, s.cap_bnd),
        (StatusField::CapAmb, s.cap_amb),
    ] {
        p.push(check(
            format!("status {}", field.key()),
            Group::Privileges,
            field.show(want),
            Kind::Status { field, want },
        ));
    }

    for (kind, inode) in &exp.namespaces.differ_from_host {
        p.push(check(
            format!("namespace {kind}"),
            Group::Namespaces,
            format!("not the host's {kind}:[{inode}]"),
            Kind::NamespaceDiffers {
                kind: kind.clone(),
                host_inode: *inode,
            },
        ));
    }
    if let Some(name) = &exp.namespaces.hostname {
        p.push(check(
            "hostname",
            Group::Namespaces,
            name.clone(),
            Kind::Hostname { name: name.clone() },
        ));
    }
    if exp.pid.probe_is_init {
        p.push(check("pid 1", Group::Namespaces, "the probe is pid 1", Kind::PidIsInit));
    }
    if !exp.pid.host_pids.is_empty() {
        p.push(check(
            "host pids invisible",
            Group::Namespaces,
            "kill(pid, 0): ESRCH",
            Kind::HostPidsInvisible {
                pids: exp.pid.host_pids.clone(),
            },
        ));
    }

    if let Some(sid) = exp.tty.caller_sid {
        p.push(check(
            "own session",
            Group::Terminal,
            "a session of the sandbox's own",
            Kind::Session { caller_sid: sid },
        ));
    }
    if exp.tty.probe_stdio {
        for fd in 0..3 {
            p.push(check(
                format!("TIOCSTI fd {fd}"),
                Group::Terminal,
                "refused (EPERM/EIO), or the sandbox's own pty",
                Kind::Tiocsti {
                    fd,
                    host_pts_dev: exp.tty.host_pts_dev,
                },
            ));
        }
    }

    for path in &exp.paths.hidden {
        p.push(check(
            format!("hidden {}", path.display()),
            Group::Filesystem,
            "absent or empty",
            Kind::Hidden { path: path.clone() },
        ));
    }
    if let Some(h) = &exp.paths.empty_home {
        let but = if h.kept.is_empty() {
            String::new()
        } else {
            format!(" but {}", h.kept.join(", "))
        };
        p.push(check(
            format!("empty home {}", h.path.display()),
            Group::Filesystem,
            format!("nothing of the host's{but}"),
            Kind::EmptyHome {
                path: h.path.clone(),
                kept: h.kept.clone(),
            },
        ));
    }
    for r in &exp.paths.read_only {
        p.push(check(
            format!("read-only {}", r.path.display()),
            Group::Filesystem,
            format!("write refused: {}", r.refused_with),
            Kind::ReadOnly {
                path: r.path.clone(),
                refused_with: r.refused_with.clone(),
            },
        ));
    }
    for path in &exp.paths.pinned {
        p.push(check(
            format!("pinned {}", path.display()),
            Group::Filesystem,
            "rename refused: EBUSY (a mount point of its own)",
            Kind::Pinned { path: path.clone() },
        ));
    }
    for path in &exp.paths.writable {
        p.push(check(
            format!("writable {}", path.display()),
            Group::Filesystem,
            "writable",
            Kind::Writable { path: path.clone() },
        ));
    }

    for path in &exp.sockets.unix {
        p.push(check(
            format!("socket {}", path.display()),
            Group::Sockets,
            "connect refused",
            Kind::UnixSocket { path: path.clone() },
        ));
    }
    for name in &exp.sockets.abstract_names {
        p.push(check(
            format!("socket @{name}"),
            Group::Sockets,
            "connect refused",
            Kind::AbstractSocket { name: name.clone() },
        ));
    }

    if let Some(n) = &exp.escapes.nested_userns {
        p.push(check(
            "nested user namespace chain",
            Group::Escapes,
            format!("refused at unshare (EPERM), {} unchanged", n.protected_file.display()),
            Kind::NestedUserns {
                protected_file: n.protected_file.clone(),
            },
        ));
    }
    if exp.escapes.cgroup_release_agent {
        p.push(check(
            "cgroup release_agent (CVE-2022-0492)",
            Group::Escapes,
            "refused at unshare (EPERM)",
            Kind::CgroupReleaseAgent,
        ));
    }
    p.push(check(
        "inherited descriptors",
        Group::Escapes,
        "none beyond 0, 1, 2",
        Kind::InheritedFds,
    ));
    if exp.escapes.exec_gains_nothing {
        p.push(check(
            "execve gains nothing",
            Group::Escapes,
            "no capability after execve",
            Kind::ExecGainsNothing,
        ));
    }

    for probe in syscalls::CATALOG {
        let Some(expect) = exp.syscalls.get(probe.name) else {
            continue;
        };
        let expected = match expect {
            SyscallExpect::Allowed => "allowed".to_owned(),
            SyscallExpect::Blocked(e) => format!("blocked: {e}"),
            SyscallExpect::Refused(e) => format!("refused: {e}"),
        };
        p.push(check(
            format!("syscall {}", probe.name),
            Group::Seccomp,
            expected,
            Kind::Syscall {
                probe: probe.name,
                expect: expect.clone(),
            },
        ));
    }

    let net = &exp.network;
    if let Some(mode) = &net.mode {
        p.push(check(
            format!("network {mode}"),
            Group::Network,
            match mode.as_str() {
                "public" => "an interface besides lo",
                _ => "no interface but lo",
            },
            Kind::Network { mode: mode.clone() },
        ));
    }
    if net.tamper_refused {
        p.push(check(
            "rtnetlink address change",
            Group::Network,
            "refused: EPERM",
            Kind::NetlinkAddress,
        ));
        p.push(check(
            "nftables table deletion",
            Group::Network,
            "refused: EPERM",
            Kind::NftablesDelete,
        ));
    }
    for d in &net.direct {
        p.push(check(
            format!("direct {} {}", d.what, d.addr),
            Group::Network,
            format!("refused: {}", d.refused_with),
            Kind::Direct {
                addr: d.addr,
                refused_with: d.refused_with.clone(),
            },
        ));
    }
    if let Some(proxy) = &net.proxy {
        for r in &proxy.requests {
            let (proto, listener) = if r.socks {
                ("socks5", proxy.socks)
            } else {
                ("http", proxy.http)
            };
            p.push(check(
                format!("proxy {proto} {} {}", r.what, r.target()),
                Group::Network,
                if r.admit { "admitted" } else { "refused" },
                Kind::Proxy {
                    listener,
                    request: r.clone(),
                },
            ));
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::expect::sample;

    #[test]
    fn ids_are_unique_and_ordered() {
        let plan = plan(&sample());
        let mut ids: Vec<&str> = plan.iter().map(|c| c.id.as_str()).collect();
        let n = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), n);
        let pos = |id: &str| plan.iter().position(|c| c.id == id).unwrap();
        assert!(pos("hidden /root/.ssh") < pos("writable /tmp"));
        assert_eq!(plan[0].id, "env IS_SANDBOX");
        assert_eq!(plan[0].group, Group::Sentinel);
    }

    #[test]
    fn every_expectation_becomes_a_check() {
        let plan = plan(&sample());
        let ids: Vec<&str> = plan.iter().map(|c| c.id.as_str()).collect();
        for id in [
            "env GITHUB_TOKEN absent",
            "user ids",
            "root-only /etc/shadow",
            "status NoNewPrivs",
            "status Seccomp",
            "status CapBnd",
            "status CapAmb",
            "namespace pid",
            "pid 1",
            "host pids invisible",
            "own session",
            "TIOCSTI fd 2",
            "read-only /etc",
            "pinned /work/.git",
            "cgroup release_agent (CVE-2022-0492)",
            "execve gains nothing",
            "syscall mount",
            "syscall fork",
            "network allowlist",
            "rtnetlink address change",
            "nftables table deletion",
            "direct metadata 169.254.169.254:80",
            "proxy http off the list example.invalid:443",
        ] {
            assert!(ids.contains(&id), "{id} missing from {ids:?}");
        }
        let ids = plan.iter().find(|c| c.id == "user ids").unwrap();
        assert_eq!(ids.expected, "uid 0 gid 0: uid 0, root-only files masked");
        let cap = plan.iter().find(|c| c.id == "status CapEff").unwrap();
        assert_eq!(cap.expected, "0000000000000000");
        let mount = plan.iter().find(|c| c.id == "syscall mount").unwrap();
        assert_eq!(mount.expected, "blocked: EPERM");
    }
}
