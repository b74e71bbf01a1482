//! What every pass reads (`Ctx`): the policy, the host view, the invocation
//! and the user-namespace choice, built once by `compile` and handed down.

use super::input::{HostView, Invocation};
use super::output::CompileError;
use crate::policy::Policy;

/// What every pass reads.
pub(crate) struct Ctx<'a> {
    pub policy: &'a Policy,
    pub host: &'a dyn HostView,
    pub inv: &'a Invocation,
    /// The user namespace applies.
    pub userns: bool,
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
