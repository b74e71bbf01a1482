//! `claude-shim doctor`: asks the running machine, not its files, whether
//! claude-shim can do its work here, and prints one line per check with what
//! to do about it. A group of checks per file; each check is a real attempt
//! (create a user namespace, open /dev/net/tun, make a cgroup) where one is
//! cheap, so the answer is the kernel's, not a guess from configuration.

mod admin;
mod cgroup;
mod check;
mod claude_code;
mod engines;
mod kernel;
mod network;
mod review;

pub use check::{Check, Status};

/// What the caller asked `doctor` to try beyond the quick checks.
pub struct Options<'a> {
    /// Start a container through each engine that has claude-shim registered,
    /// from this image (which must already be in the engine's store).
    pub engine_image: Option<&'a str>,
}

/// Every check, in the order the lines are printed. The user namespace check
/// forks, so it runs first, while the process is sure to be single-threaded.
pub fn run(opts: &Options) -> Vec<Check> {
    let mut checks = Vec::new();
    checks.extend(kernel::checks());
    checks.extend(cgroup::checks());
    checks.extend(network::checks());
    checks.push(review::check());
    checks.push(admin::check());
    checks.extend(engines::checks(opts.engine_image));
    checks.extend(claude_code::checks());
    checks
}

/// 0 when nothing failed (warnings do not fail), 1 otherwise.
pub fn exit_code(checks: &[Check]) -> i32 {
    i32::from(checks.iter().any(|c| c.status == Status::Fail))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_says_status_name_found_and_fix_on_one_line() {
        let c = Check::fail("pasta /dev/net/tun", "open /dev/net/tun:\nmissing", "modprobe tun");
        assert_eq!(
            c.line(),
            "FAIL pasta /dev/net/tun: open /dev/net/tun: missing; fix: modprobe tun"
        );
        assert_eq!(Check::ok("seccomp", "available").line(), "ok   seccomp: available");
    }

    #[test]
    fn only_a_failed_check_fails_the_exit_code() {
        let warn = Check::warn("landlock", "not available", "add it to lsm=");
        assert_eq!(exit_code(&[Check::ok("a", "b"), warn]), 0);
        let fail = Check::fail("nft", "not found", "apt-get install nftables");
        assert_eq!(exit_code(&[Check::ok("a", "b"), fail]), 1);
    }
}
