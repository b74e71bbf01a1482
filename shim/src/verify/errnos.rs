//! Errno sets and what a syscall probe must observe: the vocabulary shared by
//! the expectations (`expect`) and the syscall catalog (`syscalls`), kept
//! below both so that each depends on it and neither on the other.

use std::fmt;

use nix::errno::Errno;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What a syscall probe must observe.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum SyscallExpect {
    /// The filter lets it through (and the harmless call reaches the kernel).
    Allowed,
    /// The filter refuses it with one of these errnos.
    Blocked(Errnos),
    /// Refused with one of these errnos by the filter or by the kernel (raw
    /// sockets without CAP_NET_RAW): the defence is not the filter alone.
    Refused(Errnos),
}

/// A set of errnos, written as their names ("EPERM").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Errnos(pub Vec<Errno>);

impl Errnos {
    pub fn of(errnos: &[Errno]) -> Self {
        Self(errnos.to_vec())
    }

    pub fn contains(&self, e: Errno) -> bool {
        self.0.contains(&e)
    }
}

impl fmt::Display for Errnos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self.0.iter().map(|e| errno_name(*e)).collect();
        f.write_str(&names.join("/"))
    }
}

impl Serialize for Errnos {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|e| errno_name(*e)))
    }
}

impl<'de> Deserialize<'de> for Errnos {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let names = Vec::<String>::deserialize(d)?;
        let errnos = names
            .iter()
            .map(|n| parse_errno(n).ok_or_else(|| serde::de::Error::custom(format!("unknown errno {n:?}"))))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self(errnos))
    }
}

/// "EPERM" for EPERM.
pub fn errno_name(e: Errno) -> String {
    format!("{e:?}")
}

/// The errno named `name` ("EPERM"), as the C library names them.
pub fn parse_errno(name: &str) -> Option<Errno> {
    (1..4096)
        .map(Errno::from_raw)
        .find(|e| *e != Errno::UnknownErrno && errno_name(*e) == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_names_parse() {
        assert_eq!(parse_errno("EPERM"), Some(Errno::EPERM));
        assert_eq!(parse_errno("ENOSYS"), Some(Errno::ENOSYS));
        assert_eq!(parse_errno("EROFS"), Some(Errno::EROFS));
        assert_eq!(parse_errno("EPREM"), None);
    }
}
