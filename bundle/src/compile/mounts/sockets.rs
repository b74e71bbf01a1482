//! The socket pass, last: every host unix socket the census finds
//! (`HostView::unix_sockets`) that would show inside is covered with a bind
//! of /dev/null, so connect(2) on it fails with ECONNREFUSED; the sockets the
//! policy names (`filesystem.unix_sockets`) stay reachable, bound in when
//! they would not show.
//!
//! Why: a read-only mount does not stop connect(2) (the kernel checks write
//! permission on the socket's inode only; EROFS is for files, directories
//! and links), and Landlock on the kernels this runs on has no right for
//! pathname sockets. What the census cannot see: a socket bound after the
//! start outside the empty home, /tmp and /run (docs/sandbox.md).

use std::path::{Path, PathBuf};

use super::{bind, depth, is_forbidden, missing, mount, Builder, Layer};

/// A socket's cover: /dev/null read-only, and only if the socket is still
/// there when the runtime mounts it. A daemon that stops between the census
/// and the mount takes its socket with it; without `x-claude-shim-if-present`
/// the runtime would try to make a mount point in the read-only host tree
/// and fail the start (claude-shim's runtime honours it, vendor/README.md;
/// runc passes an `x-` option to the kernel's data, which a bind ignores).
const SOCKET_COVER: &[&str] = &["bind", "ro", "x-claude-shim-if-present"];
use crate::compile::input::PathKind;
use crate::compile::output::CompileError;
use crate::compile::resolve::resolve;

/// How many sockets are covered one by one; more is refused rather than
/// half-covered.
pub const SOCKET_LIMIT: usize = 1000;

/// A socket the policy names, bound at its own path (connect needs no more).
const SOCKET_BIND: &[&str] = &["bind", "nosuid", "nodev"];

impl Builder<'_, '_> {
    pub(super) fn sockets(&mut self) -> Result<(), CompileError> {
        let fs = &self.ctx.policy.filesystem;
        let home = self.ctx.inv.home.clone();
        let mut named: Vec<PathBuf> = Vec::new();
        for (i, b) in fs.unix_sockets.iter().enumerate() {
            let field = format!("filesystem.unix_sockets[{i}]");
            let path = self.resolve_allowed(&field, &b.path.expand(&home), "reached")?;
            match self.ctx.host.kind(&path) {
                Some(PathKind::Other) => {}
                None if b.optional => continue,
                None => return Err(missing(self.ctx, field, &path)),
                Some(_) => {
                    return Err(self
                        .ctx
                        .field_error(field, format!("{} is not a unix socket", path.display())))
                }
            }
            if !self.shows_host(&path) {
                self.push(Layer::Bind, bind(&path, SOCKET_BIND));
            }
            named.push(path);
        }
        let census = self
            .ctx
            .host
            .unix_sockets()
            .map_err(|e| CompileError::Invocation(format!("list the host's unix sockets: {e}")))?;
        let mut covered: Vec<PathBuf> = Vec::new();
        for s in census {
            if !s.is_absolute() {
                continue;
            }
            // A path that does not resolve cannot be connected to either.
            let Ok(p) = resolve(self.ctx.host, &s) else { continue };
            if is_forbidden(&p) || named.contains(&p) || covered.contains(&p) || !self.shows_host(&p) {
                continue;
            }
            if self.ctx.host.kind(&p) != Some(PathKind::Other) {
                continue;
            }
            if covered.len() >= SOCKET_LIMIT {
                return Err(CompileError::Invocation(format!(
                    "cover the host's unix sockets: {SOCKET_LIMIT} or more of them would show inside; too many to cover one by one"
                )));
            }
            covered.push(p);
        }
        for p in covered {
            self.push(Layer::Hidden, mount(&p, "bind", Path::new("/dev/null"), SOCKET_COVER));
        }
        Ok(())
    }

    /// Whether the host's own file at `p` shows inside: the mount whose
    /// destination is the deepest prefix of `p` decides (at equal depth the
    /// later layer, then the later mount, as the mounts will be applied),
    /// and it shows the host only when it binds the host's tree at its own
    /// path. Nothing of the host shows outside every mount (a rootfs).
    pub(super) fn shows_host(&self, p: &Path) -> bool {
        self.mounts
            .over(p)
            .max_by_key(|(i, (layer, m))| (depth(m.destination()), *layer, *i))
            .is_some_and(|(_, (_, m))| {
                m.typ().as_deref() == Some("bind") && m.source().as_deref() == Some(m.destination().as_path())
            })
    }
}
