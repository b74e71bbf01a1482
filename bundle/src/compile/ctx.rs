//! What every pass reads (`Ctx`): the policy, the host view, the invocation,
//! the user-namespace choice and who the process runs as, built once by
//! `compile` and handed down.

use super::input::{HostView, Invocation};
use super::output::CompileError;
use super::run_as::RunAs;
use crate::policy::Policy;

/// What every pass reads.
pub(crate) struct Ctx<'a> {
    pub policy: &'a Policy,
    pub host: &'a dyn HostView,
    pub inv: &'a Invocation,
    /// The user namespace applies.
    pub userns: bool,
    /// Who the process is on the host.
    pub run_as: RunAs,
}

impl Ctx<'_> {
    pub fn field_error(&self, field: impl Into<String>, message: impl Into<String>) -> CompileError {
        CompileError::Field {
            origin: self.policy.origin.clone(),
            field: field.into(),
            message: message.into(),
        }
    }
}
