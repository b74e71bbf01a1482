//! Who a sandbox runs as on the host (`RunAs`), decided once per compile
//! before the passes read it through `Ctx`: a sandbox started by root never
//! holds host root's identity over the host's files. An unprivileged caller
//! runs as itself (in its user namespace); a root caller runs as the working
//! directory's owner when that is not root, and otherwise stays uid 0 with
//! every root-only file of the host masked (`mounts/root_only.rs`).

use super::input::{HostView, Invocation};

/// The group a root caller's sandbox gets when the working directory's group
/// is root's (65534, "nogroup"/"nobody"): gid 0 would read what root's group may.
pub const NO_GROUP: u32 = 65534;

/// Who the sandbox's process is on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAs {
    /// An unprivileged caller: its own ids.
    Caller { uid: u32, gid: u32 },
    /// A root caller whose working directory belongs to this user: the
    /// process runs as it, with no additional group, so files it writes keep
    /// the project's owner and root-only files are unreadable by plain
    /// permissions.
    Owner { uid: u32, gid: u32 },
    /// A root caller whose working directory belongs to root: no
    /// unprivileged identity could write the project without idmapped mounts
    /// (libcontainer 0.7 has none), so the process stays uid 0 and what only
    /// root may read is masked.
    RootMasked,
}

impl RunAs {
    /// The decision for `inv`: the caller's privileges and the working
    /// directory's owner (a directory that cannot be looked at counts as root's).
    pub fn decide(host: &dyn HostView, inv: &Invocation) -> RunAs {
        if inv.unprivileged {
            return RunAs::Caller {
                uid: inv.uid,
                gid: inv.gid,
            };
        }
        match host.owner(&inv.workdir) {
            Some(o) if o.uid != 0 => RunAs::Owner {
                uid: o.uid,
                gid: if o.gid == 0 { NO_GROUP } else { o.gid },
            },
            _ => RunAs::RootMasked,
        }
    }

    /// The host ids the process runs as (mapped to 0 inside a user namespace).
    pub fn host_ids(self) -> (u32, u32) {
        match self {
            RunAs::Caller { uid, gid } | RunAs::Owner { uid, gid } => (uid, gid),
            RunAs::RootMasked => (0, 0),
        }
    }

    /// A root caller's sandbox: its supplementary groups are set (to its
    /// group alone), never inherited from the runtime (root's may include
    /// adm, disk, shadow...).
    pub fn drops_groups(self) -> bool {
        !matches!(self, RunAs::Caller { .. })
    }

    /// What `verify` and the docs say of it, in a few words.
    pub fn describe(self) -> String {
        match self {
            RunAs::Caller { uid, .. } => format!("runs as uid {uid} (the caller)"),
            RunAs::Owner { uid, .. } => format!("runs as uid {uid} (the working directory's owner)"),
            RunAs::RootMasked => "uid 0, root-only files masked".to_owned(),
        }
    }
}
