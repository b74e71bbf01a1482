//! `create`: claims the id for a checked bundle (check_bundle.rs), writes the
//! effective spec and meta.json, makes the container's cgroups, and has
//! libcontainer build the container, whose init then waits for `start`;
//! `hand_over` lets it outlive this process.

use std::fs;
use std::io::ErrorKind;
use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use libcontainer::container::builder::ContainerBuilder;
use libcontainer::container::Container;
use libcontainer::oci_spec::runtime::{LinuxNamespaceType, LinuxResources, Spec};
use libcontainer::syscall::syscall::SyscallType;
use nix::fcntl::{Flock, FlockArg};

use super::base::{libcontainer_error, IdLock, Runtime, OURS};
use super::check_bundle::CheckedBundle;
use super::executor::ShimExecutor;
use super::kernel::{has_namespace, has_new_namespace, is_host_root, is_root};
use super::{
    cgroup, cgroup_v1_unprivileged, cgroup_v2, creator, devices, freezer, host_mounts, loopback, pid_file,
    seccomp_cache,
};
use crate::state::Meta;

/// What may adapt a spec at create, after the guards and before libcontainer
/// sees it (the admin policy; `sandbox` compiles its own).
pub type Adapt<'a> = &'a dyn Fn(&mut Spec, &mut Meta) -> Result<()>;

/// A request to create a container. The container lives and dies with the
/// process that created it (`run` without --detach, `sandbox`) unless
/// `hand_over` follows a successful create.
pub struct CreateRequest<'a> {
    pub id: &'a str,
    pub bundle: &'a Path,
    pub pid_file: Option<&'a Path>,
    pub console_socket: Option<&'a Path>,
    pub preserve_fds: i32,
    pub no_pivot: bool,
    /// stdio for the container's init; None inherits ours.
    pub stdio: Option<[OwnedFd; 3]>,
}

/// How `linux.resources.devices` is enforced for one create (runtime/devices.rs).
#[derive(Clone, Copy, PartialEq)]
enum DeviceControl {
    /// cgroup v1: libcgroups writes devices.allow and devices.deny.
    V1,
    /// cgroup v2 as root: libcgroups attaches the program; checked after.
    Attached,
    /// cgroup v2 as root with --systemd-cgroup: the runtime attaches it.
    SystemdScope,
    /// cgroup v2 rootless: not enforceable; run only where it is moot.
    Rootless,
}

impl DeviceControl {
    fn of(systemd_cgroup: bool) -> Self {
        if !cgroup_v2::is_unified() {
            DeviceControl::V1
        } else if !is_host_root() {
            DeviceControl::Rootless
        } else if systemd_cgroup {
            DeviceControl::SystemdScope
        } else {
            DeviceControl::Attached
        }
    }

    /// Before libcontainer: a rootless spec must make the rules moot; as
    /// root a spec without resources still gets runc's deny-all program
    /// (libcontainer applies nothing when resources are absent).
    fn prepare(self, spec: &mut Spec) -> Result<()> {
        match self {
            DeviceControl::V1 => Ok(()),
            DeviceControl::Rootless => devices::check_rootless_spec(spec),
            DeviceControl::Attached | DeviceControl::SystemdScope => {
                if let Some(linux) = spec.linux_mut() {
                    if linux.resources().is_none() {
                        linux.set_resources(Some(LinuxResources::default()));
                    }
                }
                Ok(())
            }
        }
    }

    /// After libcontainer built the container, before its process starts:
    /// what the kernel holds for the init.
    fn check(self, pid: i32, spec: &Spec) -> Result<()> {
        match self {
            DeviceControl::V1 => Ok(()),
            DeviceControl::Rootless => devices::check_rootless_running(pid),
            DeviceControl::Attached => devices::check_attached(pid),
            DeviceControl::SystemdScope => {
                let rules = spec
                    .linux()
                    .as_ref()
                    .and_then(|l| l.resources().as_ref())
                    .and_then(|r| r.devices().clone());
                devices::attach(pid, &rules)?;
                devices::check_attached(pid)
            }
        }
    }
}

impl Runtime {
    /// Reads and adapts the bundle's config.json, writes the effective copy,
    /// and has libcontainer create the container (its init waits for `start`).
    pub fn create(&self, req: CreateRequest<'_>, adapt: Adapt<'_>) -> Result<Container> {
        let id = req.id;
        let CheckedBundle {
            bundle,
            rootfs,
            spec,
            cgroup_dirs,
        } = self.check_bundle(id, req.bundle)?;
        let pid_file = req.pid_file.map(pid_file::resolve).transpose()?;
        let _lock = self.claim(id)?;
        let host_mounts_before = if has_namespace(&spec, LinuxNamespaceType::Mount) {
            None
        } else {
            Some(host_mounts::snapshot(&rootfs)?)
        };
        let me = std::process::id() as i32;
        let mut meta = Meta {
            bundle: bundle.clone(),
            rootfs,
            host_mounts_before,
            owner: crate::network::process::start_time(me).map(|s| (me, s)),
            systemd_cgroup: self.systemd_cgroup,
            ..Meta::default()
        };
        let result = self
            .create_claimed(req, spec, &cgroup_dirs, &mut meta, adapt)
            .and_then(|c| {
                if let Some(path) = &pid_file {
                    let pid = c
                        .pid()
                        .ok_or_else(|| anyhow!("create container {id}: it has no init pid"))?;
                    pid_file::write(path, pid.as_raw())?;
                }
                Ok(c)
            });
        if result.is_err() {
            if let Err(e) = self.remove_leftovers(id) {
                tracing::warn!("clean up after the failed create of {id}: {e}");
            }
        }
        result
    }

    /// Claims `id` atomically: a fresh directory holding a locked file is
    /// renamed into place, so two creates of one id cannot both win, and a
    /// create that died leaves a lock anyone can take.
    fn claim(&self, id: &str) -> Result<IdLock> {
        let root = self.ensure_root()?;
        let ours = root.join(OURS);
        loop {
            let tmp = ours.join(format!(".new-{}-{}", std::process::id(), id));
            let _ = fs::remove_dir_all(&tmp);
            fs::DirBuilder::new()
                .mode(0o700)
                .create(&tmp)
                .with_context(|| format!("create {}", tmp.display()))?;
            let lock_path = tmp.join("lock");
            let file = fs::File::create(&lock_path).with_context(|| format!("create {}", lock_path.display()))?;
            let lock = Flock::lock(file, FlockArg::LockExclusive)
                .map_err(|(_, e)| e)
                .with_context(|| format!("lock {}", lock_path.display()))?;
            let claimed = !self.container_dir(id).exists() && fs::rename(&tmp, self.meta_dir(id)).is_ok();
            if claimed {
                return Ok(IdLock(lock));
            }
            let _ = fs::remove_dir_all(&tmp);
            drop(lock);
            // The id is taken, or was by a create that died half-way.
            if self.is_complete(id) {
                bail!("create container {id}: a container with this id already exists");
            }
            match self.try_lock(id)? {
                Some(_held) => {
                    tracing::warn!("container {id} was left half-created; removing what it left");
                    self.remove_leftovers(id)?;
                }
                None if self.meta_dir(id).exists() => {
                    bail!("create container {id}: a container with this id already exists")
                }
                None => self.remove_leftovers(id)?,
            }
        }
    }

    fn ensure_root(&self) -> Result<PathBuf> {
        let ours = self.root.join(OURS);
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&ours)
            .with_context(|| format!("create state directory {}", ours.display()))?;
        let root =
            fs::canonicalize(&self.root).with_context(|| format!("resolve state directory {}", self.root.display()))?;
        Ok(root)
    }

    fn create_claimed(
        &self,
        req: CreateRequest<'_>,
        mut spec: Spec,
        cgroup_dirs: &[PathBuf],
        meta: &mut Meta,
        adapt: Adapt<'_>,
    ) -> Result<Container> {
        let id = req.id;
        adapt(&mut spec, meta).with_context(|| format!("create container {id}"))?;
        let mut network = crate::network::prepare(&mut spec, &self.meta_dir(id))?;
        crate::timing::mark("create: spec adapted");
        self.write_meta(id, meta)?;
        let raw = spec
            .linux()
            .as_ref()
            .and_then(|l| l.cgroups_path().clone())
            .unwrap_or_default();
        cgroup::check_empty(cgroup_dirs, &raw)?;
        // Made here, not by libcgroups, to know which are the container's own.
        let mut record = meta.clone();
        let made = match cgroup::make(cgroup_dirs, &mut |dirs| {
            record.cgroup_dirs = dirs.to_vec();
            self.write_meta(id, &record)
        }) {
            Ok(made) => made,
            // Unprivileged without limits (resources.best_effort): the
            // container stays in the caller's cgroup, as libcgroups leaves it.
            Err(e)
                if !is_host_root()
                    && !cgroup::asks_limits(spec.linux().as_ref().and_then(|l| l.resources().as_ref()))
                    && e.chain().any(|c| {
                        c.downcast_ref::<std::io::Error>()
                            .is_some_and(|io| io.kind() == ErrorKind::PermissionDenied)
                    }) =>
            {
                tracing::debug!("container {id} gets no cgroup of its own: {e:#}");
                Vec::new()
            }
            Err(e) => return Err(e),
        };
        cgroup::enable_controllers(&made);
        // After `make`: a new cgroup below a frozen one is frozen too.
        freezer::check_not_frozen(cgroup_dirs, &raw)?;
        meta.cgroup_own = !cgroup_dirs.is_empty() && made.len() == cgroup_dirs.len();
        meta.cgroup_dirs = made;
        self.write_meta(id, meta)?;
        let meta_dir = self.meta_dir(id);
        // Unprivileged on cgroup v1, libcontainer cannot apply any limit
        // (see cgroup_v1_unprivileged); the runtime does, before the start.
        let mut own_limits = None;
        if !is_host_root() && cgroup_v1_unprivileged::is_v1() {
            if let Some(linux) = spec.linux_mut() {
                if let Some(resources) = linux.resources().clone() {
                    let plan =
                        cgroup_v1_unprivileged::plan(&resources).with_context(|| format!("create container {id}"))?;
                    let path = linux.cgroups_path().clone().unwrap_or_default();
                    linux.set_resources(None);
                    own_limits = Some((path, plan));
                }
            }
        }
        let device_control = DeviceControl::of(self.systemd_cgroup);
        device_control
            .prepare(&mut spec)
            .with_context(|| format!("create container {id}"))?;
        let effective = meta_dir.join("config.json");
        spec.save(&effective)
            .map_err(|e| anyhow!("write {}: {e}", effective.display()))?;

        let link = creator::Link::new()?;
        let seccomp = spec.linux().as_ref().and_then(|l| l.seccomp().clone());
        for s in seccomp.iter().chain(&meta.stacked_seccomp) {
            seccomp_cache::prepare(s).with_context(|| format!("create container {id}"))?;
        }
        crate::timing::mark("create: seccomp programs ready");
        let nnp = spec.process().as_ref().and_then(|p| p.no_new_privileges()) == Some(true);
        let executor = ShimExecutor {
            tenant_seccomp: None,
            stacked_seccomp: meta.stacked_seccomp.clone(),
            expect_seccomp: seccomp.is_some() || !meta.stacked_seccomp.is_empty(),
            expect_no_new_privs: nnp,
            creator: Some(link.ends()),
        };
        let terminal = spec.process().as_ref().and_then(|p| p.terminal()).unwrap_or(false);

        let mut builder = ContainerBuilder::new(id.to_owned(), SyscallType::default())
            .with_executor(executor)
            .with_root_path(&self.root)
            .map_err(|e| anyhow!("use state directory {}: {e}", self.root.display()))?
            .with_console_socket(req.console_socket)
            .with_preserved_fds(req.preserve_fds);
        if let Some([stdin, stdout, stderr]) = req.stdio {
            builder = builder.with_stdin(stdin).with_stdout(stdout).with_stderr(stderr);
        }
        let container = builder
            .validate_id()
            .map_err(|e| anyhow!("use container id {id:?}: {e}"))?
            .as_init(&meta_dir)
            .with_oci_bundle(&meta.bundle)
            .with_systemd(self.systemd_cgroup)
            .with_detach(terminal)
            .with_no_pivot(req.no_pivot)
            .build()
            .map_err(|e| anyhow!("create container {id}: {}", libcontainer_error(&e)))?;
        crate::timing::mark("create: libcontainer built");
        meta.init_start = container
            .pid()
            .and_then(|p| crate::network::process::start_time(p.as_raw()));
        self.write_meta(id, meta)?;
        if let Some((path, plan)) = own_limits {
            cgroup_v1_unprivileged::apply(&path, &plan).with_context(|| format!("limit container {id}"))?;
            if let Some(pid) = container.pid() {
                cgroup_v1_unprivileged::check_joined(pid.as_raw(), &path, &plan)
                    .with_context(|| format!("limit container {id}"))?;
            }
        }
        self.check_placed(id, &spec, &container)?;
        if let Some(pid) = container.pid() {
            device_control
                .check(pid.as_raw(), &spec)
                .with_context(|| format!("create container {id}"))?;
        }
        if let Some(plan) = network.as_mut() {
            // The init waits for `start`; its network namespace exists now.
            let pid = container
                .pid()
                .ok_or_else(|| anyhow!("create container {id}: it has no init pid"))?
                .as_raw();
            crate::network::attach(plan, id, &meta_dir, pid, &mut |name, pid, start| {
                meta.helpers.insert(name.to_owned(), pid);
                meta.helper_starts.insert(name.to_owned(), start);
                self.write_meta(id, meta)
            })
            .with_context(|| format!("set up network mode {} for container {id}", plan.mode.as_str()))?;
        } else if has_new_namespace(&spec, LinuxNamespaceType::Network) {
            let pid = container
                .pid()
                .ok_or_else(|| anyhow!("create container {id}: it has no init pid"))?;
            if is_root() {
                loopback::bring_up(pid).with_context(|| format!("create container {id}"))?;
            } else {
                // The init is not dumpable before its execve, so an unprivileged
                // runtime may not open its /proc/<pid>/ns files (ptrace access).
                tracing::debug!(
                    "lo of container {id} stays down: an unprivileged runtime cannot enter it before start"
                );
            }
        }
        *self.creator.borrow_mut() = Some((id.to_owned(), link));
        Ok(container)
    }

    /// After a successful create: the container outlives this process.
    /// Recorded first: a runtime killed between the two leaves a container
    /// whose init dies with it, which `delete` removes, rather than a live
    /// one `gc` would take for a stranded one.
    pub fn hand_over(&self) -> Result<()> {
        match self.creator.borrow_mut().take() {
            Some((id, link)) => {
                let mut meta = self.read_meta(&id).unwrap_or_default();
                meta.handed_over = true;
                self.write_meta(&id, &meta)?;
                link.hand_over()
            }
            None => Ok(()),
        }
    }

    /// libcgroups leaves an unprivileged container in its parent's cgroup
    /// when it cannot create its own, silently; on cgroup v2 the kernel's
    /// view of the init is checked instead, whenever there are limits.
    fn check_placed(&self, id: &str, spec: &Spec, container: &Container) -> Result<()> {
        let linux = spec.linux().as_ref();
        let has_limits = !cgroup_v2::controllers_for(linux.and_then(|l| l.resources().as_ref())).is_empty();
        if !has_limits || !cgroup_v2::is_unified() {
            return Ok(());
        }
        let Some(pid) = container.pid() else { return Ok(()) };
        let got = cgroup_v2::cgroup_of(pid.as_raw())?;
        let want = linux.and_then(|l| l.cgroups_path().clone()).unwrap_or_default();
        let placed = if self.systemd_cgroup {
            // slice:prefix:name ends up as .../<prefix>-<name>.scope.
            let name = want.to_string_lossy();
            let mut parts = name.rsplitn(3, ':');
            let (n, p) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            got.file_name()
                .is_some_and(|f| f.to_string_lossy() == format!("{p}-{n}.scope"))
        } else {
            got == want
        };
        if !placed {
            bail!(
                "limit container {id}: its init runs in cgroup {}, not in {}",
                got.display(),
                want.display()
            );
        }
        Ok(())
    }
}
