//! The syscall probes, and how the probe tells the filter's answer from the
//! kernel's. A bad-pointer call that the filter lets through usually fails in
//! the kernel with EFAULT/EBADF/EINVAL, but some syscalls check capabilities
//! first (pivot_root, swapon, reboot...) and then the kernel says EPERM too,
//! exactly like an `SCMP_ACT_ERRNO(EPERM)` rule. So each call first runs in a
//! child that stacks a filter of its own returning SECCOMP_RET_TRACE for that
//! syscall: the kernel takes the strictest action of all filters (seccomp(2):
//! ERRNO precedes TRACE), so the sandbox's errno comes back unchanged when its
//! filter refuses, and a call it allows meets TRACE with no tracer, which fails
//! with ENOSYS without entering the syscall. Only then does a second child make
//! the harmless call for real, to show what the kernel says.

use libseccomp::{ScmpAction, ScmpArch, ScmpFilterContext, ScmpSyscall};
use nix::errno::Errno;
use nix::sys::signal::Signal;

use super::sys::{self, End};
use crate::verify::expect::{errno_name, SyscallExpect};
use crate::verify::outcome::Finding;
use crate::verify::syscalls::{Abi, Method, Ret, SyscallProbe};

/// What a probe saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// The sandbox's filter answered with this errno.
    Filtered(Errno),
    /// ENOSYS under the stacked filter and without it: the filter's ENOSYS
    /// (clone3), or a syscall this kernel lacks; refused either way.
    Enosys,
    /// The filter let the call through; this is what the kernel answered.
    Reached(Ret),
    /// The real thing (a `Direct` probe): its result.
    Direct(Ret),
    /// The process died of a signal (SCMP_ACT_KILL, SCMP_ACT_TRAP: SIGSYS).
    Killed(Signal),
    /// An i386 probe faulted at `int 0x80`: this kernel has no 32-bit entry
    /// point (no IA32 emulation), so nothing can arrive through it.
    NoEntry,
    /// The probe could not find out.
    Unknown(String),
}

/// The harmless call itself.
fn call(p: &SyscallProbe) -> Ret {
    match (p.method, p.name) {
        (Method::Direct, "thread") => std::thread::Builder::new()
            .spawn(|| ())
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?
            .join()
            .map(|()| 0)
            .map_err(|_| Errno::EIO),
        (Method::Direct, "socket(AF_UNIX)") => sys::raw(p.nr, p.args).map(|fd| {
            drop(sys::owned(fd));
            0
        }),
        _ if p.syscall == "clone" => sys::raw_spawning(|| entry(p)),
        // The kernel returns modify_ldt's int as an unsigned int (x86's
        // ldt.c, for historical reasons); glibc sign-extends it, as here.
        _ if p.syscall == "modify_ldt" => entry(p).and_then(|v| match v as i32 {
            e if e < 0 => Err(Errno::from_raw(-e)),
            _ => Ok(v),
        }),
        _ => entry(p),
    }
}

fn entry(p: &SyscallProbe) -> Ret {
    match p.abi {
        Abi::X86_64 => sys::raw(p.nr, p.args),
        Abi::I386 => sys::raw_i386(p.nr, p.args),
    }
}

/// A filter that sends the probe's call to a tracer; with none, the call
/// fails with ENOSYS.
fn stack_trace_filter(p: &SyscallProbe) -> Result<(), String> {
    let mut ctx = ScmpFilterContext::new(ScmpAction::Allow).map_err(|e| e.to_string())?;
    let nr = match p.abi {
        Abi::X86_64 => ScmpSyscall::from(p.nr as i32),
        Abi::I386 => {
            // Rules name native numbers (or libseccomp's pseudo-numbers for
            // i386-only calls such as socketcall); libseccomp translates
            // them by name for each architecture in the filter.
            ctx.add_arch(ScmpArch::X86).map_err(|e| e.to_string())?;
            ScmpSyscall::from_name(p.syscall).map_err(|e| e.to_string())?
        }
    };
    ctx.add_rule(ScmpAction::Trace(0), nr).map_err(|e| e.to_string())?;
    // libseccomp sets no_new_privs first (SCMP_FLTATR_CTL_NNP), as an
    // unprivileged filter requires; it only affects this child.
    ctx.load().map_err(|e| e.to_string())
}

fn end_text(end: &End) -> String {
    match end {
        End::Exited(c) => format!("the probe child exited with {c} without a result"),
        End::Signaled(s) => format!("the probe child died of {s}"),
    }
}

fn stacked(p: &SyscallProbe) -> Result<Ret, Seen> {
    let out = sys::in_child(|| match stack_trace_filter(p) {
        Ok(()) => {
            let r = call(p);
            let v = match r {
                Ok(v) => v,
                Err(e) => -(e as i64),
            };
            let mut b = vec![0u8];
            b.extend_from_slice(&v.to_le_bytes());
            b
        }
        Err(msg) => {
            let mut b = vec![1u8];
            b.extend_from_slice(msg.as_bytes());
            b
        }
    });
    let (bytes, end) = out.map_err(|e| Seen::Unknown(format!("fork: {}", errno_name(e))))?;
    match bytes.split_first() {
        Some((0, v)) if v.len() == 8 => {
            let v = i64::from_le_bytes(v.try_into().expect("8 bytes"));
            Ok(if v < 0 { Err(Errno::from_raw(-v as i32)) } else { Ok(v) })
        }
        Some((1, msg)) => Err(Seen::Unknown(format!(
            "could not stack the probe's filter: {}",
            String::from_utf8_lossy(msg)
        ))),
        _ => match end {
            End::Signaled(s) => Err(Seen::Killed(s)),
            e => Err(Seen::Unknown(end_text(&e))),
        },
    }
}

fn direct(p: &SyscallProbe) -> Result<Ret, Seen> {
    sys::ret_in_child(|| call(p)).map_err(|end| match end {
        End::Signaled(s) => Seen::Killed(s),
        e => Seen::Unknown(end_text(&e)),
    })
}

pub fn observe(p: &SyscallProbe) -> Seen {
    match observe_entry(p) {
        Seen::Killed(Signal::SIGSEGV) if p.abi == Abi::I386 && !has_i386_entry() => Seen::NoEntry,
        seen => seen,
    }
}

/// i386 getpid, a call every filter allows. Only when it faults too is a
/// SIGSEGV the missing entry point rather than a fault of the probe, which
/// must fail its row, not pass it.
fn has_i386_entry() -> bool {
    const I386_GETPID: i64 = 20;
    !matches!(
        sys::ret_in_child(|| sys::raw_i386(I386_GETPID, [0; 6])),
        Err(End::Signaled(Signal::SIGSEGV))
    )
}

fn observe_entry(p: &SyscallProbe) -> Seen {
    if p.method == Method::Direct {
        return match direct(p) {
            Ok(r) => Seen::Direct(r),
            Err(seen) => seen,
        };
    }
    match stacked(p) {
        Err(seen) => seen,
        Ok(Err(Errno::ENOSYS)) => match direct(p) {
            Ok(Err(Errno::ENOSYS)) => Seen::Enosys,
            Ok(r) => Seen::Reached(r),
            Err(seen) => seen,
        },
        Ok(Err(e)) => Seen::Filtered(e),
        Ok(Ok(_)) => Seen::Unknown("the call ran under the probe's own filter, which should have stopped it".into()),
    }
}

fn ret_text(r: &Ret) -> String {
    match r {
        Ok(_) => "succeeded".to_owned(),
        Err(e) => errno_name(*e),
    }
}

fn seen_text(s: &Seen) -> String {
    match s {
        Seen::Filtered(e) => format!("{} (seccomp)", errno_name(*e)),
        Seen::Enosys => "ENOSYS (seccomp, or not in this kernel)".to_owned(),
        Seen::Reached(r) => format!("not filtered (kernel: {})", ret_text(r)),
        Seen::Direct(r) => ret_text(r),
        Seen::Killed(sig) => format!("killed by {sig}"),
        Seen::NoEntry => "no 32-bit entry point in this kernel (int 0x80 faults)".to_owned(),
        Seen::Unknown(why) => format!("unknown: {why}"),
    }
}

pub fn judge(expect: &SyscallExpect, seen: &Seen) -> Finding {
    let observed = seen_text(seen);
    let ok = match (expect, seen) {
        (SyscallExpect::Allowed, Seen::Reached(_)) => true,
        (SyscallExpect::Allowed, Seen::Direct(r)) => r.is_ok(),
        (SyscallExpect::Blocked(set), Seen::Filtered(e)) => set.contains(*e),
        (SyscallExpect::Blocked(set), Seen::Enosys) => set.contains(Errno::ENOSYS),
        (SyscallExpect::Blocked(set), Seen::Direct(Err(e))) => set.contains(*e),
        (SyscallExpect::Refused(set), Seen::Filtered(e) | Seen::Reached(Err(e)) | Seen::Direct(Err(e))) => {
            set.contains(*e)
        }
        (SyscallExpect::Refused(set), Seen::Enosys) => set.contains(Errno::ENOSYS),
        // Nothing enters where there is no entry point.
        (SyscallExpect::Blocked(_) | SyscallExpect::Refused(_), Seen::NoEntry) => true,
        _ => false,
    };
    Finding::judge(ok, observed)
}

pub fn run(p: &SyscallProbe, expect: &SyscallExpect) -> Finding {
    judge(expect, &observe(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::expect::Errnos;
    use crate::verify::syscalls::find;

    fn blocked(e: &[Errno]) -> SyscallExpect {
        SyscallExpect::Blocked(Errnos::of(e))
    }

    #[test]
    fn judging() {
        let eperm = blocked(&[Errno::EPERM]);
        assert_eq!(judge(&eperm, &Seen::Filtered(Errno::EPERM)).pass, Some(true));
        assert_eq!(judge(&eperm, &Seen::Filtered(Errno::EACCES)).pass, Some(false));
        // The kernel's own EPERM behind an open filter is not the rule working.
        let j = judge(&eperm, &Seen::Reached(Err(Errno::EPERM)));
        assert_eq!(j.pass, Some(false));
        assert_eq!(j.observed, "not filtered (kernel: EPERM)");
        assert_eq!(judge(&eperm, &Seen::Killed(Signal::SIGSYS)).pass, Some(false));
        assert_eq!(judge(&eperm, &Seen::Unknown("x".into())).pass, Some(false));
        assert_eq!(judge(&eperm, &Seen::Enosys).pass, Some(false));
        assert_eq!(judge(&blocked(&[Errno::ENOSYS]), &Seen::Enosys).pass, Some(true));
        let refused = SyscallExpect::Refused(Errnos::of(&[Errno::EPERM]));
        assert_eq!(judge(&refused, &Seen::Reached(Err(Errno::EPERM))).pass, Some(true));
        assert_eq!(judge(&refused, &Seen::Filtered(Errno::EPERM)).pass, Some(true));
        assert_eq!(judge(&refused, &Seen::Reached(Ok(3))).pass, Some(false));
        let allowed = SyscallExpect::Allowed;
        assert_eq!(judge(&allowed, &Seen::Reached(Err(Errno::EFAULT))).pass, Some(true));
        assert_eq!(judge(&allowed, &Seen::Filtered(Errno::EPERM)).pass, Some(false));
        assert_eq!(judge(&allowed, &Seen::Direct(Ok(3))).pass, Some(true));
        assert_eq!(judge(&allowed, &Seen::Direct(Err(Errno::EPERM))).pass, Some(false));
    }

    // Unit tests run unfiltered: every call must reach the kernel, and the
    // kernel's answer must be a harmless failure, never a filter's errno.
    #[test]
    fn without_a_filter_calls_reach_the_kernel() {
        for name in [
            "mount",
            "pivot_root",
            "setns",
            "unshare(CLONE_NEWUSER|1<<40)",
            "clone3",
            "reboot",
        ] {
            let seen = observe(find(name).unwrap());
            assert!(matches!(seen, Seen::Reached(Err(_))), "{name}: {seen:?}");
        }
        assert_eq!(observe(find("setns").unwrap()), Seen::Reached(Err(Errno::EBADF)));
        assert_eq!(
            observe(find("unshare(CLONE_NEWUSER|1<<40)").unwrap()),
            Seen::Reached(Err(Errno::EINVAL))
        );
        // The 32-bit entry point, where this kernel has one (this machine's does).
        assert!(has_i386_entry());
        for (name, errno) in [
            ("ioctl(TIOCSTI) via int 0x80", Errno::EBADF),
            ("socketcall(SYS_SOCKET) via int 0x80", Errno::EFAULT),
            ("ioctl(TIOCSTI)", Errno::EBADF),
            ("ioctl(TIOCSETD)", Errno::EBADF),
            ("ioctl(TIOCSETD) via int 0x80", Errno::EBADF),
            ("modify_ldt", Errno::EINVAL),
            ("modify_ldt via int 0x80", Errno::EINVAL),
        ] {
            assert_eq!(observe(find(name).unwrap()), Seen::Reached(Err(errno)), "{name}");
        }
        // Netlink sockets open unfiltered (and close with the probe's child).
        for name in [
            "socket(AF_NETLINK,NETLINK_ROUTE)",
            "socket(AF_NETLINK,NETLINK_KOBJECT_UEVENT)",
            "socket(AF_NETLINK,NETLINK_KOBJECT_UEVENT) via int 0x80",
        ] {
            let seen = observe(find(name).unwrap());
            assert!(matches!(seen, Seen::Reached(Ok(_))), "{name}: {seen:?}");
        }
        let socket = observe(find("socket(AF_VSOCK) via int 0x80").unwrap());
        assert!(
            matches!(socket, Seen::Reached(_)),
            "i386 socket, number 359: {socket:?}"
        );
        for name in ["fork", "thread", "socket(AF_UNIX)", "personality(0xffffffff)"] {
            assert!(matches!(observe(find(name).unwrap()), Seen::Direct(Ok(_))), "{name}");
        }
    }

    #[test]
    fn a_filtered_call_is_attributed_to_the_filter() {
        // A child stands in for the sandbox: its filter refuses setns with
        // EPERM; the probe (a grandchild) must see the filter, not the kernel.
        let r = sys::ret_in_child(|| {
            let mut ctx = ScmpFilterContext::new(ScmpAction::Allow).unwrap();
            ctx.add_rule(
                ScmpAction::Errno(libc::EPERM),
                ScmpSyscall::from(libc::SYS_setns as i32),
            )
            .unwrap();
            ctx.load().unwrap();
            let seen = observe(find("setns").unwrap());
            Ok(i64::from(seen == Seen::Filtered(Errno::EPERM)))
        });
        assert_eq!(r, Ok(Ok(1)));
    }

    #[test]
    fn every_probe_passes_under_the_agent_profile_as_loaded() {
        // The agent profile as a sandbox gets it (guards, then libcontainer's
        // compiler), in a child standing in for the sandbox: every probe,
        // the int 0x80 ones included, must see what verify expects.
        let profile = claude_shim_bundle::seccomp::agent_profile();
        let expect = crate::verify::syscalls::expectations_for(&profile);
        let mut loaded = profile.clone();
        crate::runtime::guards::swap_masked_eq_operands(&mut loaded);
        let r = sys::in_child(|| {
            if let Err(e) = libcontainer::seccomp::initialize_seccomp(&loaded) {
                return format!("load the agent profile: {e}").into_bytes();
            }
            let mut failed = String::new();
            for (name, want) in &expect {
                let p = find(name).unwrap();
                let f = run(p, want);
                if f.pass != Some(true) {
                    failed.push_str(&format!("{name}: {}; ", f.observed));
                }
            }
            failed.into_bytes()
        });
        let (out, end) = r.unwrap();
        assert_eq!(end, End::Exited(0));
        assert_eq!(String::from_utf8_lossy(&out), "");
        assert!(expect.contains_key("socketcall(SYS_SOCKET) via int 0x80"));
    }
}
