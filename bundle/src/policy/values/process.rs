//! The identity and resources sections' values: the user namespace choice,
//! capability names, sizes and rlimit names.

use serde::Deserialize;

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
