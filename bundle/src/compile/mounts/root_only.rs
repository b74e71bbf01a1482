//! The host's root-only files, out of a sandbox's reach when it runs as uid 0
//! (`RunAs::RootMasked`: root started it in a root-owned directory). Without
//! a capability uid 0 still reads what owner bits give it: /etc/shadow, host
//! keys, /proc/slabinfo. Every regular file or directory of the trees below
//! that "others" may not read is covered, a file with /dev/null and a
//! directory with an empty read-only tmpfs (layer Hidden, after every bind);
//! the kernel's root-only files in /proc and /sys become masked paths, which
//! the runtime applies once /proc and /sys are mounted.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use oci_spec::runtime::Capability;

use super::{Builder, Layer};
use crate::compile::input::PathKind;
use crate::compile::output::CompileError;
use crate::compile::resolve::resolve;
use crate::compile::run_as::RunAs;

/// The host trees searched, and how many levels down: where packages and
/// admins keep what only root may read (shadow files, TLS and SSH keys,
/// VPN and database credentials, logs, backups of the account files, kernel
/// images and System.map). Deeper, or elsewhere, is not searched.
const ROOT_ONLY_TREES: &[(&str, usize)] = &[
    ("/etc", 5),
    ("/usr/local/etc", 3),
    ("/var/backups", 2),
    ("/var/log", 3),
    ("/var/lib", 1),
    ("/var/spool", 3),
    ("/boot", 2),
];

/// Kernel files masked besides the root-only files found in /proc: kallsyms
/// shows symbol addresses to a process the kernel trusts, and the slab
/// caches' files tell a heap exploit what /proc/slabinfo would.
const ROOT_ONLY_SYS: &[&str] = &["/proc/kallsyms", "/sys/kernel/slab"];

/// At most this many entries are looked at per tree; more is refused rather
/// than half-masked.
const MAX_ENTRIES: usize = 50_000;
/// A directory with more root-only entries than this is covered whole (the
/// journal's files, a database's): one mount instead of dozens.
const PER_DIR: usize = 16;
/// More masks than this is refused.
const MAX_MASKS: usize = 512;

/// /proc/<pid> entries are the sandbox's own processes, not the host's files.
fn is_pid(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_digit())
}

fn scan_error(tree: &Path, e: impl std::fmt::Display) -> CompileError {
    CompileError::Invocation(format!("look for root-only files under {}: {e}", tree.display()))
}

impl Builder<'_, '_> {
    /// The root-only files of /proc (as the host's procfs lists them: the
    /// sandbox's is the same kernel's) and `ROOT_ONLY_SYS`, as masked paths.
    fn root_only_kernel(&mut self) -> Result<(), CompileError> {
        let proc = Path::new("/proc");
        let found = match self.ctx.host.root_only(proc, 1, MAX_ENTRIES, &is_pid) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(scan_error(proc, e)),
        };
        let mut extra: Vec<String> = found
            .iter()
            .map(|p| p.display().to_string())
            .chain(ROOT_ONLY_SYS.iter().map(|s| s.to_string()))
            .filter(|p| !self.masked_paths.contains(p))
            .collect();
        extra.sort();
        extra.dedup();
        self.masked_paths.extend(extra);
        Ok(())
    }

    /// A mask at `p` would hide what the run must see (the working
    /// directory, a bind the policy asked for, a mount point below it), or
    /// lies where nothing of the host shows anyway.
    fn keeps(&self, p: &Path) -> bool {
        if !self.is_visible(p) || p.starts_with(&self.ctx.inv.workdir) {
            return true;
        }
        if self.visible_below(p) {
            return true;
        }
        // Inside a directory already covered by a tmpfs: no mount point there.
        self.mounts
            .over(p)
            .any(|(_, (_, m))| m.typ().as_deref() == Some("tmpfs") && p != m.destination())
    }

    /// Whether the sandbox's process could get at `path` by the host's
    /// permission bits (with `ancestors`, each directory above it entered
    /// too): its ids are the run's, with their group alone. Capabilities the
    /// policy keeps count without a user namespace; inside one they reach
    /// only the inodes of the mapped ids, which owner bits give anyway.
    fn reaches(&self, path: &Path, ancestors: bool) -> bool {
        let dac = [Capability::DacOverride, Capability::DacReadSearch];
        if !self.ctx.userns && self.ctx.policy.identity.capabilities.iter().any(|c| dac.contains(&c.0)) {
            return true;
        }
        let (uid, gid) = self.ctx.run_as.host_ids();
        // What cannot be looked at counts as reachable: masked, not exposed.
        let may = |p: &Path, want: u32| {
            self.ctx.host.owner(p).is_none_or(|o| {
                let bits = if o.uid == uid {
                    o.mode >> 6
                } else if o.gid == gid {
                    o.mode >> 3
                } else {
                    o.mode
                };
                bits & want != 0
            })
        };
        if ancestors && !path.ancestors().skip(1).all(|a| may(a, 0o1)) {
            return false;
        }
        // A directory is listed or entered; a file read.
        let want = if self.ctx.host.kind(path) == Some(PathKind::Dir) {
            0o5
        } else {
            0o4
        };
        may(path, want)
    }

    /// With a user namespace a root caller's mounts are made by the
    /// sandbox's own root, which cannot open a directory its ids may not:
    /// a mask the sandbox could not get through anyway is dropped rather
    /// than failing the start (root's home, run as a user; a directory of
    /// another service's).
    fn drop_unreachable(&mut self) {
        let masks = |m: &oci_spec::runtime::Mount| {
            m.source().as_deref() == Some(Path::new("/dev/null"))
                || (m.typ().as_deref() == Some("tmpfs") && m.options().iter().flatten().any(|o| o == "ro"))
        };
        let dropped: HashSet<PathBuf> = self
            .mounts
            .iter()
            .filter(|(layer, m)| *layer != Layer::Base && masks(m) && !self.reaches(m.destination(), true))
            .map(|(_, m)| m.destination().clone())
            .collect();
        self.mounts.drop_at(&dropped, Layer::Base);
    }

    /// Covers the root-only entries of `ROOT_ONLY_TREES` and masks the
    /// kernel's (uid 0 runs only); with a user namespace, drops the masks
    /// its root could not mount.
    pub(super) fn root_only(&mut self) -> Result<(), CompileError> {
        if self.ctx.run_as == RunAs::RootMasked {
            self.root_only_kernel()?;
            self.root_only_trees()?;
        }
        if self.ctx.userns && !self.ctx.inv.unprivileged {
            self.drop_unreachable();
        }
        Ok(())
    }

    fn root_only_trees(&mut self) -> Result<(), CompileError> {
        let mut by_parent: BTreeMap<PathBuf, Vec<PathBuf>> = BTreeMap::new();
        let mut roots = Vec::new();
        for (tree, depth) in ROOT_ONLY_TREES {
            let tree = resolve(self.ctx.host, Path::new(tree)).map_err(|e| scan_error(Path::new(tree), e))?;
            // Nothing of it shows (a rootfs that binds none of it).
            if !self.visible_below(&tree) && !tree.ancestors().any(|a| self.visible.contains(a)) {
                continue;
            }
            let found = match self.ctx.host.root_only(&tree, *depth, MAX_ENTRIES, &|_| false) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(scan_error(&tree, e)),
            };
            // Its ancestors are entered by others (the search entered them).
            for p in found.into_iter().filter(|p| !self.keeps(p) && self.reaches(p, false)) {
                let parent = p.parent().unwrap_or(Path::new("/")).to_path_buf();
                by_parent.entry(parent).or_default().push(p);
            }
            roots.push(tree);
        }
        let mut masks: Vec<PathBuf> = Vec::new();
        for (parent, children) in by_parent {
            if children.len() > PER_DIR && !roots.contains(&parent) && !self.keeps(&parent) {
                masks.push(parent);
            } else {
                masks.extend(children);
            }
        }
        masks.sort();
        // A covered directory takes what lies below it.
        let mut kept: Vec<PathBuf> = Vec::new();
        for m in masks {
            if !kept.iter().any(|k| m.starts_with(k)) {
                kept.push(m);
            }
        }
        if kept.len() > MAX_MASKS {
            return Err(CompileError::Invocation(format!(
                "mask the host's root-only files: {} of them, more than {MAX_MASKS}; run from a directory an unprivileged user owns",
                kept.len()
            )));
        }
        for m in kept {
            self.hide(&m);
        }
        Ok(())
    }
}
