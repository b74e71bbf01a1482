//! The policy model: what a sandbox may see, write, call and reach. It is
//! read from TOML (`load`), checked field by field while parsing (`values`)
//! and across fields (`Policy::validate`), then handed to `compile`. Every
//! field is optional and its absence means the strict choice; unknown fields
//! are errors. The schema is documented in specs/policies/README.md.

mod builtin;
mod env;
mod load;
mod opt_outs;
mod schema;
mod shipped;
mod validate;
pub mod values;

pub use self::builtin::{builtin_protected, BUILTIN_HIDDEN, BUILTIN_MASKED, FIXED_ENV};
pub use self::env::{is_secret_name, SECRET_PATTERNS};
pub use self::load::PolicyError;
pub use self::schema::{
    Count, Cpus, Environment, Filesystem, Identity, Network, Policy, PolicyName, Positive, Resources, SchemaVersion,
    Seccomp, VERSION,
};
pub use self::shipped::{AGENT_TOML, OFFLINE_TOML};

#[cfg(test)]
mod tests;
