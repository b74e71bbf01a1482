//! The environment section's values: variable names and the allow list's
//! `NAME*` prefix patterns.

use serde::Deserialize;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_patterns() {
        assert!(EnvPattern::try_from("LC_*".to_owned()).unwrap().matches("LC_ALL"));
        assert!(!EnvPattern::try_from("LANG".to_owned()).unwrap().matches("LANGUAGE"));
        assert!(EnvPattern::try_from("A-B".to_owned()).is_err());
        assert!(EnvPattern::try_from("*_X".to_owned()).is_err());
        assert!(EnvName::try_from("1X".to_owned()).is_err());
    }
}
