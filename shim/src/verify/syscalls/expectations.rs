//! What a seccomp profile makes of each probe of the catalog: the syscall
//! table of the expectations `verify` derives from a compiled spec.

use std::collections::BTreeMap;

use claude_shim_bundle::seccomp::{decide, Decision};
use nix::errno::Errno;
use oci_spec::runtime::LinuxSeccomp;

use super::catalog::CATALOG;
use super::types::Abi;
use crate::verify::errnos::{Errnos, SyscallExpect};

/// What `profile` makes of each probe, evaluated on the probe's own arguments
/// with the OCI semantics (`claude_shim_bundle::seccomp::decide`): the
/// syscall table of an `Expectations` derived from the profile a policy
/// compiles to. Probes the profile answers with another action (kill, trap,
/// log, notify) are left out: the probe can only expect an errno or a pass.
pub fn expectations_for(profile: &LinuxSeccomp) -> BTreeMap<String, SyscallExpect> {
    // Without SCMP_ARCH_X86 in the profile an i386 call meets the filter's
    // bad-architecture action (a kill), not its rules.
    let i386 = claude_shim_bundle::seccomp::socketcall::admits_i386(profile);
    CATALOG
        .iter()
        .filter(|p| p.abi == Abi::X86_64 || i386)
        .filter_map(|p| {
            let expect = match decide(profile, p.syscall, p.args) {
                Decision::Allow => SyscallExpect::Allowed,
                Decision::Errno(e) => SyscallExpect::Blocked(Errnos::of(&[Errno::from_raw(e as i32)])),
                Decision::Other(_) => return None,
            };
            Some((p.name.to_owned(), expect))
        })
        .chain(
            // The runtime puts its socketcall guard in front of such a profile.
            claude_shim_bundle::seccomp::socketcall::needs_guard(profile).then(|| {
                (
                    "socketcall(SYS_SOCKET) via int 0x80".to_owned(),
                    SyscallExpect::Blocked(Errnos::of(&[Errno::ENOSYS])),
                )
            }),
        )
        .collect()
}
