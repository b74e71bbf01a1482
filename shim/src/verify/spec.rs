//! The sandbox's spec made to run the probe: the binary bind-mounted where
//! the sandbox can run it, and the probe's command line as the process.

use std::path::{Path, PathBuf};

use oci_spec::runtime::{MountBuilder, Spec};

use super::error::VerifyError;
use super::expect::Expectations;

/// Where the probe binary appears inside the sandbox. /dev is the runtime's own
/// tmpfs in every OCI spec, so the mount point is created there, never in the
/// rootfs (which may be the host's / or shared between containers).
pub const PROBE_PATH: &str = "/dev/.claude-shim-probe";

/// The hidden verb of the probe.
pub const PROBE_VERB: &str = "__probe";

/// The probe's command line inside the sandbox.
pub fn probe_args(exp: &Expectations) -> Vec<String> {
    probe_args_at(PROBE_PATH, exp)
}

/// The probe's command line with the binary at `path` (a launcher that shows
/// the host's files, such as bwrap, runs it where it lies).
pub fn probe_args_at(path: &str, exp: &Expectations) -> Vec<String> {
    vec![
        path.to_owned(),
        PROBE_VERB.to_owned(),
        "--expect-json".to_owned(),
        exp.to_json(),
    ]
}

/// Makes `spec` run the probe instead of its process: the binary on disk
/// (`seal::exe_on_disk`, not /proc/self/exe, which is a sealed memfd)
/// is bind-mounted read-only, nosuid, after every other mount (so after /dev),
/// and becomes process.args. Everything else of the spec (capabilities,
/// seccomp, mounts, namespaces, env) stays as the sandbox has it: that is what
/// the probe checks.
pub fn prepare_spec(spec: &mut Spec, exe_on_disk: &Path, exp: &Expectations) -> Result<(), VerifyError> {
    exp.validate().map_err(|e| VerifyError::Spec(e.to_string()))?;
    if !exe_on_disk.is_absolute() {
        return Err(VerifyError::Spec(format!(
            "the probe binary {} is not an absolute path",
            exe_on_disk.display()
        )));
    }
    let mount = MountBuilder::default()
        .destination(PathBuf::from(PROBE_PATH))
        .typ("bind")
        .source(exe_on_disk.to_path_buf())
        .options(vec!["bind".into(), "ro".into(), "nosuid".into(), "nodev".into()])
        .build()
        .map_err(|e| VerifyError::Spec(e.to_string()))?;
    let mut mounts = spec.mounts().clone().unwrap_or_default();
    if !mounts.iter().any(|m| m.destination() == Path::new("/dev")) {
        return Err(VerifyError::Spec(
            "the spec mounts nothing at /dev, where the probe's mount point goes".into(),
        ));
    }
    mounts.retain(|m| m.destination() != Path::new(PROBE_PATH));
    mounts.push(mount);
    spec.set_mounts(Some(mounts));
    let process = spec
        .process_mut()
        .as_mut()
        .ok_or_else(|| VerifyError::Spec("the spec has no process".into()))?;
    process.set_args(Some(probe_args(exp)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::expect;

    #[test]
    fn prepared_spec_runs_the_probe_from_a_read_only_bind() {
        let mut spec = Spec::default();
        let exp = expect::sample();
        prepare_spec(&mut spec, Path::new("/usr/bin/claude-shim"), &exp).unwrap();
        let args = spec.process().as_ref().unwrap().args().clone().unwrap();
        assert_eq!(args[..3], [PROBE_PATH, PROBE_VERB, "--expect-json"]);
        assert_eq!(Expectations::from_json(&args[3]).unwrap(), exp);
        let mounts = spec.mounts().as_ref().unwrap();
        let last = mounts.last().unwrap();
        assert_eq!(last.destination(), Path::new(PROBE_PATH));
        assert_eq!(last.source().as_deref(), Some(Path::new("/usr/bin/claude-shim")));
        let opts = last.options().as_ref().unwrap();
        assert!(opts.contains(&"ro".to_owned()) && opts.contains(&"nosuid".to_owned()));
        let dev = mounts
            .iter()
            .position(|m| m.destination() == Path::new("/dev"))
            .unwrap();
        assert!(dev < mounts.len() - 1);
        // Twice is the same as once.
        prepare_spec(&mut spec, Path::new("/usr/bin/claude-shim"), &exp).unwrap();
        assert_eq!(spec.mounts().as_ref().unwrap().len(), mounts_len(&Spec::default()) + 1);
    }

    fn mounts_len(s: &Spec) -> usize {
        s.mounts().as_ref().map(Vec::len).unwrap_or(0)
    }

    #[test]
    fn relative_binary_and_bad_expectations_are_refused() {
        let mut spec = Spec::default();
        assert!(prepare_spec(&mut spec, Path::new("claude-shim"), &expect::sample()).is_err());
        let mut exp = expect::sample();
        exp.syscalls.insert("nope".into(), expect::SyscallExpect::Allowed);
        assert!(prepare_spec(&mut spec, Path::new("/x"), &exp).is_err());
    }
}
