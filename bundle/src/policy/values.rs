//! The policy's value types. Each parses and checks one TOML value, so a bad
//! value fails while deserializing and its error carries the value's span,
//! which `load` turns into the field path.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
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

/// Only `private` exists: the host's /tmp holds IDE and agent sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tmp {
    #[default]
    Private,
}

/// `auto`, `always` or `never`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UserNamespace {
    /// Only when the caller is unprivileged.
    #[default]
    Auto,
    Always,
    /// Refused when the caller is unprivileged.
    Never,
}

/// `none`, `allowlist` or `public` (strictness none > allowlist > public).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    #[default]
    None,
    Allowlist,
    Public,
}

impl NetworkMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Allowlist => "allowlist",
            Self::Public => "public",
        }
    }
}

/// A path as written: absolute, `~` (the caller's home) or `~/...`.
#[derive(Debug, Clone, PartialEq, Eq)]
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

fn absolute_clean(s: &str, what: &str) -> Result<PathBuf, String> {
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

/// An environment variable name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub struct EnvName(pub String);

pub(crate) fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl TryFrom<String> for EnvName {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        if !is_env_name(&s) {
            return Err(format!(
                "{s:?} is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)"
            ));
        }
        Ok(Self(s))
    }
}

/// An allow pattern: a name, or a prefix followed by `*` (`LC_*`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct EnvPattern(pub String);

impl EnvPattern {
    pub fn matches(&self, name: &str) -> bool {
        match self.0.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == self.0,
        }
    }
}

impl TryFrom<String> for EnvPattern {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let base = s.strip_suffix('*').unwrap_or(&s);
        if !(base.is_empty() || is_env_name(base)) {
            return Err(format!("{s:?} is not a variable name or a NAME* prefix pattern"));
        }
        Ok(Self(s))
    }
}

/// A syscall name known for x86_64 or i386.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct SyscallName(pub String);

impl TryFrom<String> for SyscallName {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        if !crate::seccomp::syscalls::is_known(&s) {
            return Err(format!("unknown syscall {s:?}"));
        }
        Ok(Self(s))
    }
}

/// `agent` (the built-in profile) or an absolute path to an OCI LinuxSeccomp JSON.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "String")]
pub enum ProfileRef {
    #[default]
    Agent,
    File(PathBuf),
}

impl TryFrom<String> for ProfileRef {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        if s == crate::seccomp::AGENT_PROFILE_NAME {
            return Ok(Self::Agent);
        }
        Ok(Self::File(absolute_clean(
            &s,
            "a seccomp profile other than \"agent\"",
        )?))
    }
}

/// A capability name, `CAP_` prefixed.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct CapabilityName(pub oci_spec::runtime::Capability, pub String);

impl TryFrom<String> for CapabilityName {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let cap = if s.starts_with("CAP_") {
            serde_json::from_value::<oci_spec::runtime::Capability>(serde_json::Value::String(s.clone())).ok()
        } else {
            None
        };
        match cap {
            Some(c) => Ok(Self(c, s)),
            None => Err(format!(
                "unknown capability {s:?} (names look like CAP_NET_BIND_SERVICE)"
            )),
        }
    }
}

/// A size in bytes: an integer, or a string with a unit (`512MiB`, `4GiB`, `1G`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "toml::Value")]
pub struct ByteSize(pub u64);

impl TryFrom<toml::Value> for ByteSize {
    type Error = String;
    fn try_from(v: toml::Value) -> Result<Self, String> {
        match v {
            toml::Value::Integer(n) if n > 0 => Ok(Self(n as u64)),
            toml::Value::String(s) => parse_size(&s).map(Self),
            other => Err(format!(
                "{other} is not a size (a positive number of bytes or a string like \"4GiB\")"
            )),
        }
    }
}

fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("{s:?} is not a size like \"4GiB\""))?;
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "KiB" | "k" => 1 << 10,
        "M" | "MiB" | "m" => 1 << 20,
        "G" | "GiB" | "g" => 1 << 30,
        "T" | "TiB" | "t" => 1 << 40,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        u => {
            return Err(format!(
                "{s:?}: unknown unit {u:?} (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)"
            ))
        }
    };
    match n.checked_mul(mult) {
        Some(0) => Err(format!("{s:?}: a size must be positive")),
        Some(v) if v <= i64::MAX as u64 => Ok(v),
        _ => Err(format!("{s:?} is too large")),
    }
}

/// An rlimit name as the policy writes it (`nofile`, `nproc`, `core`...).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub struct RlimitName(pub String);

impl RlimitName {
    pub fn oci(&self) -> oci_spec::runtime::PosixRlimitType {
        format!("RLIMIT_{}", self.0.to_ascii_uppercase())
            .parse()
            .expect("checked when parsed")
    }
}

impl TryFrom<String> for RlimitName {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let ok = s.chars().all(|c| c.is_ascii_lowercase())
            && format!("RLIMIT_{}", s.to_ascii_uppercase())
                .parse::<oci_spec::runtime::PosixRlimitType>()
                .is_ok();
        if !ok {
            return Err(format!(
                "unknown rlimit {s:?} (nofile, nproc, core, stack, memlock, as, ...)"
            ));
        }
        Ok(Self(s))
    }
}

/// A host pattern of the network allow and deny lists: `host`, `*.domain`,
/// either with an optional `:port`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct HostPattern(pub String);

impl TryFrom<String> for HostPattern {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let lower = s.to_ascii_lowercase();
        let (host, port) = match lower.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (lower.as_str(), None),
        };
        if let Some(p) = port {
            parse_port(p).map_err(|e| format!("{s:?}: {e}"))?;
        }
        let name = host.strip_prefix("*.").unwrap_or(host);
        if name.contains('*') {
            return Err(format!("{s:?}: a wildcard is allowed only as a leading \"*.\""));
        }
        if host.starts_with("*.") && !name.contains('.') {
            return Err(format!("{s:?}: a wildcard over a whole top-level domain is too broad"));
        }
        if name.is_empty() || name.len() > 253 {
            return Err(format!("{s:?} is not a host name"));
        }
        for label in name.split('.') {
            let ok = !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
            if !ok {
                return Err(format!("{s:?} is not a host name (labels of a-z, 0-9 and -)"));
            }
        }
        Ok(Self(lower))
    }
}

fn parse_port(p: &str) -> Result<u16, String> {
    match p.parse::<u16>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("port {p:?} is not in 1..=65535")),
    }
}

/// An address range a `public` sandbox may reach although it is private:
/// `10.0.0.5/32`, `10.0.0.0/24:443`, `[fd00::/8]:443`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct CidrRule(pub String);

impl TryFrom<String> for CidrRule {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let bad = |why: &str| format!("{s:?} is not a CIDR with an optional port ({why})");
        let (cidr, port) = if let Some(rest) = s.strip_prefix('[') {
            let (inner, after) = rest.split_once(']').ok_or_else(|| bad("unclosed ["))?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(|| bad("expected :port after ]"))?),
            };
            (inner, port)
        } else {
            match s.split_once('/') {
                Some((addr, rest)) if addr.parse::<Ipv4Addr>().is_ok() => match rest.split_once(':') {
                    Some((len, p)) => (&s[..addr.len() + 1 + len.len()], Some(p)),
                    None => (s.as_str(), None),
                },
                _ => (s.as_str(), None),
            }
        };
        if let Some(p) = port {
            parse_port(p).map_err(|e| bad(&e))?;
        }
        let (addr, len) = cidr.split_once('/').ok_or_else(|| bad("missing /prefix"))?;
        let addr: IpAddr = addr.parse().map_err(|_| bad("bad address"))?;
        let (bits, max): (u128, u32) = match addr {
            IpAddr::V4(a) => (u128::from(u32::from(a)), 32),
            IpAddr::V6(a) => (u128::from(a), 128),
        };
        let len: u32 = len.parse().map_err(|_| bad("bad prefix length"))?;
        if len > max {
            return Err(bad("prefix length too long"));
        }
        if len == 0 {
            return Err(format!("{s:?} covers every address; use a narrower range"));
        }
        let host_mask: u128 = if len == max { 0 } else { (1u128 << (max - len)) - 1 };
        if bits & host_mask != 0 {
            return Err(bad("address bits set beyond the prefix"));
        }
        Ok(Self(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4GiB").unwrap(), 4 << 30);
        assert_eq!(parse_size("512MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        assert_eq!(parse_size("100MB").unwrap(), 100_000_000);
        assert!(parse_size("4 parsecs").is_err());
        assert!(parse_size("0").is_err());
        assert!(parse_size("GiB").is_err());
    }

    #[test]
    fn host_patterns() {
        for ok in [
            "github.com",
            "*.github.com",
            "api.anthropic.com:443",
            "LOCALHOST",
            "10.1.2.3",
        ] {
            HostPattern::try_from(ok.to_owned()).unwrap();
        }
        assert_eq!(HostPattern::try_from("GitHub.com".to_owned()).unwrap().0, "github.com");
        for bad in [
            "*",
            "*.com",
            "a.*.com",
            "exa mple.com",
            "-a.com",
            "a.com:0",
            "a.com:99999",
            "",
            ":443",
            "a..b",
        ] {
            assert!(HostPattern::try_from(bad.to_owned()).is_err(), "{bad}");
        }
    }

    #[test]
    fn cidr_rules() {
        for ok in [
            "10.0.0.5/32:443",
            "10.0.0.0/24",
            "192.168.1.0/24:22",
            "[fd00::/8]:443",
            "fd00::/8",
        ] {
            CidrRule::try_from(ok.to_owned()).unwrap();
        }
        for bad in [
            "10.0.0.5",
            "10.0.0.5/33",
            "10.0.0.1/24",
            "0.0.0.0/0",
            "[fd00::/8]443",
            "x/8",
            "10.0.0.0/8:0",
        ] {
            assert!(CidrRule::try_from(bad.to_owned()).is_err(), "{bad}");
        }
    }

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

    #[test]
    fn env_patterns() {
        assert!(EnvPattern::try_from("LC_*".to_owned()).unwrap().matches("LC_ALL"));
        assert!(!EnvPattern::try_from("LANG".to_owned()).unwrap().matches("LANGUAGE"));
        assert!(EnvPattern::try_from("A-B".to_owned()).is_err());
        assert!(EnvPattern::try_from("*_X".to_owned()).is_err());
        assert!(EnvName::try_from("1X".to_owned()).is_err());
    }

    #[test]
    fn capabilities_and_rlimits() {
        assert!(CapabilityName::try_from("CAP_NET_RAW".to_owned()).is_ok());
        assert!(CapabilityName::try_from("NET_RAW".to_owned()).is_err());
        assert!(CapabilityName::try_from("CAP_FLY".to_owned()).is_err());
        assert_eq!(
            RlimitName::try_from("nofile".to_owned()).unwrap().oci(),
            oci_spec::runtime::PosixRlimitType::RlimitNofile
        );
        assert!(RlimitName::try_from("NOFILE".to_owned()).is_err());
        assert!(RlimitName::try_from("files".to_owned()).is_err());
    }
}
