//! `check_bundle`, the first step of `create` (and all of it the config.json
//! fuzz runs): the bundle read, validated and adapted by the guards, its rootfs
//! resolved and its cgroup path named and confined, before the id is claimed
//! and with nothing written.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use libcontainer::oci_spec::runtime::{LinuxNamespaceType, Spec};

use super::base::{validate_id, Runtime};
use super::kernel::{caps_effective, has_new_namespace, is_host_root, is_root};
use super::{cgroup, cgroup_userns, cgroup_v1_unprivileged, cgroup_v2, guards, validate};

/// A bundle `check_bundle` accepted: the spec adapted by the guards, with the
/// rootfs resolved and the cgroup path confined.
pub struct CheckedBundle {
    pub bundle: PathBuf,
    pub rootfs: PathBuf,
    pub spec: Spec,
    /// The container's directory in each cgroup hierarchy (none for systemd).
    pub cgroup_dirs: Vec<PathBuf>,
}

impl Runtime {
    /// What `create` does with a bundle before it claims the id: reads
    /// config.json (bounded), parses, validates, resolves the rootfs and the
    /// mount destinations, applies the guards and confines the cgroup path.
    /// Nothing is written; the config.json fuzz (runtime/fuzz.rs) runs it too.
    pub fn check_bundle(&self, id: &str, bundle: &Path) -> Result<CheckedBundle> {
        validate_id(id)?;
        let bundle = fs::canonicalize(bundle).with_context(|| format!("open bundle {}", bundle.display()))?;
        let config_path = bundle.join("config.json");
        let raw = crate::bounded::read(&config_path, crate::bounded::SPEC_LIMIT)
            .with_context(|| format!("read {}", config_path.display()))?;
        let mut spec: Spec =
            super::unknown_caps::parse(&raw, "/process/capabilities", &config_path.display().to_string())?;
        // runc's words ("invalid configuration") come first, as its bats suite matches them.
        validate::spec(&spec).with_context(|| format!("use {}: invalid configuration", config_path.display()))?;
        if !spec.version().starts_with("1.") {
            bail!(
                "run {}: ociVersion {:?} is not supported (1.x is)",
                config_path.display(),
                spec.version()
            );
        }
        let root_path = spec
            .root()
            .as_ref()
            .ok_or_else(|| anyhow!("read {}: it has no root", config_path.display()))?
            .path()
            .clone();
        let rootfs = bundle.join(&root_path);
        let rootfs = fs::canonicalize(&rootfs).with_context(|| format!("open rootfs {}", rootfs.display()))?;
        if !rootfs.is_dir() {
            bail!("use rootfs {}: it is not a directory", rootfs.display());
        }
        if rootfs == Path::new("/") {
            // libcontainer failed this far later, as "failed to detect cgroup setup".
            bail!(
                "use rootfs {}: it is the host's /, and a container needs a root of its own",
                root_path.display()
            );
        }
        if spec
            .process()
            .as_ref()
            .and_then(|p| p.args().as_ref())
            .is_none_or(|a| a.is_empty())
        {
            bail!("read {}: process.args is empty", config_path.display());
        }
        for m in spec.mounts().iter().flatten() {
            if !m.destination().is_absolute() {
                bail!(
                    "mount {}: its destination must be an absolute path",
                    m.destination().display()
                );
            }
            let resolved = guards::check_destination(&rootfs, m.destination())?;
            libcontainer::rootfs::proc_sys::check(&resolved, m).map_err(|e| anyhow!(e))?;
        }
        if let Some(r) = spec.root_mut() {
            r.set_path(rootfs.clone());
        }

        let user_ns = has_new_namespace(&spec, LinuxNamespaceType::User);
        let caller = guards::Caller {
            may_raise_rlimits: is_host_root() && !user_ns && has_cap_sys_resource(),
        };
        for w in guards::apply(&mut spec, &caller)? {
            tracing::warn!("{w}");
        }
        self.default_cgroups_path(&mut spec, id)?;
        // A systemd scope (slice:prefix:name) is made and removed by systemd.
        let cgroup_dirs = if self.systemd_cgroup {
            Vec::new()
        } else {
            confine_cgroups_path(&mut spec)?
        };
        if spec.linux().as_ref().and_then(|l| l.seccomp().as_ref()).is_some() {
            require_kernel_seccomp()?;
        }
        Ok(CheckedBundle {
            bundle,
            rootfs,
            spec,
            cgroup_dirs,
        })
    }

    /// Without cgroupsPath libcontainer names the cgroup ":youki:<id>" in every
    /// hierarchy; name it after us instead, under a delegated subtree when
    /// unprivileged.
    fn default_cgroups_path(&self, spec: &mut Spec, id: &str) -> Result<()> {
        let best_effort = spec
            .annotations()
            .as_ref()
            .and_then(|a| a.get(claude_shim_bundle::annotations::BEST_EFFORT_RESOURCES))
            .is_some_and(|v| v == "true");
        let Some(linux) = spec.linux_mut() else {
            bail!("read config.json: it has no linux section")
        };
        if linux.cgroups_path().is_some() {
            return Ok(());
        }
        if self.systemd_cgroup {
            // runc's slice:prefix:name; systemd names the scope claude-shim-<id>.scope.
            let slice = if is_host_root() { "system.slice" } else { "user.slice" };
            linux.set_cgroups_path(Some(PathBuf::from(format!("{slice}:claude-shim:{id}"))));
            return Ok(());
        }
        let path = if is_host_root() {
            cgroup_v2::root_parent()?.join(id)
        } else if is_root() {
            cgroup_userns::default_path(linux.resources().as_ref(), id)?
        } else if cgroup_v2::is_unified() {
            let needed = cgroup_v2::controllers_for(linux.resources().as_ref());
            match cgroup_v2::delegated(&needed)? {
                Ok(parent) => parent.join(id),
                Err(cgroup_v2::NotDelegated(why)) if best_effort => {
                    tracing::warn!(
                        "container {id} runs without cgroup limits (resources.best_effort): {why}"
                    );
                    linux.set_resources(None);
                    cgroup_v2::own_cgroup()?.join(id)
                }
                Err(cgroup_v2::NotDelegated(why)) => bail!(
                    "find a delegated cgroup for uid {}: {why}; run it as `{}` (or set resources.best_effort = true in the policy)",
                    nix::unistd::geteuid(),
                    cgroup_v2::HOW_TO_DELEGATE
                ),
            }
        } else {
            let uid = nix::unistd::geteuid();
            let parent = PathBuf::from(format!("/claude-shim/user-{uid}"));
            check_delegated(&parent)?;
            parent.join(id)
        };
        linux.set_cgroups_path(Some(path));
        Ok(())
    }
}

/// Confines the spec's cgroupsPath (runtime/cgroup.rs), writes the clean
/// path back for libcontainer, and returns the container's directory in each
/// hierarchy.
fn confine_cgroups_path(spec: &mut Spec) -> Result<Vec<PathBuf>> {
    let Some(linux) = spec.linux_mut() else {
        bail!("read config.json: it has no linux section")
    };
    let raw = linux.cgroups_path().clone().unwrap_or_default();
    let path = cgroup::confine(&raw, &cgroup::configured_parent())?;
    let dirs = cgroup::dirs(&path)?;
    cgroup::check_on_cgroupfs(&dirs, &raw)?;
    linux.set_cgroups_path(Some(path));
    Ok(dirs)
}

/// Unprivileged on cgroup v1, libcontainer can only create cgroups under a
/// subtree root has delegated. Refuse up front, naming it, rather than fail
/// somewhere in the middle of create.
fn check_delegated(parent: &Path) -> Result<()> {
    if let Some(path) = cgroup_v1_unprivileged::not_delegated(parent) {
        bail!(
            "find a delegated cgroup for uid {}: {} is missing or not writable (as root: hack/delegate-cgroups {})",
            nix::unistd::geteuid(),
            path.display(),
            nix::unistd::geteuid()
        );
    }
    Ok(())
}

/// The kernel must filter; libcontainer would otherwise fail late or not at all.
fn require_kernel_seccomp() -> Result<()> {
    // SAFETY: prctl with integer arguments only.
    let r = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
    if r < 0 {
        bail!(
            "use seccomp: this kernel has no seccomp support ({})",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

fn has_cap_sys_resource() -> bool {
    const CAP_SYS_RESOURCE: u64 = 24;
    caps_effective().is_some_and(|caps| caps & (1 << CAP_SYS_RESOURCE) != 0)
}
