//! The review workspace's working directory (`filesystem.workspace =
//! "review"`): an overlay whose lower layer is the project and whose upper
//! layer, in claude-shim's state, receives every write, so nothing the
//! sandbox writes reaches the project until `claude-shim apply` brings it.
//! The compile writes the overlay without its upper and work directories:
//! the binary makes them for each run and `attach_layer` adds them. Without
//! them the kernel refuses the mount (an overlay of one lower layer and no
//! upper is not one), so a bundle compiled for review never writes the tree.
//!
//! No bind of a host path under the working directory goes over the
//! overlay: the live workspace's protected paths (each `.git` a bind of
//! itself, read-only configs and hooks) and placeholders are not made, and
//! a writable extra bind there is refused. Hidden and masked paths and the
//! covered sockets still go on top (read-only, or `/dev/null`).

use std::path::Path;

use oci_spec::runtime::Spec;

use super::{mount, Builder, Layer};
use crate::compile::output::CompileError;

/// Options every review overlay gets: no set-id programs or devices take
/// effect from it; no index (its upper layer alone says what changed) and
/// no metadata-only copies (a copied-up file is whole in the upper layer).
const OVERLAY: &[&str] = &["nosuid", "nodev", "index=off", "metacopy=off"];

/// `lowerdir`'s value for `path`: overlayfs splits it at `:` and takes `\`
/// as an escape.
fn lowerdir(path: &Path) -> String {
    let mut out = String::from("lowerdir=");
    for c in path.to_string_lossy().chars() {
        if c == ':' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl Builder<'_, '_> {
    /// The working directory as an overlay over itself. Inside a user
    /// namespace the layer's attributes are `user.overlay.*` xattrs
    /// (`userxattr`, Linux 5.11); there the kernel also takes no directory
    /// redirects, which outside it are refused explicitly, so a renamed
    /// directory is copied whole and the upper layer holds no redirect.
    pub(super) fn review_workdir(&mut self, wd: &Path) -> Result<(), CompileError> {
        if *wd == self.resolve("filesystem.home", &self.ctx.inv.home)? {
            return Err(self.ctx.field_error(
                "filesystem.workspace",
                format!(
                    "\"review\" keeps its layer in claude-shim's state in the home, and the working directory {} is the home",
                    wd.display()
                ),
            ));
        }
        if !self.ctx.policy.filesystem.writable.is_empty() {
            let home = &self.ctx.inv.home;
            for (i, b) in self.ctx.policy.filesystem.writable.iter().enumerate() {
                let p = b.path.expand(home);
                if p.starts_with(wd) {
                    return Err(self.ctx.field_error(
                        format!("filesystem.writable[{i}]"),
                        format!(
                            "{} lies in the working directory, whose writes workspace = \"review\" keeps for review; a writable bind would write the project",
                            p.display()
                        ),
                    ));
                }
            }
        }
        let mut options: Vec<String> = OVERLAY.iter().map(|s| s.to_string()).collect();
        options.push(lowerdir(wd));
        options.push(if self.ctx.userns {
            "userxattr".to_owned()
        } else {
            "redirect_dir=nofollow".to_owned()
        });
        let options: Vec<&str> = options.iter().map(String::as_str).collect();
        self.visible.insert(wd.to_path_buf());
        self.push(Layer::Bind, mount(wd, "overlay", Path::new("overlay"), &options));
        Ok(())
    }
}

/// Adds the run's upper and work directories to the review overlay that
/// `compile` made at `workdir`.
pub fn attach_layer(spec: &mut Spec, workdir: &Path, upper: &Path, work: &Path) -> Result<(), CompileError> {
    let mut mounts = spec.mounts().clone().unwrap_or_default();
    let Some(m) = mounts
        .iter_mut()
        .find(|m| m.destination() == workdir && m.typ().as_deref() == Some("overlay"))
    else {
        return Err(CompileError::Invocation(format!(
            "attach the review layer: the spec has no overlay at {}",
            workdir.display()
        )));
    };
    let mut options = m.options().clone().unwrap_or_default();
    if options.iter().any(|o| o.starts_with("upperdir=")) {
        return Err(CompileError::Invocation(format!(
            "attach the review layer: the overlay at {} has one",
            workdir.display()
        )));
    }
    options.push(format!("upperdir={}", upper.display()));
    options.push(format!("workdir={}", work.display()));
    m.set_options(Some(options));
    spec.set_mounts(Some(mounts));
    Ok(())
}
