//! Engine compatibility (issue 12): the flags users reach for in podman and
//! ctr, each run under runc and under claude-shim on the same image, with the
//! same observable result (exit code and output). A difference fails the test
//! unless the check says why claude-shim is stricter. Each test prints every
//! check with both runtimes' results.

#[path = "compat/image.rs"]
mod image;
#[path = "compat/table.rs"]
mod table;

#[path = "compat/ctr.rs"]
mod ctr;
#[path = "compat/podman.rs"]
mod podman;
