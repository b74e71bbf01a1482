//! A process a test starts in the background (a sandbox it talks to while
//! it runs), ended by its pid when the guard drops: a test that fails or
//! panics half-way leaves no sandbox running behind it. claude-shim gets
//! SIGTERM first (it forwards it to the container and cleans up), SIGKILL
//! after a grace period; then the containers it made under the test's own
//! state root (ids `sandbox-<its pid>-…`) get `claude-shim delete --force`,
//! as a SIGKILLed claude-shim cannot delete them itself.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// How long a process has to end after SIGTERM before it gets SIGKILL.
const GRACE: Duration = Duration::from_secs(10);

pub struct Background {
    child: Child,
    /// The claude-shim binary and the state root its containers are under
    /// (the test's own), when it makes any.
    cleanup: Option<(PathBuf, PathBuf)>,
}

impl Background {
    pub fn new(child: Child) -> Self {
        Self { child, cleanup: None }
    }

    /// A claude-shim that makes containers under the test's own state root
    /// `root`: those named after its pid are deleted when the guard drops.
    pub fn shim(child: Child, shim: &Path, root: &Path) -> Self {
        Self {
            child,
            cleanup: Some((shim.to_owned(), root.to_owned())),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().unwrap()
    }

    /// Waits for it to end, at most `within`; ends it (and fails) after that.
    pub fn wait(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.try_wait() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "process {} did not end within {within:?}",
                self.pid()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The child, to take its pipes.
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Background {
    /// Ends the child by its pid: SIGTERM, SIGKILL after the grace period.
    fn end(&mut self) {
        if self.child.try_wait().ok().flatten().is_some() {
            return;
        }
        // Our own child, not yet reaped: the pid is still its own.
        let pid = Pid::from_raw(self.child.id() as i32);
        let _ = kill(pid, Signal::SIGTERM);
        let deadline = Instant::now() + GRACE;
        while Instant::now() < deadline {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = kill(pid, Signal::SIGKILL);
        let _ = self.child.wait();
    }

    /// Its containers left under the test's root: `delete --force` of each
    /// id claude-shim generated from its own pid (`sandbox-<pid>-<hex>`).
    fn delete_containers(&self) {
        let Some((shim, root)) = &self.cleanup else { return };
        let prefix = format!("sandbox-{}-", self.child.id());
        let Ok(entries) = std::fs::read_dir(root) else { return };
        for id in entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()) {
            if !id.starts_with(&prefix) || id.contains('.') {
                continue;
            }
            let _ = Command::new(shim)
                .arg("--root")
                .arg(root)
                .args(["delete", "--force", &id])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.end();
        self.delete_containers();
    }
}
