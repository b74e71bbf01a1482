//! The probe of `verify` inside real sandboxes: a bundle hardened by hand the
//! way a policy hardens it (no capabilities, no_new_privs, the agent seccomp
//! profile of specs/seccomp, masked and read-only paths, an inverted home, a
//! workdir whose .git/config is read-only), run with `claude-shim run` and, for
//! comparison, with runc. Every check must pass under claude-shim; each negative test
//! removes one defence and asserts the checks of that defence fail.

#[path = "verify/expect.rs"]
mod expect;
#[path = "verify/host.rs"]
mod host;
#[path = "verify/run.rs"]
mod run;

#[path = "verify/fails.rs"]
mod fails;
#[path = "verify/passes.rs"]
mod passes;
