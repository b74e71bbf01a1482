//! The code that runs last in a container process, just before `execve`: it
//! re-applies the container's seccomp profile to processes started by `exec`
//! (libcontainer 0.7 builds their spec without it), stacks the admin policy's
//! filter on every process (the kernel then applies the stricter of the two
//! answers to each call), and checks, from inside, that what was asked for is
//! in force. bubblewrap's lesson: check what you applied.

use std::os::fd::RawFd;

use libcontainer::oci_spec::runtime::{LinuxSeccomp, Spec};
use libcontainer::workload::{Executor, ExecutorError, ExecutorSetEnvsError, ExecutorValidationError};

#[derive(Clone)]
pub struct ShimExecutor {
    /// The container's profile, to load in an `exec`ed process.
    pub tenant_seccomp: Option<LinuxSeccomp>,
    /// Filters loaded after the spec's own, in every process (Meta.stacked_seccomp).
    pub stacked_seccomp: Vec<LinuxSeccomp>,
    /// A seccomp filter must be in force at exec.
    pub expect_seccomp: bool,
    /// no_new_privs must be set at exec.
    pub expect_no_new_privs: bool,
    /// The init's ends of the link to the runtime creating it (runtime/creator.rs).
    pub creator: Option<(RawFd, RawFd)>,
}

fn fail(msg: String) -> ExecutorError {
    ExecutorError::Other(msg)
}

impl ShimExecutor {
    fn load_filter(&self, seccomp: &LinuxSeccomp, what: &str) -> Result<(), ExecutorError> {
        if libcontainer::seccomp::is_notify(seccomp) {
            return Err(fail(format!(
                "load {what}: seccomp notify rules are not supported here"
            )));
        }
        // Capabilities are already dropped here, so the kernel admits a filter
        // only with no_new_privs. Setting it is the fail-closed choice: the
        // alternative is a process outside the container's profile.
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(fail(format!("set no_new_privs: {}", std::io::Error::last_os_error())));
        }
        libcontainer::seccomp::initialize_seccomp(seccomp)
            .map(|_| ())
            .map_err(|err| fail(format!("load {what}: {err}")))
    }

    fn check_applied(&self) -> Result<(), ExecutorError> {
        if self.expect_seccomp {
            // Without a filter PR_GET_SECCOMP returns 0; under a filter it
            // returns 2, or the filter's own errno if it denies prctl.
            // SAFETY: prctl with integer arguments only.
            let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
            if mode == 0 {
                return Err(fail("seccomp filter requested but not in force".into()));
            }
        }
        if self.expect_no_new_privs {
            // SAFETY: prctl with integer arguments only.
            let nnp = unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) };
            if nnp == 0 {
                return Err(fail("no_new_privs requested but not set".into()));
            }
        }
        Ok(())
    }
}

/// Replaces this process with the spec's program (looked up in PATH, which
/// `validate` checked), or says why the kernel refused: one line naming the
/// program and the errno (E2BIG: "argument list too long"), never the
/// argument list itself, which can be megabytes.
fn exec_args(spec: &Spec) -> String {
    use std::ffi::CString;
    let args = spec.process().as_ref().and_then(|p| p.args().as_ref());
    let Some(program) = args.and_then(|a| a.first()) else {
        return "exec the container's process: process.args is empty".into();
    };
    let mut argv = Vec::new();
    for (i, a) in args.into_iter().flatten().enumerate() {
        match CString::new(a.as_bytes()) {
            Ok(c) => argv.push(c),
            Err(_) => return format!("exec {program:?}: process.args[{i}] holds a NUL byte"),
        }
    }
    let err = exec_on_path(&argv);
    format!("exec {program}: {}", lower_first(err.desc()))
}

/// execve of `argv[0]`, looked up in PATH as runc does: a file the kernel
/// cannot run fails with its errno (ENOEXEC: "exec format error"), where
/// execvp(3) would hand it to /bin/sh as a script.
fn exec_on_path(argv: &[std::ffi::CString]) -> nix::errno::Errno {
    use nix::errno::Errno;
    use std::os::unix::ffi::OsStrExt;
    let name = argv[0].as_bytes();
    if name.contains(&b'/') {
        return nix::unistd::execv(&argv[0], argv).unwrap_err();
    }
    // This process's environment is already the container's.
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut err = Errno::ENOENT;
    for dir in path.as_bytes().split(|b| *b == b':') {
        let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
        let mut full = dir.to_vec();
        full.push(b'/');
        full.extend_from_slice(name);
        let Ok(full) = std::ffi::CString::new(full) else {
            continue;
        };
        match nix::unistd::execv(&full, argv).unwrap_err() {
            Errno::ENOENT | Errno::ENOTDIR => {}
            // As execvp: a match we may not run does not end the search.
            Errno::EACCES => err = Errno::EACCES,
            e => return e,
        }
    }
    err
}

/// "Argument list too long" as runc (Go) words errors: "argument list too long".
fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_lowercase().chain(c).collect())
        .unwrap_or_default()
}

/// The spec's RLIMIT_NOFILE, set here, last, as runc sets limits once its
/// init is ready to exec: the intermediate only raised it (vendor/libcontainer),
/// as the init's own work opens descriptors (issue 37: pathrs panicked under
/// 20). Lowering a limit needs no privilege.
fn set_nofile(spec: &Spec) -> Result<(), ExecutorError> {
    use libcontainer::oci_spec::runtime::PosixRlimitType;
    let Some(limit) = spec
        .process()
        .as_ref()
        .and_then(|p| p.rlimits().as_ref())
        .and_then(|r| r.iter().find(|l| l.typ() == PosixRlimitType::RlimitNofile))
    else {
        return Ok(());
    };
    nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, limit.soft(), limit.hard()).map_err(
        |e| {
            fail(format!(
                "set RLIMIT_NOFILE to {} (soft) and {} (hard): {}",
                limit.soft(),
                limit.hard(),
                lower_first(e.desc())
            ))
        },
    )
}

impl Executor for ShimExecutor {
    fn exec(&self, spec: &Spec) -> Result<(), ExecutorError> {
        crate::timing::mark("init: ready to exec");
        set_nofile(spec)?;
        if let Some(seccomp) = &self.tenant_seccomp {
            self.load_filter(seccomp, "the container's seccomp profile")?;
        }
        for seccomp in &self.stacked_seccomp {
            self.load_filter(seccomp, "the admin policy's seccomp profile")?;
        }
        self.check_applied()?;
        let err = exec_args(spec);
        if self.creator.is_some() {
            // The init fails here after `start` returned: no runtime waits to
            // print its error, so the process's own stderr says it, as runc's
            // init does. An `exec`'d process's error goes back to `exec`.
            let line = format!("claude-shim: error: failed to {err}\n");
            // SAFETY: write(2) of a buffer we own to fd 2.
            unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
        }
        Err(fail(err))
    }

    /// The last runtime code in the init before it waits for `start`.
    fn validate(&self, spec: &Spec) -> Result<(), ExecutorValidationError> {
        if let Some((read, write)) = self.creator {
            super::creator::arm(read, write)
                .map_err(|e| ExecutorValidationError::ArgValidationError(format!("watch the runtime: {e}")))?;
        }
        let default = libcontainer::workload::default::get_executor();
        let process = spec.process().as_ref();
        let has_path = process
            .and_then(|p| p.env().as_ref())
            .is_some_and(|env| env.iter().any(|e| e.starts_with("PATH=")));
        let program = process.and_then(|p| p.args().as_ref()).and_then(|a| a.first());
        match program {
            // libcontainer 0.7 insists on PATH even for a program named by its
            // path, which ctr's specs (no PATH in env) give; runc runs those.
            Some(program) if !has_path && program.contains('/') => {
                let mut checked = spec.clone();
                if let Some(p) = checked.process_mut() {
                    let mut env = p.env().clone().unwrap_or_default();
                    env.push("PATH=".into());
                    p.set_env(Some(env));
                }
                default.validate(&checked)
            }
            Some(program) if !has_path => Err(ExecutorValidationError::ArgValidationError(format!(
                "find executable {program:?}: process.env has no PATH to look it up in; give its absolute path or set PATH"
            ))),
            _ => default.validate(spec),
        }
    }

    fn setup_envs(&self, envs: libcontainer::workload::Envs) -> Result<(), ExecutorSetEnvsError> {
        libcontainer::workload::default::get_executor().setup_envs(envs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_exec_names_the_program_and_the_errno_only() {
        let mut spec = Spec::default();
        let mut process = spec.process().clone().unwrap_or_default();
        process.set_args(Some(vec!["/no/such/program".into(), "x".repeat(1000)]));
        spec.set_process(Some(process.clone()));
        assert_eq!(exec_args(&spec), "exec /no/such/program: no such file or directory");
        process.set_args(Some(vec!["/bin/true".into(), "a\0b".into()]));
        spec.set_process(Some(process));
        assert_eq!(exec_args(&spec), "exec \"/bin/true\": process.args[1] holds a NUL byte");
    }
}
