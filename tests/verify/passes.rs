//! The hardened bundle passes every check, under claude-shim as under runc,
//! with cgroup hierarchies mounted read-only and with a terminal on stdin.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;

use claude_shim_e2e::*;
use serde_json::json;

use crate::expect::syscall_expectations;
use crate::host::{Host, PROBE_PATH};
use crate::run::{parse, seccomp_checks, under_runc, under_shim, verdict_differences};

#[test]
fn every_check_passes_under_claude_shim() {
    let host = Host::new();
    let bundle = host.bundle("hardened", |_| {});
    let run = under_shim(&host, &bundle);
    run.assert_all_pass("claude-shim");
    eprintln!("{}", run.table());
    let n_syscalls = syscall_expectations().len();
    assert_eq!(seccomp_checks(&run).len(), n_syscalls, "one result per syscall probe");
    // Spot checks of what passing means, so a PASS cannot come from nowhere.
    assert_eq!(run.get("syscall mount")["observed"], "EPERM (seccomp)");
    assert_eq!(
        run.get("syscall clone3")["observed"],
        "ENOSYS (seccomp, or not in this kernel)"
    );
    assert_eq!(run.get("syscall fork")["observed"], "succeeded");
    assert_eq!(
        run.get("nested user namespace chain")["observed"],
        "refused at unshare(NEWUSER|NEWNS): EPERM; file unchanged"
    );
    assert_eq!(run.get("read-only /work/.git/config")["observed"], "refused: EROFS");
    assert_eq!(
        run.get("hidden /root/.netrc")["observed"],
        "character device, reads empty"
    );
}

#[test]
fn runc_runs_the_same_bundle_the_same_way() {
    let host = Host::new();
    let bundle = host.bundle("runc", |_| {});
    let shim = under_shim(&host, &bundle);
    let runc = under_runc(&host, &bundle);
    shim.assert_all_pass("claude-shim");
    let differ = verdict_differences(&shim, &runc);
    assert!(differ.is_empty(), "claude-shim and runc differ:\n{}", differ.join("\n"));
    // The profile is in OCI semantics, value = mask (clone and unshare are
    // allowed when flags & 0x7E020080 == 0): runc reads it that way, and so
    // must claude-shim (guards.rs swaps the operands for libcontainer).
    assert_eq!(runc.pass("syscall personality(ADDR_NO_RANDOMIZE)"), Some(true));
    assert_eq!(runc.pass("syscall personality(0xffffffff)"), Some(true));
    assert_eq!(runc.pass("syscall unshare(CLONE_NEWUSER|1<<40)"), Some(true));
    assert_eq!(runc.pass("syscall fork"), Some(true));
    runc.assert_all_pass("runc");
}

/// The spec's own cgroup mount, "ro": runc mounts every v1 hierarchy
/// read-only; libcontainer 0.7 leaves them read-write, where a root process
/// creates cgroups (and could write its own limits), and claude-shim's guard
/// (guards::read_only_cgroup_v1) remounts them read-only. Both refuse with EROFS.
#[test]
fn cgroup_hierarchies_mounted_ro() {
    let host = Host::new();
    let controllers = ["memory", "pids"];
    for c in controllers {
        assert!(
            Path::new("/sys/fs/cgroup").join(c).is_dir(),
            "this test needs the cgroup v1 {c} hierarchy on the host"
        );
    }
    let mut exp = host.expectations();
    for c in controllers {
        exp["paths"]["read_only"]
            .as_array_mut()
            .unwrap()
            .push(json!({"path": format!("/sys/fs/cgroup/{c}"), "refused_with": ["EROFS"]}));
    }
    let exp = exp.to_string();
    let bundle = host.bundle("cgroup-ro", |v| {
        set_args(v, &[PROBE_PATH, "__probe", "--expect-json", &exp]);
        v["mounts"].as_array_mut().unwrap().push(json!({
            "destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
            "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]
        }));
    });
    let runc = under_runc(&host, &bundle);
    runc.assert_all_pass("runc");
    let shim = under_shim(&host, &bundle);
    shim.assert_all_pass("claude-shim");
    for c in controllers {
        let check = format!("read-only /sys/fs/cgroup/{c}");
        assert_eq!(runc.get(&check)["observed"], "refused: EROFS");
        assert_eq!(
            shim.get(&check)["observed"],
            "refused: EROFS",
            "{check} under claude-shim"
        );
    }
    let differ = verdict_differences(&shim, &runc);
    assert!(differ.is_empty(), "claude-shim / runc differ: {differ:?}");
}

#[test]
fn a_terminal_on_stdin_cannot_be_injected_into() {
    let host = Host::new();
    let bundle = host.bundle("tty", |_| {});
    let pty = nix::pty::openpty(None, None).unwrap();
    let id = unique_id("verify-tty");
    let out_path = host.env.dir.path().join("tty.out");
    let mut cmd = host.env.command(&["run", "--bundle", bundle.to_str().unwrap(), &id]);
    cmd.stdin(Stdio::from(pty.slave))
        .stdout(fs::File::create(&out_path).unwrap())
        .stderr(Stdio::piped());
    // SAFETY: setsid and ioctl are async-signal-safe; between fork and exec the
    // child makes the pty its controlling terminal, as a user's shell has.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid()?;
            if libc::ioctl(0, libc::TIOCSCTTY, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    host.env.assert_no_leaks(&id);
    let run = parse(&fs::read(&out_path).unwrap(), out.status.code(), &out.stderr);
    // The terminal is the runtime's controlling terminal; the sandbox must run
    // in a session of its own, where TIOCSTI on it is refused.
    let fd0 = run.get("TIOCSTI fd 0");
    assert_eq!(fd0["pass"], true, "{fd0}\n{}", run.table());
    assert_eq!(fd0["observed"], "refused: EPERM");
    run.assert_all_pass("claude-shim with a terminal on stdin");
    drop(pty.master);
}
