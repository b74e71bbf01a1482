//! The filesystem section's values: the root, the working directory's
//! access, /tmp, and the paths as written (binds, hidden, masked and
//! protected paths), each cleaned and checked while it is parsed.

use std::fmt;
use std::path::{Component, Path, PathBuf};

use serde::Deserialize;

/// The root of the sandbox's filesystem.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "String")]
pub enum RootSource {
    /// The host's `/`, read-only.
    #[default]
    Host,
    /// A rootfs directory (absolute), read-only.
    Rootfs(PathBuf),
}

impl TryFrom<String> for RootSource {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        if s == "host" {
            return Ok(Self::Host);
        }
        Ok(Self::Rootfs(absolute_clean(&s, "a rootfs")?))
    }
}

/// `rw` or `ro`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    #[default]
    Rw,
    Ro,
}

/// What happens to what a run leaves that the host would run (a new
/// `sub/.claude/settings.json`, a new nested repository...): moved aside
/// into the quarantine at exit (the strict default), or only reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AfterEffects {
    #[default]
    Quarantine,
    Report,
}

/// Where the sandbox's writes to the working directory go: `live`, the
/// project itself (guarded by the protected paths and the quarantine at
/// exit), or `review`, a layer over it in claude-shim's state that reaches
/// the project only through `claude-shim apply` (docs/review.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Workspace {
    #[default]
    Live,
    Review,
}

/// Only `private` exists: the host's /tmp holds IDE and agent sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tmp {
    #[default]
    Private,
}

/// What the caller's home shows inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HomeMode {
    /// An empty tmpfs owned by the process, writable, gone after the run:
    /// nothing a daemon binds there (Docker Desktop, podman, colima keep
    /// their sockets in the home) is reachable, nothing written persists.
    /// What tools need comes back through `readonly`.
    #[default]
    Empty,
    /// The host's home, read-only like the rest of `/`.
    Host,
}

/// A path as written: absolute, `~` (the caller's home) or `~/...`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PolicyPath {
    Absolute(PathBuf),
    /// Relative to the caller's home; empty for `~` itself.
    Home(PathBuf),
}

impl PolicyPath {
    pub fn expand(&self, home: &Path) -> PathBuf {
        match self {
            Self::Absolute(p) => p.clone(),
            Self::Home(rel) if rel.as_os_str().is_empty() => home.to_path_buf(),
            Self::Home(rel) => home.join(rel),
        }
    }

    fn parse(s: &str, what: &str) -> Result<Self, String> {
        if s == "~" {
            return Ok(Self::Home(PathBuf::new()));
        }
        if let Some(rest) = s.strip_prefix("~/") {
            return Ok(Self::Home(relative_clean(rest, what)?));
        }
        if s.starts_with('~') {
            return Err(format!("{s:?}: only the caller's own home (~/...) can be named"));
        }
        Ok(Self::Absolute(absolute_clean(s, what)?))
    }
}

impl fmt::Display for PolicyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Absolute(p) => write!(f, "{}", p.display()),
            Self::Home(rel) if rel.as_os_str().is_empty() => write!(f, "~"),
            Self::Home(rel) => write!(f, "~/{}", rel.display()),
        }
    }
}

/// An extra bind (`writable`, `readonly`): a path, and a leading `?` for
/// "skip it when it does not exist" (otherwise a missing path is an error).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct BindPath {
    pub path: PolicyPath,
    pub optional: bool,
}

impl TryFrom<String> for BindPath {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let (optional, rest) = match s.strip_prefix('?') {
            Some(rest) => (true, rest),
            None => (false, s.as_str()),
        };
        Ok(Self {
            path: PolicyPath::parse(rest, "a bind")?,
            optional,
        })
    }
}

/// A host path to hide or mask; one that does not exist has nothing to hide.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct HostPath(pub PolicyPath);

impl TryFrom<String> for HostPath {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        if s.starts_with('?') {
            return Err(format!("{s:?}: a missing path is always skipped here; drop the \"?\""));
        }
        Ok(Self(PolicyPath::parse(&s, "a hidden path")?))
    }
}

impl fmt::Display for HostPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// An absolute path (no `~`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct AbsPath(pub PathBuf);

impl TryFrom<String> for AbsPath {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        Ok(Self(absolute_clean(&s, "a masked path")?))
    }
}

/// A path relative to the working directory; a trailing `/` says it is a
/// directory (what the placeholder created for a missing one will be).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct WorkdirPath {
    pub path: PathBuf,
    pub dir: bool,
}

impl WorkdirPath {
    pub fn new(s: &str) -> Result<Self, String> {
        Self::try_from(s.to_owned())
    }
}

impl TryFrom<String> for WorkdirPath {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        if s.starts_with('/') || s.starts_with('~') {
            return Err(format!(
                "{s:?}: protected paths are relative to the working directory (use filesystem.readonly for others)"
            ));
        }
        let dir = s.ends_with('/');
        Ok(Self {
            path: relative_clean(s.trim_end_matches('/'), "a protected path")?,
            dir,
        })
    }
}

impl fmt::Display for WorkdirPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.path.display(), if self.dir { "/" } else { "" })
    }
}

/// Every path ends up as a C string (a mount source or destination).
fn refuse_nul(s: &str) -> Result<(), String> {
    if s.contains('\0') {
        return Err(format!("{s:?} holds a NUL byte"));
    }
    Ok(())
}

pub(super) fn absolute_clean(s: &str, what: &str) -> Result<PathBuf, String> {
    refuse_nul(s)?;
    if !s.starts_with('/') {
        return Err(format!(
            "{s:?} is relative; {what} must be an absolute path (or start with ~/)"
        ));
    }
    let mut out = PathBuf::from("/");
    for c in Path::new(s).components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(n) => out.push(n),
            Component::ParentDir | Component::Prefix(_) => {
                return Err(format!("{s:?}: \"..\" is not allowed in a path"));
            }
        }
    }
    Ok(out)
}

fn relative_clean(s: &str, what: &str) -> Result<PathBuf, String> {
    refuse_nul(s)?;
    let mut out = PathBuf::new();
    for c in Path::new(s).components() {
        match c {
            Component::CurDir => {}
            Component::Normal(n) => out.push(n),
            Component::RootDir | Component::ParentDir | Component::Prefix(_) => {
                return Err(format!("{s:?}: \"..\" and absolute parts are not allowed in {what}"));
            }
        }
    }
    if out.as_os_str().is_empty() {
        return Err(format!("{s:?}: {what} must name something below its base"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(
            BindPath::try_from("?~/.cache/".to_owned()).unwrap(),
            BindPath {
                path: PolicyPath::Home(".cache".into()),
                optional: true
            }
        );
        assert!(BindPath::try_from("relative/x".to_owned()).is_err());
        assert!(BindPath::try_from("/a/../etc".to_owned()).is_err());
        assert!(BindPath::try_from("~root/x".to_owned()).is_err());
        assert_eq!(
            AbsPath::try_from("/run//secrets/".to_owned()).unwrap().0,
            PathBuf::from("/run/secrets")
        );
        let w = WorkdirPath::try_from(".git/hooks/".to_owned()).unwrap();
        assert_eq!((w.path.as_path(), w.dir), (Path::new(".git/hooks"), true));
        assert!(WorkdirPath::try_from("/etc".to_owned()).is_err());
        assert!(WorkdirPath::try_from("../x".to_owned()).is_err());
        assert!(WorkdirPath::try_from(".".to_owned()).is_err());
        assert_eq!(
            PolicyPath::Home(PathBuf::new()).expand(Path::new("/home/u")),
            PathBuf::from("/home/u")
        );
    }
}
