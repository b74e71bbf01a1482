//! What the host side of verify refuses before a probe runs: expectations
//! that do not read, a spec the probe cannot be put into. Below both.

#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("read expectations: {0}")]
    Expectations(String),
    #[error("prepare the probe's spec: {0}")]
    Spec(String),
}
