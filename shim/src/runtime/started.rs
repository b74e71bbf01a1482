//! `start` returns once the container's process runs its own program, so a
//! signal sent right after `start` reaches that program. Until its `execve`,
//! the init is libcontainer's code under the name `youki:[2:INIT]`; as pid 1
//! of its namespace it would drop a signal it has no handler for (runc shows
//! the same race; the OCI spec leaves it open).

use std::time::{Duration, Instant};

/// libcontainer's name for the init before it executes the container's program.
const INIT_COMM: &str = "youki:[2:INIT]";

/// Whether `pid` still runs libcontainer's init code (not exited, not a zombie).
fn before_exec(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // "pid (comm) S ...": the comm may hold spaces and parentheses; the state follows the last ')'.
    let Some(close) = stat.rfind(')') else { return false };
    let state = stat[close + 1..].trim_start().chars().next();
    let comm = stat.find('(').map(|open| &stat[open + 1..close]);
    state != Some('Z') && comm == Some(INIT_COMM)
}

/// Waits until the init at `pid` has executed the container's program (or
/// ended). Bounded: a program that never comes is reported by the caller's
/// next look at the container, not by a hang here.
pub fn wait_for_exec(pid: i32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while before_exec(pid) {
        if Instant::now() >= deadline {
            return false;
        }
        // Short: the exec follows `start` within a millisecond or so, and
        // every microsecond slept past it is start-up time (a poll reads one
        // small /proc file).
        std::thread::sleep(Duration::from_micros(100));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_that_is_not_the_init_counts_as_started() {
        assert!(!before_exec(std::process::id() as i32));
        assert!(wait_for_exec(std::process::id() as i32, Duration::from_millis(1)));
        assert!(!before_exec(i32::MAX));
    }
}
