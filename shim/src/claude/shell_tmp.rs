//! The per-command temp directory (`CLAUDE_CODE_TMPDIR`) of `claude
//! --per-command`, one Bash call at a time. Claude Code keeps its task output
//! files there (the call writes them through the descriptors it is given)
//! and reads back, after each call, the file the call's `pwd -P >| FILE`
//! wrote, to carry a `cd` over to the next call. The directory Claude Code
//! reads is seen by no sandbox: each call gets a directory of its own in the
//! runtime's state directory, empty (the calls read nothing there), bound at
//! the same path; afterwards the one cwd file the call was asked to write is
//! read from it as untrusted data (a regular file, bounded, one absolute path
//! without control characters) and copied into the real directory.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::hostfs::{Dir, Kind};

/// A path is at most PATH_MAX bytes, and a newline.
const CWD_LIMIT: u64 = 4097;

/// One call's directory, bound at `shared` inside its sandbox.
pub struct CallTmp {
    /// The runtime's `<root>/.claude-shim`, which holds it.
    ours: Dir,
    /// Its name there: `sandbox-<pid>-<hex>.tmp` (the garbage collector's pattern).
    name: PathBuf,
    /// The directory Claude Code reads, which no sandbox sees, as Claude
    /// Code names it and resolved (the compiled bind's path).
    shared: PathBuf,
    resolved: PathBuf,
    /// The cwd file the command writes, if Claude Code asked for one.
    cwd: Option<String>,
}

/// The name of the cwd file `command` ends by writing into `shared`:
/// Claude Code composes every call as `... && pwd -P >| SHARED/claude-XXXX-cwd`.
/// The model's own text comes earlier in the command, so only the end counts.
pub fn cwd_file(command: &str, shared: &Path) -> Option<String> {
    let (before, target) = command.trim_end().rsplit_once(" >| ")?;
    if !before.ends_with("pwd -P") {
        return None;
    }
    let name = Path::new(target).strip_prefix(shared).ok()?.to_str()?;
    let plain = name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    (plain && name.starts_with("claude-") && name.ends_with("-cwd")).then(|| name.to_owned())
}

/// What a cwd file may hold: one absolute path, printable, and a newline.
pub fn valid_cwd(raw: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(raw) else {
        return false;
    };
    let path = text.strip_suffix('\n').unwrap_or(text);
    path.starts_with('/') && !path.chars().any(char::is_control)
}

impl CallTmp {
    /// Makes the call's directory under `root` (the runtime's state root)
    /// for `command`, to be bound at `shared`.
    pub fn new(root: &Path, shared: &Path, command: &str) -> Result<CallTmp> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let name = format!("sandbox-{}-{nanos:08x}.tmp", std::process::id());
        CallTmp::at(root, shared, &name, command, true)
    }

    /// A session sandbox's directory `name` (`<session id>.tmp`), bound at
    /// `shared` once for all its calls: made by the session (`create`), then
    /// used by each call for its `command`'s cwd file.
    pub fn session(root: &Path, shared: &Path, name: &str, command: &str, create: bool) -> Result<CallTmp> {
        CallTmp::at(root, shared, name, command, create)
    }

    fn at(root: &Path, shared: &Path, name: &str, command: &str, create: bool) -> Result<CallTmp> {
        if !shared.is_absolute() || !shared.is_dir() {
            bail!("use {}: not an absolute directory", shared.display());
        }
        let resolved = std::fs::canonicalize(shared).with_context(|| format!("resolve {}", shared.display()))?;
        std::fs::create_dir_all(root).with_context(|| format!("create state directory {}", root.display()))?;
        let ours = Dir::create_beneath(root, Path::new(".claude-shim"), 0o755)?;
        let name = PathBuf::from(name);
        if create {
            ours.create_dir(&name, 0o700)?;
        }
        Ok(CallTmp {
            ours,
            name,
            shared: shared.to_path_buf(),
            resolved,
            cwd: cwd_file(command, shared),
        })
    }

    /// The call's own directory, bound at `shared` inside.
    pub fn own_dir(&self) -> PathBuf {
        self.ours.join(&self.name)
    }

    /// A handle on it, reached below the state directory without a link.
    pub fn own(&self) -> Result<Dir> {
        Ok(self.ours.sub(&self.name)?)
    }

    /// The directory Claude Code reads, as the sandbox's policy binds it.
    pub fn shared(&self) -> &Path {
        &self.shared
    }

    /// Points the compiled bind of `shared` at the call's own directory.
    pub fn bind(&self, spec: &mut oci_spec::runtime::Spec) -> Result<()> {
        let own = self.own_dir();
        let mounts = spec.mounts_mut().get_or_insert_with(Vec::new);
        let bind = mounts
            .iter_mut()
            .find(|m| m.destination() == &self.resolved && m.source().as_deref() == Some(self.resolved.as_path()));
        match bind {
            Some(m) => {
                m.set_source(Some(own));
                Ok(())
            }
            None => bail!(
                "bind {} at {}: the sandbox has no bind of it",
                own.display(),
                self.resolved.display()
            ),
        }
    }

    /// Copies the cwd file back (problems are logged: the command's result
    /// stands) and removes the call's directory.
    pub fn finish(self) {
        if let Err(e) = self.copy_back() {
            tracing::warn!("{e:#}");
        }
        if let Err(e) = self.ours.remove_all(&self.name) {
            tracing::warn!("{e}");
        }
    }

    /// After one call of a session: the cwd file copied back as `finish`
    /// does, then removed, so the next call starts without it; the
    /// directory stays for the session's other calls.
    pub fn finish_call(self) {
        if let Err(e) = self.copy_back() {
            tracing::warn!("{e:#}");
        }
        if let Some(cwd) = &self.cwd {
            let rel = self.name.join(cwd);
            match self.ours.remove_file(&rel) {
                Err(e) if !e.is_not_found() => tracing::warn!("{e}"),
                _ => {}
            }
        }
    }

    fn copy_back(&self) -> Result<()> {
        let Some(cwd) = &self.cwd else {
            return Ok(());
        };
        let rel = self.name.join(cwd);
        let path = self.ours.join(&rel);
        match self.ours.stat(&rel)? {
            None => return Ok(()),
            Some(st) if st.kind == Kind::File && st.nlink == 1 => {}
            Some(_) => bail!("read {}: it is not a regular file of its own", path.display()),
        }
        let raw = self.ours.read(&rel, CWD_LIMIT)?;
        if !valid_cwd(&raw) {
            bail!("read {}: it does not hold one absolute path", path.display());
        }
        Dir::open(&self.shared)?.replace(Path::new(cwd), &raw, 0o600)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHARED: &str = "/tmp/claude-shim-0-42";

    fn composed(user: &str, file: &str) -> String {
        format!(
            "source /h/.claude/shell-snapshots/snapshot-bash-1-x.sh 2>/dev/null || true && {{ shopt -u extglob || setopt NO_EXTENDED_GLOB NO_BARE_GLOB_QUAL; }} >/dev/null 2>&1 || true && eval '{user}' < /dev/null && pwd -P >| {file}"
        )
    }

    #[test]
    fn the_cwd_file_is_the_one_claude_code_names_last() {
        let s = Path::new(SHARED);
        let c = composed("cd sub", "/tmp/claude-shim-0-42/claude-281a-cwd");
        assert_eq!(cwd_file(&c, s).as_deref(), Some("claude-281a-cwd"));
        // The model's text cannot name another file: only the end counts.
        let c = composed(
            "pwd -P >| /tmp/claude-shim-0-42/claude-beef-cwd; true",
            "/elsewhere/claude-1-cwd",
        );
        assert_eq!(cwd_file(&c, s), None);
        for bad in [
            "/tmp/claude-shim-0-42/../x/claude-1-cwd",
            "/tmp/claude-shim-0-42/sub/claude-1-cwd",
            "/tmp/claude-shim-0-42/.claude.json",
            "/tmp/claude-shim-0-42/claude-1-cwd; rm -rf ~",
        ] {
            assert_eq!(cwd_file(&composed("true", bad), s), None, "{bad}");
        }
        assert_eq!(cwd_file("echo hi", s), None);
    }

    #[test]
    fn a_cwd_file_holds_one_absolute_path() {
        assert!(valid_cwd(b"/home/u/proj/sub\n"));
        assert!(valid_cwd(b"/p with space"));
        for bad in [&b"relative\n"[..], b"/a\n/b\n", b"/a\x1b[2J", b"", b"/\xff"] {
            assert!(!valid_cwd(bad), "{bad:?}");
        }
    }

    fn call(t: &Path) -> (CallTmp, PathBuf, PathBuf) {
        let (root, shared) = (t.join("root"), t.join("shared"));
        std::fs::create_dir_all(&shared).unwrap();
        let shared = std::fs::canonicalize(shared).unwrap();
        let cmd = composed("cd sub", &format!("{}/claude-ab12-cwd", shared.display()));
        let c = CallTmp::new(&root, &shared, &cmd).unwrap();
        let own = c.ours.join(&c.name);
        assert!(own.is_dir());
        (c, own, shared)
    }

    #[test]
    fn only_the_named_cwd_file_comes_back_and_never_through_a_link() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("secret"), "/token\n").unwrap();
        // A regular file with a path: copied back; everything else stays out.
        let (c, own, shared) = call(t.path());
        std::fs::write(own.join("claude-ab12-cwd"), "/proj/sub\n").unwrap();
        std::fs::write(own.join("claude-ffff-cwd"), "/elsewhere\n").unwrap();
        std::os::unix::fs::symlink(t.path().join("secret"), own.join("claude-0000-cwd")).unwrap();
        c.finish();
        assert!(!own.exists(), "the call's directory is removed");
        let names: Vec<_> = std::fs::read_dir(&shared)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, ["claude-ab12-cwd"]);
        assert_eq!(
            std::fs::read_to_string(shared.join("claude-ab12-cwd")).unwrap(),
            "/proj/sub\n"
        );
        // The named file as a link to a host file, a FIFO, a hard link, garbage.
        type Plant = fn(&Path, &Path);
        let plants: [Plant; 4] = [
            |own, t| std::os::unix::fs::symlink(t.join("secret"), own.join("claude-ab12-cwd")).unwrap(),
            |own, _| {
                let m = nix::sys::stat::Mode::from_bits_truncate(0o600);
                nix::unistd::mkfifo(&own.join("claude-ab12-cwd"), m).unwrap()
            },
            |own, t| std::fs::hard_link(t.join("secret"), own.join("claude-ab12-cwd")).unwrap(),
            |own, _| std::fs::write(own.join("claude-ab12-cwd"), "/a\n/b\n").unwrap(),
        ];
        for plant in plants {
            std::fs::remove_file(shared.join("claude-ab12-cwd")).ok();
            let (c, own, shared) = call(t.path());
            plant(&own, t.path());
            c.finish();
            assert!(!own.exists());
            assert!(!shared.join("claude-ab12-cwd").exists());
        }
        assert_eq!(std::fs::read_to_string(t.path().join("secret")).unwrap(), "/token\n");
    }

    #[test]
    fn the_bind_of_the_shared_directory_gets_the_calls_own() {
        let t = tempfile::tempdir().unwrap();
        let (c, own, shared) = call(t.path());
        let mut spec = oci_spec::runtime::Spec::default();
        assert!(c.bind(&mut spec).is_err(), "no bind of it: refused");
        let m = oci_spec::runtime::MountBuilder::default()
            .destination(&shared)
            .source(&shared)
            .typ("bind")
            .build()
            .unwrap();
        spec.mounts_mut().get_or_insert_with(Vec::new).push(m);
        c.bind(&mut spec).unwrap();
        let m = spec.mounts().as_ref().unwrap().last().unwrap();
        assert_eq!((m.destination(), m.source().as_deref()), (&shared, Some(own.as_path())));
        c.finish();
        // Named through a link (TMPDIR may be one): the compiled bind is of the resolved path.
        let link = t.path().join("tmp-link");
        std::os::unix::fs::symlink(&shared, &link).unwrap();
        let c = CallTmp::new(&t.path().join("root"), &link, "true").unwrap();
        let mut spec = oci_spec::runtime::Spec::default();
        let m = oci_spec::runtime::MountBuilder::default()
            .destination(&shared)
            .source(&shared)
            .typ("bind")
            .build()
            .unwrap();
        spec.set_mounts(Some(vec![m]));
        c.bind(&mut spec).unwrap();
        c.finish();
    }
}
