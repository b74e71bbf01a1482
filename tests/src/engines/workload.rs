//! The ordinary workload whose view must not depend on the runtime, and the
//! comparison of that view under runc and under claude-shim.

/// What an ordinary workload sees, which must not depend on the runtime:
/// identity, limits, confinement, devices, mounts, links, whether its cgroup
/// limits can be raised, and loopback (the client retries until the
/// listener is up, and the listener's stdin stays open so that it reads the
/// message before it sees end of input: a slow machine loses nothing).
pub const WORKLOAD: &str = "id; hostname; pwd; echo $PATH; ulimit -n; \
    grep -E '^(Cap|NoNewPrivs|Seccomp:)' /proc/self/status; \
    ls /dev; cut -d' ' -f2,3 /proc/self/mounts | sort -u; \
    ip -o link | cut -d' ' -f2,3; \
    echo 50 > /sys/fs/cgroup/pids/pids.max 2>/dev/null && echo cgroup-writable || echo cgroup-read-only; \
    (sleep 10 | nc -l -p 5555 > /tmp/got &); i=0; \
    until echo over-loopback | nc 127.0.0.1 5555 2>/dev/null || [ $i -ge 50 ]; do i=$((i+1)); sleep 0.1; done; \
    i=0; until [ -s /tmp/got ] || [ $i -ge 50 ]; do i=$((i+1)); sleep 0.1; done; cat /tmp/got";

/// WORKLOAD's output under runc (`baseline`) and claude-shim (`ours`): lo up
/// and working, cgroups read-only, and the rest the same.
pub fn assert_workload_matches(baseline: &str, ours: &str) {
    assert!(ours.contains("lo: <LOOPBACK,UP,LOWER_UP>"), "lo is up:\n{ours}");
    assert!(ours.contains("over-loopback"), "127.0.0.1 works:\n{ours}");
    assert!(
        ours.contains("cgroup-read-only"),
        "cgroup limits cannot be raised:\n{ours}"
    );
    assert_eq!(baseline, ours, "runc (left) and claude-shim (right) differ");
}
