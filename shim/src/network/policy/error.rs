//! The one error every parser of the policy returns: a sentence naming the
//! entry or annotation at fault. Below the parsers.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PolicyError(pub(super) String);
