//! Running the tools: each command in its own process group, stdout and stderr
//! into files (a detached container keeps a pipe open for as long as it runs),
//! a persistent watchdog that kills a command's group at its deadline (so no
//! thread is started inside a timed phase), and the hooks some runtimes need
//! in the child before exec (a network namespace to enter, crun's mount
//! namespace). Also the /proc readers the memory metric uses.

use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::parse;

/// Process groups and their deadlines.
type Armed = Mutex<Vec<(i32, Instant)>>;

/// Kills the process group of armed children when their deadline passes.
#[derive(Clone)]
pub struct Watchdog {
    inner: Arc<(Armed, Condvar)>,
}

impl Watchdog {
    pub fn start() -> Self {
        let inner: Arc<(Armed, Condvar)> = Arc::new((Mutex::new(Vec::new()), Condvar::new()));
        let w = inner.clone();
        std::thread::spawn(move || {
            let (lock, cv) = &*w;
            let mut armed = lock.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                let now = Instant::now();
                armed.retain(|(pgid, deadline)| {
                    if *deadline <= now {
                        // The child leads its own group (process_group(0)).
                        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(*pgid), nix::sys::signal::SIGKILL);
                        false
                    } else {
                        true
                    }
                });
                let next = armed.iter().map(|(_, d)| *d).min();
                armed = match next {
                    Some(d) => {
                        cv.wait_timeout(armed, d.saturating_duration_since(now))
                            .unwrap_or_else(|e| e.into_inner())
                            .0
                    }
                    None => cv.wait(armed).unwrap_or_else(|e| e.into_inner()),
                };
            }
        });
        Self { inner }
    }

    fn arm(&self, pgid: i32, timeout: Duration) {
        let (lock, cv) = &*self.inner;
        lock.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((pgid, Instant::now() + timeout));
        cv.notify_one();
    }

    fn disarm(&self, pgid: i32) {
        let (lock, _) = &*self.inner;
        lock.lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(p, _)| *p != pgid);
    }
}

/// Where commands' output goes; one pair of files per command.
pub struct Scratch {
    dir: PathBuf,
    n: AtomicU64,
}

impl Scratch {
    pub fn new(dir: &Path) -> Result<Self> {
        fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            n: AtomicU64::new(0),
        })
    }

    fn pair(&self) -> Result<(PathBuf, PathBuf, fs::File, fs::File)> {
        let n = self.n.fetch_add(1, Ordering::SeqCst);
        let out = self.dir.join(format!("{n}.out"));
        let err = self.dir.join(format!("{n}.err"));
        let fo = fs::File::create(&out).with_context(|| format!("create {}", out.display()))?;
        let fe = fs::File::create(&err).with_context(|| format!("create {}", err.display()))?;
        Ok((out, err, fo, fe))
    }
}

/// What a finished command left.
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// From just before spawn to just after wait returned.
    pub elapsed: Duration,
    /// User + system time of the command and the processes it waited for
    /// (RUSAGE_CHILDREN across the wait; the harness runs one sample at a time).
    pub cpu: Duration,
}

/// User + system time of every child reaped so far (and their reaped children).
pub fn children_cpu() -> Duration {
    nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN).map_or(Duration::ZERO, |u| {
        let d = |t: nix::sys::time::TimeVal| Duration::new(t.tv_sec() as u64, t.tv_usec() as u32 * 1000);
        d(u.user_time()) + d(u.system_time())
    })
}

impl Finished {
    /// The command's own words for a failure: the last lines of stderr, else stdout.
    pub fn why(&self) -> String {
        let text = if self.stderr.trim().is_empty() {
            &self.stdout
        } else {
            &self.stderr
        };
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let tail = lines[lines.len().saturating_sub(2)..].join(" / ");
        let mut why = format!("exited with {}", describe(self.status));
        if !tail.is_empty() {
            why.push_str(": ");
            why.push_str(&tail);
        }
        why.chars().take(400).collect()
    }
}

fn describe(s: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("status {c}"),
        (None, Some(9)) => "signal 9 (killed at its deadline)".to_owned(),
        (None, Some(sig)) => format!("signal {sig}"),
        _ => "an unknown status".to_owned(),
    }
}

/// A command that has been started.
pub struct Running {
    child: Child,
    out: PathBuf,
    err: PathBuf,
    t0: Instant,
    cpu0: Duration,
    dog: Watchdog,
    pub what: String,
}

impl Running {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Whether the command has exited (then `wait` returns at once).
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    pub fn wait(mut self) -> Result<Finished> {
        let status = self.child.wait().with_context(|| format!("wait for {}", self.what))?;
        let elapsed = self.t0.elapsed();
        let cpu = children_cpu().saturating_sub(self.cpu0);
        self.dog.disarm(self.child.id() as i32);
        let stdout = fs::read_to_string(&self.out).unwrap_or_default();
        let stderr = fs::read_to_string(&self.err).unwrap_or_default();
        let _ = fs::remove_file(&self.out);
        let _ = fs::remove_file(&self.err);
        Ok(Finished {
            status,
            stdout,
            stderr,
            elapsed,
            cpu,
        })
    }

    /// Ends the command's whole group now and reaps it.
    pub fn kill(mut self) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(self.pid()), nix::sys::signal::SIGKILL);
        let _ = self.child.wait();
        self.dog.disarm(self.pid());
        let _ = fs::remove_file(&self.out);
        let _ = fs::remove_file(&self.err);
    }
}

/// What the child does between fork and exec.
#[derive(Default)]
pub struct Hooks {
    /// Enter this network namespace (an open nsfs file).
    pub netns: Option<Arc<OwnedFd>>,
    /// A private mount namespace without /sys/fs/cgroup/unified: crun 1.8.1
    /// refuses a hybrid layout whose cgroup2 holds controllers.
    pub hide_cgroup2: bool,
    /// Make this descriptor the child's fd 3 (bwrap --seccomp 3).
    pub fd3: Option<Arc<OwnedFd>>,
}

pub struct Runner {
    pub dog: Watchdog,
    pub scratch: Scratch,
}

impl Runner {
    /// Starts `cmd` with an empty stdin, output to files, in its own process group,
    /// killed after `timeout`. The clock starts just before the fork.
    pub fn spawn(&self, mut cmd: Command, hooks: &Hooks, timeout: Duration) -> Result<Running> {
        let what = format!("{:?}", cmd.get_program()).trim_matches('"').to_owned();
        let (out, err, fo, fe) = self.scratch.pair()?;
        cmd.stdin(empty_stdin()?).stdout(fo).stderr(fe).process_group(0);
        let netns = hooks.netns.as_ref().map(|f| f.as_raw_fd());
        let fd3 = hooks.fd3.as_ref().map(|f| f.as_raw_fd());
        let hide = hooks.hide_cgroup2;
        if netns.is_some() || fd3.is_some() || hide {
            // SAFETY: only async-signal-safe calls on values prepared before the fork.
            unsafe {
                cmd.pre_exec(move || {
                    if let Some(fd) = netns {
                        if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    if let Some(fd) = fd3 {
                        // dup2 onto itself keeps FD_CLOEXEC, so clear it then.
                        let r = if fd == 3 {
                            libc::fcntl(3, libc::F_SETFD, 0)
                        } else {
                            libc::dup2(fd, 3)
                        };
                        if r < 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    if hide {
                        if libc::unshare(libc::CLONE_NEWNS) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        let root = c"/";
                        if libc::mount(
                            std::ptr::null(),
                            root.as_ptr(),
                            std::ptr::null(),
                            libc::MS_REC | libc::MS_PRIVATE,
                            std::ptr::null(),
                        ) != 0
                        {
                            return Err(std::io::Error::last_os_error());
                        }
                        // Absent on a pure v1 machine: nothing to hide then.
                        let _ = libc::umount2(c"/sys/fs/cgroup/unified".as_ptr(), libc::MNT_DETACH);
                    }
                    Ok(())
                });
            }
        }
        let cpu0 = children_cpu();
        let t0 = Instant::now();
        let child = cmd.spawn().with_context(|| format!("start {what}"))?;
        self.dog.arm(child.id() as i32, timeout);
        Ok(Running {
            child,
            out,
            err,
            t0,
            cpu0,
            dog: self.dog.clone(),
            what,
        })
    }

    pub fn run(&self, cmd: Command, hooks: &Hooks, timeout: Duration) -> Result<Finished> {
        self.spawn(cmd, hooks, timeout)?.wait()
    }
}

/// A command as a shell would show it (for error messages and the JSON).
pub fn command_line(cmd: &Command) -> String {
    let mut parts = vec![cmd.get_program().to_string_lossy().into_owned()];
    parts.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    parts.join(" ")
}

/// A child's stdin: an empty pipe of the bench's own, whose reads end at
/// once as from /dev/null. Never the host's /dev/null: Debian's runsc
/// (0.0~20221219) chowns the stdin, stdout and stderr its `create` and `run`
/// are given to nobody:nogroup, and the host's /dev/null stayed so.
pub fn empty_stdin() -> Result<Stdio> {
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).context("make a pipe for a child's stdin")?;
    drop(write);
    Ok(Stdio::from(read))
}

/// The output of a quick command, for versions and detection: None if it cannot run.
pub fn capture(prog: &Path, args: &[&str]) -> Option<(bool, String)> {
    let out = Command::new(prog).args(args).stdin(empty_stdin().ok()?).output().ok()?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Some((out.status.success(), text))
}

/// Every live pid.
pub fn pids() -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

pub fn cmdline(pid: i32) -> String {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " ").trim_end().to_owned())
        .unwrap_or_default()
}

pub fn comm(pid: i32) -> String {
    fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

pub fn ppid(pid: i32) -> Option<i32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

pub fn pid_ns(pid: i32) -> Option<PathBuf> {
    fs::read_link(format!("/proc/{pid}/ns/pid")).ok()
}

pub fn smaps(pid: i32) -> Option<parse::Memory> {
    parse::smaps_rollup(&fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?)
}

/// `pid` and every live descendant.
pub fn tree(pid: i32) -> Vec<i32> {
    let all: Vec<(i32, i32)> = pids().into_iter().filter_map(|p| Some((p, ppid(p)?))).collect();
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        out.extend(all.iter().filter(|(_, pp)| *pp == parent).map(|(p, _)| *p));
        i += 1;
    }
    out
}

/// The state letter of stat(5)'s third field: R, S, D, Z...
pub fn state(pid: i32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

/// Waits until `pid` is gone or a zombie (a daemon we signalled is reaped by
/// init, which may take its time), at most `within`.
pub fn wait_gone(pid: i32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while state(pid).is_some_and(|s| s != 'Z') {
        // A zombie of ours would never go: reap it if it is our child.
        let _ = nix::sys::wait::waitpid(
            nix::unistd::Pid::from_raw(pid),
            Some(nix::sys::wait::WaitPidFlag::WNOHANG),
        );
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    true
}
