//! The runtimes under comparison, as parameters: where each binary is, its
//! version, whether it is present, missing or failing on this machine, and
//! the command line that launches a workload with it. A runtime that is not
//! here is reported with the reason, never left out.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use crate::parse::{self, ToolVersion};
use crate::proc::{self, Hooks};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// The workload run directly: the floor.
    Host,
    /// bubblewrap with the flags of Claude Code's sandbox (seed 002).
    Bwrap,
    Runc,
    Crun,
    /// gVisor.
    Runsc,
    /// claude-shim on the shared bundle.
    ClaudeShim,
    /// `claude-shim sandbox -- CMD` with the shipped policy.
    Sandbox,
    /// Anthropic's sandbox runtime (`srt`, npm @anthropic-ai/sandbox-runtime):
    /// bwrap plus its network proxies, as Claude Code's own sandbox runs commands.
    Srt,
    /// OpenAI Codex CLI's sandbox (`codex sandbox -P :workspace`, npm @openai/codex):
    /// bwrap plus its own seccomp filter, the working directory writable.
    Codex,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", content = "reason", rename_all = "kebab-case")]
pub enum Availability {
    Present,
    /// Not on this machine (with how to get it).
    Missing(String),
    /// On this machine but unable to run the bundle here (with its error).
    Fails(String),
    /// Left out by --runtimes.
    NotSelected,
}

/// A tool's identity, for the results.
#[derive(Debug, Clone, Serialize)]
pub struct ToolInfo {
    pub name: String,
    pub path: Option<PathBuf>,
    pub version: Option<String>,
    /// The `key: value` lines of `--version` (commit, spec, libseccomp...).
    pub fields: std::collections::BTreeMap<String, String>,
    /// The first line of `--version`, verbatim.
    pub reported: Option<String>,
    /// The Debian package that owns the binary, and its version.
    pub package: Option<String>,
    pub package_version: Option<String>,
}

pub fn find(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(
            [
                "/usr/local/sbin",
                "/usr/local/bin",
                "/usr/sbin",
                "/usr/bin",
                "/sbin",
                "/bin",
            ]
            .map(PathBuf::from),
        )
        .map(|d| d.join(name))
        .find(|p| nix::unistd::access(p.as_path(), nix::unistd::AccessFlags::X_OK).is_ok() && p.is_file())
}

/// Version and package of a binary; `args` asks it for its version.
pub fn tool_info(name: &str, path: Option<&Path>, args: &[&str]) -> ToolInfo {
    let (out, reported) = match path.and_then(|p| proc::capture(p, args)) {
        Some((_, out)) => {
            let first = out.lines().find(|l| !l.trim().is_empty()).map(str::to_owned);
            (parse::version(&out), first)
        }
        None => (ToolVersion::default(), None),
    };
    let (package, package_version) = path.map(dpkg_owner).unwrap_or((None, None));
    ToolInfo {
        name: name.to_owned(),
        path: path.map(Path::to_path_buf),
        version: out.version,
        fields: out.fields,
        reported,
        package,
        package_version,
    }
}

fn dpkg_owner(path: &Path) -> (Option<String>, Option<String>) {
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut package = None;
    // Debian 12 is merged-/usr: dpkg may know the file under either spelling.
    for p in [
        real.clone(),
        Path::new("/").join(real.strip_prefix("/usr").unwrap_or(&real)),
    ] {
        if let Some((true, out)) = proc::capture(Path::new("dpkg-query"), &["-S", &p.to_string_lossy()]) {
            package = out
                .lines()
                .next()
                .and_then(|l| l.split_once(':'))
                .map(|(p, _)| p.trim().to_owned());
            break;
        }
    }
    let version = package.as_ref().and_then(|p| {
        let (ok, out) = proc::capture(Path::new("dpkg-query"), &["-W", "-f=${Version}", p])?;
        ok.then(|| out.trim().to_owned())
    });
    (package, version)
}

/// `codex sandbox` with Codex's built-in workspace-write profile (the working
/// directory, given by -C, writable; the rest read-only).
pub const CODEX_FLAGS: &[&str] = &["sandbox", "-P", ":workspace"];

/// One runtime as the harness drives it.
#[derive(Debug, Clone, Serialize)]
pub struct Runtime {
    pub kind: Kind,
    /// The row label: "runc", "crun (cgroup2 hidden)", "runsc (ptrace)"...
    pub name: String,
    pub path: Option<PathBuf>,
    pub availability: Availability,
    /// What was done to make it run here, if anything.
    pub note: Option<String>,
    /// Its state directory (`--root`), private to the harness.
    #[serde(skip)]
    pub root: PathBuf,
    /// crun: run it in a mount namespace without /sys/fs/cgroup/unified.
    #[serde(skip)]
    pub hide_cgroup2: bool,
    /// runsc: --platform.
    pub platform: Option<String>,
}

/// How a workload is started.
#[derive(Debug, Clone)]
pub enum Launch {
    /// argv run directly (the host), or under bwrap / `claude-shim sandbox`, in cwd.
    Argv {
        argv: Vec<String>,
        cwd: PathBuf,
        /// bwrap only: the compiled filter to hand to --seccomp.
        bpf: Option<PathBuf>,
    },
    /// An OCI bundle.
    Bundle {
        dir: PathBuf,
        /// runsc only: --network (none, sandbox or host).
        runsc_network: &'static str,
        /// runsc only: --oci-seccomp (apply the spec's filter inside the sandbox).
        oci_seccomp: bool,
    },
}

impl Runtime {
    pub fn present(&self) -> bool {
        self.availability == Availability::Present
    }

    fn bin(&self) -> Command {
        let mut c = Command::new(self.path.as_deref().unwrap_or(Path::new("/nonexistent")));
        if !matches!(self.kind, Kind::Bwrap | Kind::Host | Kind::Srt | Kind::Codex) {
            c.arg("--root").arg(&self.root);
        }
        c
    }

    /// srt's settings file (written by the harness in the runtime's state directory).
    pub fn srt_settings(&self) -> PathBuf {
        self.root.join("srt-settings.json")
    }

    fn runsc_flags(&self, c: &mut Command, network: &str, oci_seccomp: bool) {
        c.arg(format!("--network={network}"));
        if let Some(p) = &self.platform {
            c.arg(format!("--platform={p}"));
        }
        if oci_seccomp {
            c.arg("--oci-seccomp");
        }
    }

    pub fn hooks(&self) -> Hooks {
        Hooks {
            hide_cgroup2: self.hide_cgroup2,
            ..Hooks::default()
        }
    }

    /// The command that runs the workload to its end: `run` for OCI runtimes
    /// (create, start, wait, delete), the argv itself for the others.
    pub fn run_command(&self, launch: &Launch, id: &str, bwrap_flags: &[String]) -> Command {
        match (self.kind, launch) {
            (Kind::Host, Launch::Argv { argv, cwd, .. }) => {
                let mut c = Command::new(&argv[0]);
                c.args(&argv[1..]).current_dir(cwd);
                c
            }
            (Kind::Bwrap, Launch::Argv { argv, cwd, bpf }) => {
                let mut c = self.bin();
                c.args(bwrap_flags);
                if bpf.is_some() {
                    c.args(["--seccomp", "3"]);
                }
                c.arg("--chdir").arg(cwd).arg("--").args(argv);
                c
            }
            (Kind::Srt, Launch::Argv { argv, cwd, .. }) => {
                let mut c = self.bin();
                c.arg("-s").arg(self.srt_settings()).args(argv).current_dir(cwd);
                c
            }
            (Kind::Codex, Launch::Argv { argv, cwd, .. }) => {
                let mut c = self.bin();
                c.args(CODEX_FLAGS)
                    .arg("-C")
                    .arg(cwd)
                    .arg("--")
                    .args(argv)
                    .current_dir(cwd);
                c
            }
            (Kind::Sandbox, Launch::Argv { argv, cwd, .. }) => {
                let mut c = self.bin();
                c.arg("sandbox").arg("--").args(argv).current_dir(cwd);
                c
            }
            (
                _,
                Launch::Bundle {
                    dir,
                    runsc_network,
                    oci_seccomp,
                },
            ) => {
                let mut c = self.bin();
                if self.kind == Kind::Runsc {
                    self.runsc_flags(&mut c, runsc_network, *oci_seccomp);
                }
                c.arg("run").arg("--bundle").arg(dir).arg(id);
                c
            }
            (kind, launch) => unreachable_launch(kind, launch),
        }
    }

    /// `create --bundle B ID` (detached; the container waits for start).
    pub fn create_command(&self, launch: &Launch, id: &str) -> Command {
        let mut c = self.bin();
        if let Launch::Bundle {
            dir,
            runsc_network,
            oci_seccomp,
        } = launch
        {
            if self.kind == Kind::Runsc {
                self.runsc_flags(&mut c, runsc_network, *oci_seccomp);
            }
            c.arg("create").arg("--bundle").arg(dir).arg(id);
        }
        c
    }

    /// Another verb on container `id`; runsc needs the flags it was created
    /// with on every verb (its `start` would otherwise set up a network).
    pub fn verb(&self, launch: &Launch, verb: &[&str], id: &str) -> Command {
        let mut c = self.bin();
        if let (
            Kind::Runsc,
            Launch::Bundle {
                runsc_network,
                oci_seccomp,
                ..
            },
        ) = (self.kind, launch)
        {
            self.runsc_flags(&mut c, runsc_network, *oci_seccomp);
        }
        c.args(verb).arg(id);
        c
    }

    /// Removes container `id` whatever its state; errors are ignored (it may
    /// not exist). `netns`: the namespace the runtime ran in (runsc's
    /// control socket is an abstract one, visible only there).
    pub fn cleanup(&self, id: &str, netns: Option<&std::sync::Arc<std::os::fd::OwnedFd>>) {
        if matches!(
            self.kind,
            Kind::Host | Kind::Bwrap | Kind::Sandbox | Kind::Srt | Kind::Codex
        ) {
            return;
        }
        let mut c = self.bin();
        c.args(["delete", "--force", id]);
        let hide = self.hide_cgroup2;
        let ns = netns.map(|f| std::os::fd::AsRawFd::as_raw_fd(f.as_ref()));
        if hide || ns.is_some() {
            // SAFETY: as in proc::Runner::spawn, async-signal-safe calls only.
            unsafe {
                use std::os::unix::process::CommandExt;
                c.pre_exec(move || {
                    if let Some(fd) = ns {
                        libc::setns(fd, libc::CLONE_NEWNET);
                    }
                    if hide && libc::unshare(libc::CLONE_NEWNS) == 0 {
                        libc::mount(
                            std::ptr::null(),
                            c"/".as_ptr(),
                            std::ptr::null(),
                            libc::MS_REC | libc::MS_PRIVATE,
                            std::ptr::null(),
                        );
                        libc::umount2(c"/sys/fs/cgroup/unified".as_ptr(), libc::MNT_DETACH);
                    }
                    Ok(())
                });
            }
        }
        // Output through pipes (dropped): a runtime's stdio is never the host's /dev/null.
        if let Ok(stdin) = crate::proc::empty_stdin() {
            let _ = c.stdin(stdin).output();
        }
    }
}

fn unreachable_launch(kind: Kind, launch: &Launch) -> Command {
    // A planning bug: the command fails with a message naming it, never runs something else.
    let mut c = Command::new("/bin/false");
    c.env("CLAUDE_SHIM_BENCH_BUG", format!("{kind:?} cannot run {launch:?}"));
    c
}

/// bwrap's flags in Claude Code's sandbox (seed 002): the host read-only, the
/// working tree and a temp directory writable, every namespace unshared,
/// tied to its parent, a new session, and secrets hidden under empty tmpfs.
pub fn bwrap_flags(tree: &Path, home: &Path) -> Vec<String> {
    let mut f: Vec<String> = [
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
    ]
    .map(String::from)
    .to_vec();
    let t = tree.display().to_string();
    f.extend(["--bind".into(), t.clone(), t]);
    for secret in [".ssh", ".aws", ".gnupg"] {
        let p = home.join(secret);
        if p.is_dir() {
            f.extend(["--tmpfs".into(), p.display().to_string()]);
        }
    }
    f.extend(["--unshare-all", "--die-with-parent", "--new-session"].map(String::from));
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(kind: Kind) -> Runtime {
        Runtime {
            kind,
            name: format!("{kind:?}"),
            path: Some("/usr/bin/x".into()),
            availability: Availability::Present,
            note: None,
            root: "/state".into(),
            hide_cgroup2: false,
            platform: Some("ptrace".into()),
        }
    }

    fn args(c: &Command) -> Vec<String> {
        c.get_args().map(|a| a.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn oci_runtimes_run_the_bundle_under_their_own_root() {
        let b = Launch::Bundle {
            dir: "/b".into(),
            runsc_network: "none",
            oci_seccomp: false,
        };
        assert_eq!(
            args(&rt(Kind::Runc).run_command(&b, "id1", &[])),
            ["--root", "/state", "run", "--bundle", "/b", "id1"]
        );
        assert_eq!(
            args(&rt(Kind::Runsc).run_command(&b, "id1", &[])),
            [
                "--root",
                "/state",
                "--network=none",
                "--platform=ptrace",
                "run",
                "--bundle",
                "/b",
                "id1"
            ]
        );
    }

    #[test]
    fn bwrap_gets_the_seed_flags_then_the_command() {
        let l = Launch::Argv {
            argv: vec!["/bin/true".into()],
            cwd: "/w".into(),
            bpf: Some("/f.bpf".into()),
        };
        let flags = bwrap_flags(Path::new("/w"), Path::new("/nonexistent-home"));
        let a = args(&rt(Kind::Bwrap).run_command(&l, "x", &flags));
        assert_eq!(&a[..3], ["--ro-bind", "/", "/"]);
        assert!(a.windows(3).any(|w| w == ["--bind", "/w", "/w"]));
        assert!(a.contains(&"--unshare-all".to_owned()) && a.contains(&"--new-session".to_owned()));
        assert!(a.windows(2).any(|w| w == ["--seccomp", "3"]));
        assert_eq!(&a[a.len() - 4..], ["--chdir", "/w", "--", "/bin/true"]);
    }

    #[test]
    fn sandbox_runs_the_argv_after_a_double_dash() {
        let l = Launch::Argv {
            argv: vec!["true".into()],
            cwd: "/w".into(),
            bpf: None,
        };
        assert_eq!(
            args(&rt(Kind::Sandbox).run_command(&l, "x", &[])),
            ["--root", "/state", "sandbox", "--", "true"]
        );
    }
}
