//! Policy -> OCI bundle: the policy model, its validation and its compilation
//! into an `oci_spec` runtime `Spec`. This crate makes no system calls; the
//! `claude-shim` binary does the kernel work.
#![forbid(unsafe_code)]
