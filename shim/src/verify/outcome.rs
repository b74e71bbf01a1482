//! The probe's output format: one JSON object per line and per check, the only
//! thing the probe writes to stdout, read back by the host (`report`).

use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Outcome {
    pub check: String,
    pub group: String,
    pub expected: String,
    pub observed: String,
    /// true PASS, false FAIL, null: not applicable here (then `reason` says why).
    pub pass: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What one check found, before it is labelled with the check's id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub observed: String,
    pub pass: Option<bool>,
    pub reason: Option<String>,
}

impl Finding {
    pub fn pass(observed: impl Into<String>) -> Self {
        Self {
            observed: observed.into(),
            pass: Some(true),
            reason: None,
        }
    }

    pub fn fail(observed: impl Into<String>) -> Self {
        Self {
            observed: observed.into(),
            pass: Some(false),
            reason: None,
        }
    }

    pub fn judge(ok: bool, observed: impl Into<String>) -> Self {
        if ok {
            Self::pass(observed)
        } else {
            Self::fail(observed)
        }
    }

    /// Not applicable: the check cannot say anything in this sandbox or mode.
    pub fn not_applicable(observed: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            observed: observed.into(),
            pass: None,
            reason: Some(reason.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_format() {
        let o = Outcome {
            check: "syscall mount".into(),
            group: "seccomp".into(),
            expected: "blocked: EPERM".into(),
            observed: "EPERM (seccomp)".into(),
            pass: Some(true),
            reason: None,
        };
        let line = serde_json::to_string(&o).unwrap();
        assert_eq!(
            line,
            r#"{"check":"syscall mount","group":"seccomp","expected":"blocked: EPERM","observed":"EPERM (seccomp)","pass":true}"#
        );
        let na: Outcome = serde_json::from_str(
            r#"{"check":"TIOCSTI fd 1","group":"terminal","expected":"x","observed":"not a terminal","pass":null,"reason":"fd 1 is a file"}"#,
        )
        .unwrap();
        assert_eq!(na.pass, None);
        assert_eq!(na.reason.as_deref(), Some("fd 1 is a file"));
    }
}
