//! The container runtime: the only module that talks to libcontainer. It owns
//! the state directory, adapts each spec through `guards` before libcontainer
//! sees it, and drives the lifecycle (create, start, kill, delete, exec...).
//!
//! State layout under the root (default /run/claude-shim):
//!   <root>/<id>/               libcontainer's container directory (state.json...)
//!   <root>/.claude-shim/<id>/  ours: the effective config.json libcontainer
//!                              reads, meta.json (the engine's bundle, helper
//!                              pids), and a lock held while `create` runs.

mod base;
pub mod cgroup;
pub mod cgroup_v1_unprivileged;
pub mod cgroup_v2;
mod copy_up_tests;
pub mod creator;
pub mod devices;
pub mod executor;
pub mod foreground;
#[cfg(test)]
mod fuzz;
pub mod gc;
pub mod guards;
pub mod host_mounts;
mod kernel;
pub mod loopback;
pub mod own;
pub mod pid_file;
pub mod seccomp_cache;
pub mod started;
pub mod validate;

use std::fs;
use std::io::ErrorKind;
use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use libcgroups::common::{CgroupManager, ControllerOpt};
use libcontainer::container::builder::ContainerBuilder;
use libcontainer::container::{Container, ContainerStatus};
use libcontainer::oci_spec::runtime::{LinuxNamespaceType, LinuxResources, Spec};
use libcontainer::syscall::syscall::SyscallType;
use nix::fcntl::{Flock, FlockArg};
use nix::sys::signal::Signal as NixSignal;

pub use self::base::Runtime;
use self::base::{libcontainer_error, status_name, validate_id, IdLock, OURS};
use self::cgroup::cgroup_manager;
use self::executor::ShimExecutor;
use self::kernel::{caps_effective, has_namespace, has_new_namespace, in_user_ns, is_root};
pub use crate::state::Meta;

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

/// A bundle `check_bundle` accepted: the spec adapted by the guards, with the
/// rootfs resolved and the cgroup path confined.
pub struct CheckedBundle {
    pub bundle: PathBuf,
    pub rootfs: PathBuf,
    pub spec: Spec,
    /// The container's directory in each cgroup hierarchy (none for systemd).
    pub cgroup_dirs: Vec<PathBuf>,
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
        } else if !is_root() || in_user_ns() {
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

    /// Removes everything a container (whole or half-created) holds: its
    /// own processes (runtime/own.rs), helper processes, the cgroup
    /// directories create made, and both state directories. libcontainer's
    /// delete is not used: it kills every process in the cgroup.
    pub fn remove_leftovers(&self, id: &str) -> Result<()> {
        let dir = self.container_dir(id);
        let mut errors = Vec::new();
        let meta = self.read_meta(id);
        if let Some(meta) = &meta {
            crate::network::stop_helpers(meta);
        }
        // state.json is missing when create was killed early.
        let container = load_settled(&dir);
        if let Some(c) = &container {
            if c.status() == ContainerStatus::Paused {
                // A frozen process cannot die.
                self.set_freezer(id, c, libcgroups::common::FreezerState::Thawed);
            }
        }
        let own = self.own(id, container.as_ref());
        if let Err(e) = own.kill_and_wait(std::time::Duration::from_secs(10)) {
            errors.push(format!("{e:#}"));
        }
        if let Some(meta) = &meta {
            // What is left in them is not the container's: it stays, and so do they.
            if let Err(e) = cgroup::remove(&meta.cgroup_dirs) {
                tracing::warn!("{e:#}");
            }
        }
        if let Some(meta) = &meta {
            if let Some(before) = &meta.host_mounts_before {
                if let Err(e) = host_mounts::detach_new(&meta.rootfs, before) {
                    errors.push(format!("{e:#}"));
                }
            }
        }
        if let Some(c) = container {
            run_poststop(id, c);
        }
        match fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => errors.push(format!("remove {}: {e}", dir.display())),
        }
        if let Err(e) = remove_meta_dir(&self.meta_dir(id)) {
            errors.push(e);
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(anyhow!(errors.join("; ")))
        }
    }

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
            serde_json::from_slice(&raw).map_err(|e| anyhow!("parse {}: {e}", config_path.display()))?;
        validate::spec(&spec).with_context(|| format!("use {}", config_path.display()))?;
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
            may_raise_rlimits: is_root() && !user_ns && has_cap_sys_resource(),
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
                if !is_root()
                    && spec.linux().as_ref().is_none_or(|l| l.resources().is_none())
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
        meta.cgroup_own = !cgroup_dirs.is_empty() && made.len() == cgroup_dirs.len();
        meta.cgroup_dirs = made;
        self.write_meta(id, meta)?;
        let meta_dir = self.meta_dir(id);
        // Unprivileged on cgroup v1, libcontainer cannot apply any limit
        // (see cgroup_v1_unprivileged); the runtime does, before the start.
        let mut own_limits = None;
        if !is_root() && cgroup_v1_unprivileged::is_v1() {
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
            let slice = if is_root() { "system.slice" } else { "user.slice" };
            linux.set_cgroups_path(Some(PathBuf::from(format!("{slice}:claude-shim:{id}"))));
            return Ok(());
        }
        let path = if is_root() {
            cgroup_v2::root_parent()?.join(id)
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

    /// How many of the container's processes the OOM killer ended (cgroup v2).
    pub fn oom_kills(&self, id: &str) -> Option<u64> {
        let c = self.load(id).ok()?;
        let path = self.effective_spec(id).ok()?.linux().as_ref()?.cgroups_path().clone()?;
        if c.systemd() || !cgroup_v2::is_unified() {
            return None;
        }
        cgroup_v2::oom_kills(&path).filter(|n| *n > 0)
    }

    pub fn start(&self, id: &str) -> Result<()> {
        let mut c = self.load(id)?;
        if c.status() != ContainerStatus::Created {
            bail!("start container {id}: it is {}, not created", status_name(c.status()));
        }
        c.start()
            .map_err(|e| anyhow!("start container {id}: {}", libcontainer_error(&e)))?;
        if let Some(pid) = c.pid() {
            if !started::wait_for_exec(pid.as_raw(), std::time::Duration::from_secs(10)) {
                tracing::warn!("container {id}'s process has not started its program within 10 s");
            }
        }
        Ok(())
    }

    /// Sends `signal` to the init (or to every process). A created container's
    /// init is still runtime code with default dispositions, and as pid 1 of its
    /// namespace it would ignore e.g. SIGTERM; runc's Go init dies of it, and so
    /// must ours, so a terminating signal becomes SIGKILL there.
    ///
    /// The state file is not touched: the status follows from the init's
    /// liveness, and libcontainer's kill rewrites state.json in place, which a
    /// concurrent `delete` (the foreground `run`) then reads half-written.
    pub fn kill(&self, id: &str, signal: &str, all: bool) -> Result<()> {
        use libcgroups::common::FreezerState;
        let sig = parse_signal(signal)?;
        let c = self.load(id)?;
        let status = c.status();
        if status == ContainerStatus::Stopped && !all {
            bail!("kill container {id}: it is not running");
        }
        let sig = if status == ContainerStatus::Created && terminates(sig) {
            NixSignal::SIGKILL
        } else {
            sig
        };
        let own = self.own(id, Some(&c));
        if all {
            // Freeze a cgroup of its own first, so no process forks past the
            // signal (v1 frozen tasks take the signal when thawed).
            let freeze = own.own_cgroup.is_some() && status != ContainerStatus::Paused;
            if freeze {
                self.set_freezer(id, &c, FreezerState::Frozen);
            }
            own.signal_all(sig as libc::c_int);
            if freeze {
                self.set_freezer(id, &c, FreezerState::Thawed);
            }
        } else {
            own.signal_init(sig as libc::c_int)?;
        }
        if status == ContainerStatus::Paused && sig == NixSignal::SIGKILL {
            // A frozen init cannot die; thaw it.
            self.set_freezer(id, &c, FreezerState::Thawed);
        }
        Ok(())
    }

    pub fn delete(&self, id: &str, force: bool) -> Result<()> {
        validate_id(id)?;
        if force {
            // A create killed before it renamed its claim into place.
            for e in self.collect_claims_of(id).failed {
                tracing::warn!("{e}");
            }
        }
        if !self.exists(id) {
            if force {
                return Ok(());
            }
            bail!("delete container {id}: it does not exist");
        }
        // A killed create's lock is held a moment longer by the forks that
        // inherited it (the init ends when it sees its creator gone).
        let mut lock = self.try_lock(id);
        if force {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
            while lock.is_err() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(10));
                lock = self.try_lock(id);
            }
        }
        let _lock = match lock {
            Ok(l) => l,
            Err(e) if force => {
                // A create still running holds the lock; force means now.
                tracing::warn!("{e}; deleting anyway");
                None
            }
            Err(e) => return Err(e),
        };
        if self.container_dir(id).join("state.json").exists() {
            // load reads the status afresh (and retries a half-read one); an
            // unreadable state is what a killed create left.
            let status = match self.load(id) {
                Ok(c) => c.status(),
                Err(e) if force => {
                    tracing::warn!("{e:#}; removing what is left");
                    ContainerStatus::Stopped
                }
                Err(e) => return Err(e),
            };
            let deletable = matches!(status, ContainerStatus::Stopped | ContainerStatus::Created);
            if !deletable && !force {
                bail!(
                    "delete container {id}: it is {}; stop it first or use --force",
                    status_name(status)
                );
            }
        }
        self.remove_leftovers(id)
            .with_context(|| format!("delete container {id}"))
    }

    pub fn pause(&self, id: &str) -> Result<()> {
        let mut c = self.load(id)?;
        if c.status() != ContainerStatus::Running {
            bail!("pause container {id}: it is {}, not running", status_name(c.status()));
        }
        c.pause()
            .map_err(|e| anyhow!("pause container {id}: {}", libcontainer_error(&e)))
    }

    pub fn resume(&self, id: &str) -> Result<()> {
        let mut c = self.load(id)?;
        if c.status() != ContainerStatus::Paused {
            bail!("resume container {id}: it is {}, not paused", status_name(c.status()));
        }
        c.resume()
            .map_err(|e| anyhow!("resume container {id}: {}", libcontainer_error(&e)))
    }

    /// runc's `state` JSON.
    pub fn state_json(&self, id: &str) -> Result<serde_json::Value> {
        let c = self.load(id)?;
        Ok(self.state_of(&c))
    }

    fn state_of(&self, c: &Container) -> serde_json::Value {
        let meta = self.read_meta(c.id()).unwrap_or_default();
        let status = c.status();
        let pid = match status {
            ContainerStatus::Stopped => 0,
            _ => c.pid().map(|p| p.as_raw()).unwrap_or(0),
        };
        let mut v = serde_json::json!({
            "ociVersion": libcontainer::oci_spec::runtime::VERSION,
            "id": c.id(),
            "pid": pid,
            "status": status_name(status),
            "bundle": meta.bundle,
            "rootfs": meta.rootfs,
            "created": c.created().map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)).unwrap_or_default(),
            "owner": c.creator().map(|o| o.to_string_lossy().into_owned()).unwrap_or_default(),
        });
        if let Some(a) = &c.state.annotations {
            v["annotations"] = serde_json::json!(a);
        }
        for (key, value) in crate::network::state_annotations(&meta, &self.meta_dir(c.id())) {
            v["annotations"][key] = serde_json::json!(value);
        }
        v
    }

    /// Every container under the root, as runc's state JSON.
    pub fn list(&self) -> Result<Vec<serde_json::Value>> {
        let entries = match fs::read_dir(&self.root) {
            Ok(e) => e,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("read state directory {}", self.root.display())),
        };
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || !entry.path().join("state.json").exists() {
                continue;
            }
            if let Ok(c) = self.load(&name) {
                out.push(self.state_of(&c));
            }
        }
        out.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
        Ok(out)
    }

    /// Pids of every process in the container's cgroup.
    pub fn pids(&self, id: &str) -> Result<Vec<i32>> {
        let c = self.load(id)?;
        let path = c
            .spec()
            .map_err(|e| anyhow!("read config of container {id}: {e}"))?
            .cgroup_path;
        let m = cgroup_manager(&path, id, c.systemd())?;
        let mut pids: Vec<i32> = m
            .get_all_pids()
            .map_err(|e| anyhow!("list processes of container {id}: {e}"))?
            .into_iter()
            .map(|p| p.as_raw())
            .collect();
        pids.sort_unstable();
        Ok(pids)
    }

    pub fn update(&self, id: &str, resources: &LinuxResources) -> Result<()> {
        let c = self.load(id)?;
        if c.status() == ContainerStatus::Stopped {
            bail!("update container {id}: it is not running");
        }
        let path = c
            .spec()
            .map_err(|e| anyhow!("read config of container {id}: {e}"))?
            .cgroup_path;
        let m = cgroup_manager(&path, id, c.systemd())?.with_rootless(!is_root() || in_user_ns());
        let effective = self.effective_spec(id).ok();
        // On cgroup v2 every apply rebuilds the device program, from the
        // rules create used (runc's update keeps them too).
        let mut resources = resources.clone();
        if cgroup_v2::is_unified() {
            let created = effective
                .as_ref()
                .and_then(|s| s.linux().as_ref()?.resources().as_ref()?.devices().clone());
            if resources.devices().as_ref().is_some_and(|d| !d.is_empty()) && *resources.devices() != created {
                bail!("update container {id}: linux.resources.devices cannot change after create");
            }
            resources.set_devices(created);
        }
        // The spec's disableOOMKiller stays as create set it (runc's update keeps it too).
        let disable_oom_killer = effective
            .as_ref()
            .and_then(|s| {
                s.linux()
                    .as_ref()?
                    .resources()
                    .as_ref()?
                    .memory()
                    .as_ref()?
                    .disable_oom_killer()
            })
            .unwrap_or(false);
        let opt = ControllerOpt {
            resources: &resources,
            freezer_state: None,
            oom_score_adj: None,
            disable_oom_killer,
        };
        m.apply(&opt)
            .map_err(|e| anyhow!("update cgroup of container {id}: {e}"))
    }

    /// Starts a process in a running container (libcontainer's tenant).
    pub fn exec(&self, req: ExecRequest<'_>) -> Result<nix::unistd::Pid> {
        let id = req.id;
        let pid_file = req.pid_file.map(pid_file::resolve).transpose()?;
        let c = self.load(id)?;
        match c.status() {
            ContainerStatus::Running => {}
            ContainerStatus::Paused if req.ignore_paused => {}
            s => bail!("exec in container {id}: it is {}, not running", status_name(s)),
        }
        if !is_root() && !c.systemd() && cgroup_v2::is_unified() {
            let path = c
                .spec()
                .map_err(|e| anyhow!("read config of container {id}: {e}"))?
                .cgroup_path;
            if let Err(why) = cgroup_v2::can_join(&path)? {
                bail!(
                    "exec in container {id}: the process could not join the container's cgroup: {why}; run it as `{}`",
                    cgroup_v2::HOW_TO_DELEGATE
                );
            }
        }
        let spec = self.effective_spec(id)?;
        if has_new_namespace(&spec, LinuxNamespaceType::User) {
            let pid = c
                .pid()
                .ok_or_else(|| anyhow!("exec in container {id}: it has no init pid"))?;
            join_user_namespace(pid.as_raw()).with_context(|| format!("exec in container {id}"))?;
        }
        let seccomp = spec.linux().as_ref().and_then(|l| l.seccomp().clone());
        let stacked = self.read_meta(id).unwrap_or_default().stacked_seccomp;
        for s in seccomp.iter().chain(&stacked) {
            seccomp_cache::prepare(s).with_context(|| format!("exec in container {id}"))?;
        }
        let executor = ShimExecutor {
            expect_seccomp: seccomp.is_some() || !stacked.is_empty(),
            tenant_seccomp: seccomp,
            stacked_seccomp: stacked,
            expect_no_new_privs: false,
            creator: None,
        };
        let mut builder = ContainerBuilder::new(id.to_owned(), SyscallType::default())
            .with_executor(executor)
            .with_root_path(&self.root)
            .map_err(|e| anyhow!("use state directory {}: {e}", self.root.display()))?
            .with_console_socket(req.console_socket)
            .with_preserved_fds(req.preserve_fds);
        if let Some([stdin, stdout, stderr]) = req.stdio {
            builder = builder.with_stdin(stdin).with_stdout(stdout).with_stderr(stderr);
        }
        let pid = builder
            .validate_id()
            .map_err(|e| anyhow!("use container id {id:?}: {e}"))?
            .as_tenant()
            .with_detach(req.terminal)
            .with_process(Some(req.process))
            .with_ignore_paused(req.ignore_paused)
            .build()
            .map_err(|e| anyhow!("exec in container {id}: {}", libcontainer_error(&e)))?;
        if let Some(path) = &pid_file {
            pid_file::write(path, pid.as_raw())?;
        }
        Ok(pid)
    }
}

pub struct ExecRequest<'a> {
    pub id: &'a str,
    /// process.json: the whole process to run.
    pub process: &'a Path,
    pub pid_file: Option<&'a Path>,
    pub console_socket: Option<&'a Path>,
    /// The process has a terminal (its console socket is ours or the caller's).
    pub terminal: bool,
    pub preserve_fds: i32,
    pub ignore_paused: bool,
    pub stdio: Option<[OwnedFd; 3]>,
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

/// Removes our state directory of a container with its lock file last, so
/// that a runtime killed half-way leaves either a lock (the container is
/// collected again) or an empty directory (which `gc` removes).
fn remove_meta_dir(dir: &Path) -> std::result::Result<(), String> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("read {}: {e}", dir.display())),
    };
    let gone = |r: std::io::Result<()>, p: &Path| match r {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(format!("remove {}: {e}", p.display())),
        _ => Ok(()),
    };
    for e in entries.flatten() {
        if e.file_name() == "lock" {
            continue;
        }
        let p = e.path();
        // remove_dir_all does not follow symlinks.
        let r = if e.file_type().is_ok_and(|t| t.is_dir()) {
            fs::remove_dir_all(&p)
        } else {
            fs::remove_file(&p)
        };
        gone(r, &p)?;
    }
    gone(fs::remove_file(dir.join("lock")), &dir.join("lock"))?;
    gone(fs::remove_dir(dir), dir)
}

/// libcontainer's state of a container, if readable; a reader can catch the
/// init vanishing between two reads of /proc, so it tries again.
fn load_settled(dir: &Path) -> Option<Container> {
    for _ in 0..5 {
        match Container::load(dir.to_path_buf()) {
            Ok(c) => return Some(c),
            Err(libcontainer::error::LibcontainerError::Procfs(_)) => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(_) => return None,
        }
    }
    None
}

/// What libcontainer's delete does once the processes are gone, without its
/// cgroup-wide kill: the poststop hooks. A failing hook is a warning, as the
/// OCI spec says.
fn run_poststop(id: &str, mut c: Container) {
    let Ok(config) = libcontainer::config::YoukiConfig::load(&c.root) else {
        return;
    };
    let Some(hooks) = config.hooks.as_ref() else { return };
    c.set_status(ContainerStatus::Stopped);
    if let Err(e) = libcontainer::hooks::run_hooks(hooks.poststop().as_ref(), Some(&c.state), None, None, None) {
        tracing::warn!("poststop hook of container {id}: {}", libcontainer_error(&e));
    }
}

/// Unprivileged on cgroup v1, libcontainer can only create cgroups under a
/// subtree root has delegated. Refuse up front, naming it, rather than fail
/// somewhere in the middle of create.
fn check_delegated(parent: &Path) -> Result<()> {
    let rel = parent.strip_prefix("/").unwrap_or(parent);
    for controller in ["memory", "pids", "cpu", "freezer", "devices"] {
        let dir = Path::new("/sys/fs/cgroup").join(controller);
        if !dir.is_dir() {
            continue;
        }
        let path = dir.join(rel);
        let writable = nix::unistd::access(&path, nix::unistd::AccessFlags::W_OK).is_ok();
        if !writable {
            bail!(
                "find a delegated cgroup for uid {}: {} is missing or not writable (as root: hack/delegate-cgroups {})",
                nix::unistd::geteuid(),
                path.display(),
                nix::unistd::geteuid()
            );
        }
    }
    Ok(())
}

/// libcontainer 0.7 joins an exec'd process to every namespace of the init but
/// its user namespace: unprivileged, joining the others then fails (EPERM);
/// as root, the process would run outside the container's user namespace with
/// host credentials. Joining it here first (this process is single-threaded,
/// and the intermediate libcontainer forks inherits it) closes both.
fn join_user_namespace(init_pid: i32) -> Result<()> {
    let path = format!("/proc/{init_pid}/ns/user");
    let ns = fs::File::open(&path).with_context(|| format!("open {path}"))?;
    let ours = fs::read_link("/proc/self/ns/user").ok();
    if ours.is_some() && ours == fs::read_link(&path).ok() {
        return Ok(());
    }
    nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWUSER)
        .with_context(|| format!("join user namespace {path}"))?;
    tracing::debug!(
        "joined user namespace {path}, effective capabilities {:x?}",
        caps_effective()
    );
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

/// runc's signal forms: a name with or without SIG, or a number.
pub fn parse_signal(s: &str) -> Result<NixSignal> {
    let upper = s.to_ascii_uppercase();
    let parsed = if let Ok(n) = upper.parse::<i32>() {
        NixSignal::try_from(n).ok()
    } else {
        let name = if upper.starts_with("SIG") {
            upper
        } else {
            format!("SIG{upper}")
        };
        name.parse::<NixSignal>().ok()
    };
    parsed.ok_or_else(|| anyhow!("parse signal {s:?}: it is not a signal name or number"))
}

/// Signals whose default action ends the process.
fn terminates(sig: NixSignal) -> bool {
    use NixSignal::*;
    !matches!(
        sig,
        SIGCHLD | SIGCONT | SIGSTOP | SIGTSTP | SIGTTIN | SIGTTOU | SIGURG | SIGWINCH
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_parse_like_runc() {
        assert_eq!(parse_signal("KILL").unwrap(), NixSignal::SIGKILL);
        assert_eq!(parse_signal("sigterm").unwrap(), NixSignal::SIGTERM);
        assert_eq!(parse_signal("9").unwrap(), NixSignal::SIGKILL);
        assert_eq!(parse_signal("SIGUSR1").unwrap(), NixSignal::SIGUSR1);
        assert!(parse_signal("NOPE").is_err());
        assert!(parse_signal("99").is_err());
    }
}
