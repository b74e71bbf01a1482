//! `exec`: a new process in a running container, which libcontainer starts
//! as a tenant joining the init's namespaces and cgroup.

use std::fs;
use std::os::fd::OwnedFd;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use libcontainer::container::builder::ContainerBuilder;
use libcontainer::container::ContainerStatus;
use libcontainer::oci_spec::runtime::LinuxNamespaceType;
use libcontainer::syscall::syscall::SyscallType;

use super::base::{libcontainer_error, status_name, Runtime};
use super::executor::ShimExecutor;
use super::kernel::{caps_effective, has_new_namespace, is_host_root};
use super::{cgroup_v2, pid_file, seccomp_cache};

impl Runtime {
    /// Starts a process in a running or created container (libcontainer's
    /// tenant); runc allows both, and engines exec into a created one.
    pub fn exec(&self, req: ExecRequest<'_>) -> Result<nix::unistd::Pid> {
        let id = req.id;
        let pid_file = req.pid_file.map(pid_file::resolve).transpose()?;
        let c = self.load(id)?;
        match c.status() {
            ContainerStatus::Running | ContainerStatus::Created => {}
            ContainerStatus::Paused if req.ignore_paused => {}
            // runc's words (its bats suite matches them).
            ContainerStatus::Paused => {
                bail!("exec in container {id}: cannot exec in a paused container (use --ignore-paused to override)")
            }
            s => bail!(
                "exec in container {id}: it is {}, not created or running",
                status_name(s)
            ),
        }
        if !is_host_root() && !c.systemd() && cgroup_v2::is_unified() {
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
        let sub_cgroup = match req.cgroup {
            Some(sub) => {
                let base = c
                    .spec()
                    .map_err(|e| anyhow!("read config of container {id}: {e}"))?
                    .cgroup_path;
                Some(sub_cgroup(&base, sub).with_context(|| format!("exec in container {id} with --cgroup {sub:?}"))?)
            }
            None => None,
        };
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
        let expect_seccomp = seccomp.is_some() || !stacked.is_empty();
        // A notify profile is libcontainer's to load (its listener descriptor
        // goes to the seccomp agent, vendor/libcontainer tenant_builder.rs).
        let seccomp = seccomp.filter(|s| !libcontainer::seccomp::is_notify(s));
        let executor = ShimExecutor {
            expect_seccomp,
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
            .with_sub_cgroup(sub_cgroup)
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
    /// runc's `exec --cgroup`: an existing cgroup below the container's.
    pub cgroup: Option<&'a str>,
    pub stdio: Option<[OwnedFd; 3]>,
}

/// Checks runc's `exec --cgroup PATH` against the container's cgroup `base`
/// and returns the path to hand libcontainer. runc refuses a sub-cgroup that
/// does not exist; libcontainer would make it (or, with `..`, refuse only
/// late). The `CONTROLLER:PATH` form is refused: libcontainer moves the
/// process in every hierarchy at once.
fn sub_cgroup(base: &Path, sub: &str) -> Result<String> {
    use std::path::Component;
    if sub.contains(':') {
        bail!("claude-shim takes one path for every controller, not the CONTROLLER:PATH form");
    }
    let rel = Path::new(sub.trim_start_matches('/'));
    if rel
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        // runc's words: "SUB is not a sub cgroup path".
        bail!("{sub} is not a sub cgroup path: the path must stay below the container's cgroup");
    }
    for dir in super::cgroup::dirs(base)? {
        let want = dir.join(rel);
        if !want.is_dir() {
            bail!("{} does not exist (runc joins only an existing cgroup)", want.display());
        }
    }
    Ok(rel.to_string_lossy().into_owned())
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
