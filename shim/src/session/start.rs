//! The session sandbox of `claude --per-command`: compiled and created once,
//! when the session starts, from the same policy, project root and
//! protections a per-call sandbox has, with the spawner as its init; ended
//! and removed with everything made for it when the session ends. The
//! session socket lives in the runtime's state root (`<id>.session/`, mode
//! 0700), which no sandbox sees; the container gets only its listening
//! descriptor.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};

use claude_shim_bundle::policy::values::HomeMode;

use crate::claude::shell_tmp::CallTmp;
use crate::hostfs::Dir;
use crate::runtime::{CreateRequest, Runtime};
use crate::sandbox;
use crate::sandbox::lease::Lease;

use super::SPAWNER_PATH;

/// What the session is made from: as a per-call sandbox of the same
/// `claude --per-command` would be.
pub struct Plan<'a> {
    pub policy: Option<&'a str>,
    pub project: &'a Path,
    /// Claude Code's temp directory (CLAUDE_CODE_TMPDIR), which the sandbox never sees.
    pub shared: &'a Path,
}

pub struct Session {
    id: String,
    ours: PathBuf,
    bundle: PathBuf,
    lease: Option<Lease>,
    tmp: Option<CallTmp>,
    /// The read end of the pipe whose write end is the spawner's stdout:
    /// closed, it ends the spawner; hung up, the spawner is gone.
    life: OwnedFd,
    socket: PathBuf,
    /// Set before the session ends its sandbox itself: not an end to report.
    stopping: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// `sandbox-<pid>-<hex>`, the garbage collector's pattern (sandbox::gc).
fn session_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("sandbox-{}-{nanos:08x}", std::process::id())
}

/// The spawner: the runtime's binary on disk, bound read-only into the
/// sandbox's /dev (a tmpfs of its own), as the ssh proxy command is.
fn bind_spawner(spec: &mut oci_spec::runtime::Spec) -> Result<()> {
    let exe = crate::seal::exe_on_disk()?;
    let mut mounts = spec.mounts().clone().unwrap_or_default();
    if !mounts.iter().any(|m| m.destination() == Path::new("/dev")) {
        anyhow::bail!("bind the spawner into the session sandbox: it has no /dev of its own");
    }
    mounts.push(
        oci_spec::runtime::MountBuilder::default()
            .destination(PathBuf::from(SPAWNER_PATH))
            .typ("bind")
            .source(exe)
            .options(vec!["bind".into(), "ro".into(), "nosuid".into(), "nodev".into()])
            .build()
            .map_err(|e| anyhow!("bind the spawner into the session sandbox: {e}"))?,
    );
    spec.set_mounts(Some(mounts));
    Ok(())
}

/// The spawner tells the host's calls from the sandbox's by the peer's pid,
/// which a process outside the sandbox's own PID namespace does not have
/// there (spawner.rs); and a `--root` outside /run may lie in a tree the
/// sandbox sees, so the state directory holding the socket is masked.
fn hide_state(spec: &mut oci_spec::runtime::Spec, ours: &Path, project: &Path) -> Result<()> {
    use oci_spec::runtime::LinuxNamespaceType;
    let linux = spec
        .linux_mut()
        .as_mut()
        .context("start the session sandbox: its spec has no linux section")?;
    let own_pid_ns = linux.namespaces().as_ref().is_some_and(|ns| {
        ns.iter()
            .any(|n| n.typ() == LinuxNamespaceType::Pid && n.path().is_none())
    });
    if !own_pid_ns {
        anyhow::bail!("start the session sandbox: its policy gives it no PID namespace of its own");
    }
    if project.starts_with(ours) {
        anyhow::bail!(
            "start the session sandbox: the project {} lies in the state directory {}",
            project.display(),
            ours.display()
        );
    }
    let mut masked = linux.masked_paths().clone().unwrap_or_default();
    masked.push(ours.display().to_string());
    linux.set_masked_paths(Some(masked));
    Ok(())
}

impl Session {
    /// Creates and starts the session sandbox. Call from a single-threaded
    /// point of the program (the runtime forks).
    pub fn start(rt: &Runtime, plan: &Plan<'_>) -> Result<Session> {
        let id = session_id();
        let ours = rt.root.join(".claude-shim");
        std::fs::create_dir_all(&ours).with_context(|| format!("create state directory {}", ours.display()))?;
        let (life, life_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).context("create the session's pipe")?;
        let mut s = Session {
            bundle: ours.join(format!("{id}.bundle")),
            socket: ours.join(format!("{id}.session")).join("sock"),
            ours,
            lease: None,
            tmp: None,
            life,
            id,
            stopping: Default::default(),
        };
        match s.create(rt, plan, life_w) {
            Ok(()) => Ok(s),
            Err(e) => {
                s.stop(rt);
                Err(e).context("start the session sandbox")
            }
        }
    }

    fn create(&mut self, rt: &Runtime, plan: &Plan<'_>, life_w: OwnedFd) -> Result<()> {
        let mut policy = sandbox::load_policy(plan.policy)?;
        let argv = [SPAWNER_PATH.to_owned(), super::SPAWNER_VERB.to_owned()];
        let inv = sandbox::invocation(Some(plan.project), None, &argv, false)?;
        // One directory bound at Claude Code's temp directory for the
        // session, written as whoever the sandbox runs as (see client.rs).
        let tmp = CallTmp::session(&rt.root, plan.shared, &format!("{}.tmp", self.id), "", true)?;
        let tmp = self.tmp.insert(tmp);
        sandbox::hand_over::hand_over(&tmp.own()?, sandbox::run_as(&inv))?;
        let shared = tmp
            .shared()
            .to_str()
            .context("the temp directory's path is not UTF-8")?;
        policy.filesystem.writable.push(
            claude_shim_bundle::policy::values::BindPath::try_from(shared.to_owned())
                .map_err(|e| anyhow!("bind the temp directory: {e}"))?,
        );
        if let Some(home) = std::env::var_os("HOME").map(PathBuf::from) {
            let snapshots = crate::claude::home::snapshots_dir(&crate::claude::host_config_dir(&home));
            // Claude Code makes it before its first Bash call, after the
            // session sandbox is made; each call sources a snapshot from it
            // (its shell's functions and options), so it is made now, as
            // Claude Code would (its mode from the umask: a sandbox that
            // runs as the project's owner reads it), for the bind to exist.
            if policy.filesystem.home == HomeMode::Empty && !snapshots.exists() {
                if let Err(e) = std::fs::DirBuilder::new().recursive(true).create(&snapshots) {
                    tracing::warn!("create {}: {e}", snapshots.display());
                }
            }
            crate::claude::home::keep_visible(&mut policy, &home, &[snapshots], true)?;
        }
        let lease = self.lease.insert(Lease::acquire(&self.ours, &inv.workdir)?);
        let mut compiled = sandbox::compile_policy(&policy, &inv, Some(&self.ours))?;
        tmp.bind(&mut compiled.spec)?;
        bind_spawner(&mut compiled.spec)?;
        hide_state(&mut compiled.spec, &self.ours, plan.project)?;
        sandbox::share_skeleton(&mut compiled, &self.ours)?;
        lease.create(&compiled.placeholders)?;
        lease.share()?;
        sandbox::write(&self.bundle, &compiled, false, true)?;
        let sock_dir = Dir::open(&self.ours)?;
        let name = format!("{}.session", self.id);
        sock_dir.create_dir(Path::new(&name), 0o700)?;
        // Bound through a handle on its directory, as the client connects:
        // the state root's path may be longer than a socket address holds
        // (108 bytes), and the handle pins the directory just made.
        let dir = sock_dir.sub(Path::new(&name))?.open_fd()?;
        let listener = UnixListener::bind(format!("/proc/self/fd/{}/sock", dir.as_raw_fd()))
            .with_context(|| format!("listen on {}", self.socket.display()))?;
        drop(dir);
        let null = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .context("open /dev/null")?;
        let req = CreateRequest {
            id: &self.id,
            bundle: &self.bundle,
            pid_file: None,
            console_socket: None,
            preserve_fds: 0,
            no_pivot: false,
            stdio: Some([OwnedFd::from(listener), life_w, OwnedFd::from(null)]),
        };
        rt.create(req, &crate::admin::apply)?;
        rt.start(&self.id)?;
        Ok(())
    }

    /// The path `claude-shim-shell` connects to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Until the spawner ends: then, unless the session is stopping,
    /// `on_end` runs (it stops the session's agent).
    pub fn watch(&self, on_end: impl FnOnce() + Send + 'static) -> Result<()> {
        let life = self
            .life
            .as_fd()
            .try_clone_to_owned()
            .context("watch the session sandbox")?;
        let stopping = self.stopping.clone();
        std::thread::Builder::new()
            .name("session".into())
            .spawn(move || {
                let mut fds = [nix::poll::PollFd::new(life.as_fd(), nix::poll::PollFlags::empty())];
                while let Err(nix::errno::Errno::EINTR) = nix::poll::poll(&mut fds, nix::poll::PollTimeout::NONE) {}
                if !stopping.load(std::sync::atomic::Ordering::SeqCst) {
                    on_end();
                }
            })
            .context("watch the session sandbox")?;
        Ok(())
    }

    /// Ends the sandbox and removes everything made for it.
    pub fn stop(mut self, rt: &Runtime) {
        self.stopping.store(true, std::sync::atomic::Ordering::SeqCst);
        tracing::debug!(id = %self.id, fd = self.life.as_raw_fd(), "stopping the session sandbox");
        if rt.exists(&self.id) {
            sandbox::denials::report(&rt.meta_dir(&self.id), &self.id);
            if let Err(e) = rt.delete(&self.id, true) {
                tracing::warn!("{e:#}");
            }
        }
        if let Some(l) = self.lease.take() {
            l.release();
        }
        if let Some(t) = self.tmp.take() {
            t.finish();
        }
        for dir in [&self.bundle, &self.ours.join(format!("{}.session", self.id))] {
            if let Err(e) = std::fs::remove_dir_all(dir) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!("remove {}: {e}", dir.display());
                }
            }
        }
    }
}
