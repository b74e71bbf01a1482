//! `claude-shim doctor` on this machine (issue 26): every check prints its
//! line and the exit code is 0, as root and as the unprivileged test user;
//! with /dev/net/tun gone (in a private mount namespace) the pasta line fails
//! with its fix and the exit code is not 0.

use std::process::{Command, Output};

use claude_shim_e2e::engines::text;
use claude_shim_e2e::{command_as, require_root, shim_path, test_user};

/// One line per check, in the order doctor prints them (`claude code
/// settings` follows `claude code` when claude is installed, as hack/setup does).
const CHECKS: &[&str] = &[
    "user namespaces",
    "seccomp",
    "pidfd_open",
    "openat2",
    "idmapped mounts",
    "landlock",
    "cgroup version",
    "cgroup delegation",
    "pasta",
    "pasta /dev/net/tun",
    "nft",
    "review workspace",
    "admin policy",
    "podman",
    "docker",
    "containerd",
    "claude code",
    "claude code settings",
];

/// Each line's check name, after asserting its shape: `STATUS NAME: FOUND[; fix: WHAT]`.
fn names(out: &Output) -> Vec<String> {
    let stdout = text(&out.stdout);
    stdout
        .lines()
        .map(|l| {
            let (status, rest) = l.split_at(4);
            assert!(
                matches!(status, "ok  " | "warn" | "FAIL"),
                "line without a status: {l:?}"
            );
            let name = rest[1..].split(": ").next().unwrap_or_default().to_owned();
            if status != "ok  " {
                assert!(l.contains("; fix: "), "a {status} line without a fix: {l:?}");
            }
            name
        })
        .collect()
}

fn assert_all_ok(who: &str, out: &Output) {
    let stdout = text(&out.stdout);
    assert_eq!(
        names(out),
        CHECKS,
        "{who}: doctor's lines:\n{stdout}{}",
        text(&out.stderr)
    );
    assert!(
        !stdout.contains("\nFAIL") && !stdout.starts_with("FAIL"),
        "{who}: a check failed:\n{stdout}"
    );
    assert_eq!(out.status.code(), Some(0), "{who}: doctor's exit code:\n{stdout}");
}

#[test]
fn every_check_prints_a_line_and_this_machine_passes() {
    require_root();
    let out = Command::new(shim_path()).arg("doctor").output().unwrap();
    assert_all_ok("root", &out);

    let (uid, gid) = test_user();
    let mut c = command_as(Some((uid, gid)), &shim_path());
    // No home to lean on, but a state directory of the user's own: the
    // review workspace row writes through an overlay whose upper layer is there.
    let state = tempfile::Builder::new()
        .prefix("claude-shim-doctor-")
        .tempdir_in("/var/tmp")
        .unwrap();
    nix::unistd::chown(
        state.path(),
        Some(nix::unistd::Uid::from_raw(uid)),
        Some(nix::unistd::Gid::from_raw(gid)),
    )
    .unwrap();
    c.arg("doctor")
        .env("HOME", "/nonexistent")
        .env("XDG_STATE_HOME", state.path())
        .current_dir("/");
    let out = c.output().unwrap();
    assert_all_ok("claude-shim-test", &out);
    let userns = text(&out.stdout);
    assert!(
        userns.contains(&format!("mapped uid {uid}")),
        "the user namespace line: {userns}"
    );
}

#[test]
fn without_dev_net_tun_the_pasta_line_fails_with_its_fix() {
    require_root();
    // An empty tmpfs over /dev/net in a mount namespace of its own: no tun device there.
    let out = Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            "mount -t tmpfs none /dev/net && exec \"$0\" doctor",
        ])
        .arg(shim_path())
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(names(&out), CHECKS, "doctor's lines:\n{stdout}{}", text(&out.stderr));
    let tun = stdout.lines().find(|l| l.contains(" pasta /dev/net/tun: ")).unwrap();
    assert!(
        tun.starts_with("FAIL pasta /dev/net/tun: open /dev/net/tun: no such file or directory")
            || tun.starts_with("FAIL pasta /dev/net/tun: open /dev/net/tun: No such file or directory"),
        "{tun}"
    );
    assert!(
        tun.contains("; fix: modprobe tun") && tun.contains("mknod /dev/net/tun c 10 200"),
        "{tun}"
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "doctor's exit code with a failed check:\n{stdout}"
    );
}
