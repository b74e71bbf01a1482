//! The metrics a run measures, as published: each one's title, unit, better
//! direction and exact definition, and the group `--metrics` selects it by.
//! The run asks here which groups to plan and which metrics to report.

use crate::claude;
use crate::results::{Better, MetricDef};
use crate::settings::Settings;

/// The metric groups `--metrics` selects.
pub const GROUPS: &[&str] = &[
    "cold_start",
    "cold_start_net",
    "syscall",
    "workload",
    "throughput",
    "memory",
    "start20",
    "policy_compile",
    "claude",
    "containment",
];

pub(crate) fn metric_defs(s: &Settings, bytes: u64) -> Vec<MetricDef> {
    let d = |id, title, unit, better, definition: &str| MetricDef {
        id,
        title,
        unit,
        better,
        definition: definition.to_owned(),
    };
    let mut v = vec![
        d("cold_start", "Cold start to exit of /bin/true", "ms", Better::Lower,
          "Wall time from the fork of the runtime's command to its exit. OCI runtimes: `RUNTIME run` of the shared bundle \
           (create, start, wait, delete) running /bin/true; bwrap: the seed's flags around /bin/true; sandbox: \
           `claude-shim sandbox -- /bin/true` with the shipped policy, in the generated source tree and (row 150k-file \
           tree) in a generated tree of 150,000 files in 1,650 directories with a few .env files (after the warm-up \
           round, as on an agent's second command); srt: `srt -s SETTINGS /bin/true` (Anthropic's sandbox-runtime, \
           Claude Code's own sandbox; its settings allow one domain and writes to the working directory); host: /bin/true itself."),
        d("cold_start_cpu", "CPU time of a cold start", "ms", Better::Lower,
          "User + system CPU time of the runtime's command and every process it waited for (getrusage RUSAGE_CHILDREN \
           around the sample); helpers that outlive it are not counted."),
        d("cold_start_net", "Cold start to exit of /bin/true, with networking", "ms", Better::Lower,
          "As cold start, with a network. claude-shim: the bundle with annotation run.claude-shim.network = MODE (its own \
           helpers included). runc/crun + pasta: the harness makes and pins a network namespace, attaches pasta \
           (--config-net, no ports, --no-map-gw) and runs the bundle in it; making the namespace, pasta's start and stop \
           are timed. runsc netstack: --network=sandbox in that namespace; runsc hostinet: --network=host started inside it."),
        d("cold_start_net_cpu", "CPU time of a cold start with networking", "ms", Better::Lower,
          "As the cold start's CPU time (the harness's own pasta is not its child and is not counted)."),
    ];
    let sys = |id: &'static str, what: &'static str| {
        d(id, what, "ns/call", Better::Lower,
          "The probe (static, bind-mounted) calls the syscall in growing batches for the budget and reports elapsed / calls, \
           timed inside the sandbox with the monotonic clock. Rows: without a seccomp filter, with the engines' default \
           profile (containers-common seccomp.json, resolved for amd64 and the bundle's capabilities; runsc applies it \
           with --oci-seccomp), with claude-shim's agent profile, and for bwrap with Claude Code's filter (AF_UNIX sockets denied).")
    };
    v.push(sys("syscall_getppid", "getppid()"));
    v.push(sys("syscall_stat", "stat(\"/usr/bin/true\")"));
    v.push(sys("syscall_open_close", "open(\"/usr/bin/true\") + close()"));
    v.push(sys("syscall_write_devnull", "write(1 byte) to /dev/null"));
    let wl = |id: &'static str, title: &'static str| {
        d(id, title, "ms", Better::Lower,
          "Wall time of the command alone, measured by the probe inside the sandbox (container start excluded), on the \
           generated tree bind-mounted read-write at the same path, with the same environment everywhere.")
    };
    v.push(wl("workload_git_status", "git status on the generated repository"));
    v.push(wl(
        "workload_git_log_stat",
        "git log --stat on the generated repository",
    ));
    v.push(wl("workload_gcc", "gcc -O2 -c of one generated C file"));
    v.push(wl("workload_find_grep", "find | xargs grep over a header tree"));
    v.push(wl("workload_make", "make -j2 of a small C project"));
    let mib = bytes / (1024 * 1024);
    let tput = format!(
        "{mib} MiB over one TCP connection, timed by the sender from its first byte to the receiver's acknowledgement. \
         The far end for container -> host is a veth peer namespace (10.123.N.2) the harness creates; for host -> container \
         the sender is on the host and reaches the container through pasta's forwarded port on 127.0.0.1. claude-shim \
         allowlist: through its proxy (HTTP CONNECT on 127.0.0.1:3128). Host floor: the same sender and receiver \
         without a sandbox (to the peer; over loopback)."
    );
    v.push(d(
        "tput_c2h",
        "Network throughput, container -> host",
        "Gbit/s",
        Better::Higher,
        &tput,
    ));
    v.push(d(
        "tput_h2c",
        "Network throughput, host -> container",
        "Gbit/s",
        Better::Higher,
        &tput,
    ));
    let mem = "One sandbox running sleep, 300 ms after start returned. Summed over the runtime-side processes: every \
               process that appeared since before create and either names the runtime's private state root or the \
               container id on its command line, or is a helper the runtime recorded (claude-shim's meta.json), or the \
               pasta the harness attached, or for bwrap its own bwrap processes; the container's own processes (its pid \
               namespace) are never counted, except for runsc, whose sentry runs the workload. From /proc/PID/smaps_rollup.";
    v.push(d(
        "memory_pss",
        "Runtime-side memory per running sandbox (PSS)",
        "MiB",
        Better::Lower,
        mem,
    ));
    v.push(d(
        "memory_rss",
        "Runtime-side memory per running sandbox (RSS)",
        "MiB",
        Better::Lower,
        mem,
    ));
    v.push(d("start20", "20 sandboxes at once", "ms", Better::Lower,
             "Wall time from the first of 20 concurrent `run`s of /bin/true (each its own container id) to the last one's exit."));
    v.push(d(
        "start20_cpu",
        "CPU time of 20 sandboxes at once",
        "ms",
        Better::Lower,
        "User + system CPU time of the 20 commands and the processes they waited for, together.",
    ));
    v.push(d(
        "policy_compile",
        "Compile of a policy with 20,000 protected paths",
        "ms",
        Better::Lower,
        "Wall time of `claude-shim bundle --policy P --workdir W` (compile and write the bundle), where P lists \
              20,000 paths under `filesystem.protected` and W holds every other one of them (each bound read-only; \
              the missing ones get stand-ins), in 200 directories.",
    ));
    v.push(d(
        "policy_compile_cpu",
        "CPU time of the compile of a policy with 20,000 protected paths",
        "ms",
        Better::Lower,
        "User + system CPU time of that command.",
    ));
    v.push(d(claude::METRIC, "One Bash tool call of Claude Code", "ms/call", Better::Lower,
             "The real `claude -p` against the harness's mock of the Messages API (loopback), which answers with Bash \
              tool_use blocks: one check call (the mount namespace must be the host's unsandboxed and another one in every \
              other row), then 5 calls of `true`, each timed from the last byte of the mock's tool_use answer to the arrival \
              of the request carrying its tool_result; Claude Code's own start-up is not counted. Claude Code's own sandbox: \
              `sandbox.enabled` and `autoAllowBashIfSandboxed` in its settings (bwrap, socat, ripgrep). claude-shim: \
              `claude-shim claude` (the whole agent in the agent policy's sandbox, API calls through its gateway) and \
              `--per-command` (claude on the host, each call through `claude-shim-shell` in the session's sandbox, made once)."));
    let groups = s.metrics.clone();
    v.retain(|m| groups.as_ref().is_none_or(|g| g.iter().any(|g| group_of(m.id) == g)));
    v
}

pub(crate) fn group_of(metric: &str) -> &str {
    if let Some(wall) = metric.strip_suffix("_cpu") {
        group_of(wall)
    } else if metric.starts_with("syscall_") {
        "syscall"
    } else if metric.starts_with("workload_") {
        "workload"
    } else if metric.starts_with("tput_") {
        "throughput"
    } else if metric.starts_with("memory_") {
        "memory"
    } else if metric.starts_with("claude_") {
        "claude"
    } else {
        metric
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn metric_groups() {
        assert_eq!(group_of("syscall_stat"), "syscall");
        assert_eq!(group_of("tput_h2c"), "throughput");
        assert_eq!(group_of("cold_start_net"), "cold_start_net");
        for g in GROUPS {
            assert!(
                metric_defs(
                    &Settings {
                        rounds: 1,
                        warmup: 1,
                        quick: true,
                        results: "r".into(),
                        work: "w".into(),
                        claude_shim: "c".into(),
                        agent_seccomp: "a".into(),
                        runtimes: None,
                        metrics: Some(vec![g.to_string()]),
                        runsc_platforms: vec![],
                        seed: 1,
                        readme: None,
                        timeout: Duration::from_secs(1),
                        verbose: false,
                    },
                    1
                )
                .iter()
                .all(|m| group_of(m.id) == *g),
                "{g}"
            );
        }
    }
}
