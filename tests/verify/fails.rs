//! Each defence removed in turn (seccomp, capabilities, no_new_privs, hidden
//! paths and sockets, namespaces, a read-only file): the checks of that
//! defence must fail.

use std::fs;

use serde_json::json;

use crate::expect::syscall_expectations;
use crate::host::Host;
use crate::run::{assert_fails, seccomp_checks, under_shim};

#[test]
fn without_seccomp_every_blocked_syscall_fails() {
    let host = Host::new();
    let bundle = host.bundle("no-seccomp", |v| {
        v["linux"].as_object_mut().unwrap().remove("seccomp");
    });
    let run = under_shim(&host, &bundle);
    assert_fails(
        &run,
        &[
            "status Seccomp",
            "nested user namespace chain",
            "cgroup release_agent (CVE-2022-0492)",
        ],
    );
    let expectations = syscall_expectations();
    for l in seccomp_checks(&run) {
        let probe = l["check"].as_str().unwrap().trim_start_matches("syscall ");
        let blocked_by_the_filter = expectations[probe].get("blocked").is_some();
        // Only what the filter alone refused now fails: allowed calls still
        // work, and raw sockets still meet the kernel's capability check.
        assert_eq!(
            l["pass"].as_bool(),
            Some(!blocked_by_the_filter),
            "{probe}: {l}\n{}",
            run.table()
        );
        if blocked_by_the_filter {
            // Unfiltered, the call reaches the kernel, which refuses it
            // harmlessly; a syscall this kernel lacks (no CONFIG_MODULES here)
            // answers ENOSYS, which no EPERM expectation accepts.
            let observed = l["observed"].as_str().unwrap();
            assert!(
                observed.starts_with("not filtered") || observed.starts_with("ENOSYS"),
                "{probe}: {observed}"
            );
        }
    }
    // The chain got further without the filter, and still the file is intact
    // (the read-only bind holds); under_shim checked it on the host.
    let chain = run.get("nested user namespace chain")["observed"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(chain.starts_with("unshare(NEWUSER|NEWNS): ok"), "{chain}");
    assert!(chain.ends_with("file unchanged"), "{chain}");
}

#[test]
fn cap_sys_admin_in_the_bounding_set_fails_the_caps_check() {
    let host = Host::new();
    let bundle = host.bundle("cap-bnd", |v| {
        v["process"]["capabilities"]["bounding"] = json!(["CAP_SYS_ADMIN"]);
    });
    let run = under_shim(&host, &bundle);
    assert_fails(&run, &["status CapBnd"]);
    assert_eq!(run.get("status CapBnd")["observed"], "0000000000200000");
    // no_new_privs still keeps an execve from gaining it.
    assert_eq!(run.pass("status CapEff"), Some(true));
    assert_eq!(run.pass("execve gains nothing"), Some(true));
}

#[test]
fn without_no_new_privileges_the_nnp_check_fails() {
    let host = Host::new();
    let bundle = host.bundle("no-nnp", |v| {
        v["process"].as_object_mut().unwrap().remove("noNewPrivileges");
    });
    let run = under_shim(&host, &bundle);
    assert_fails(&run, &["status NoNewPrivs"]);
    assert_eq!(run.get("status NoNewPrivs")["observed"], "0");
}

#[test]
fn without_no_new_privileges_an_execve_regains_the_bounding_set() {
    let host = Host::new();
    let bundle = host.bundle("no-nnp-cap", |v| {
        v["process"].as_object_mut().unwrap().remove("noNewPrivileges");
        v["process"]["capabilities"]["bounding"] = json!(["CAP_SYS_ADMIN"]);
    });
    let run = under_shim(&host, &bundle);
    assert_fails(&run, &["status NoNewPrivs", "status CapBnd", "execve gains nothing"]);
    let observed = run.get("execve gains nothing")["observed"].as_str().unwrap().to_owned();
    assert!(observed.contains("CapEff 0000000000200000"), "{observed}");
}

#[test]
fn exposed_secrets_and_sockets_fail() {
    let host = Host::new();
    let home = host.home.clone();
    let host_tmp = host.host_tmp.clone();
    let bundle = host.bundle("exposed", |v| {
        let mounts = v["mounts"].as_array_mut().unwrap();
        // The host's /tmp instead of a fresh tmpfs, and ~/.ssh bound in.
        mounts.retain(|m| m["destination"] != "/tmp");
        mounts.push(json!({"destination": "/tmp", "type": "bind", "source": host_tmp, "options": ["rbind", "rw"]}));
        mounts.push(json!({"destination": "/root/.ssh", "type": "bind", "source": home.join(".ssh"), "options": ["rbind", "ro"]}));
        v["process"]["env"].as_array_mut().unwrap().push(json!("GITHUB_TOKEN=ghp_secret"));
    });
    let run = under_shim(&host, &bundle);
    assert_fails(
        &run,
        &[
            "hidden /root/.ssh",
            "hidden /root/.ssh/id_ed25519",
            "hidden /tmp",
            "socket /tmp/vscode-ipc-test.sock",
            "env GITHUB_TOKEN absent",
            "env allow-list",
        ],
    );
    let table = run.table();
    assert!(
        !table.contains("SECRET-KEY") && !table.contains("ghp_secret"),
        "{table}"
    );
    assert_eq!(run.get("socket /tmp/vscode-ipc-test.sock")["observed"], "connected");
}

#[test]
fn shared_namespaces_fail() {
    let host = Host::new();
    let bundle = host.bundle("shared-ns", |v| {
        let keep = ["mount", "cgroup"];
        v["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .retain(|n| keep.contains(&n["type"].as_str().unwrap()));
        v.as_object_mut().unwrap().remove("hostname");
    });
    let run = under_shim(&host, &bundle);
    assert_fails(
        &run,
        &[
            "namespace pid",
            "namespace ipc",
            "namespace uts",
            "namespace net",
            "pid 1",
            "host pids invisible",
            "hostname",
            &format!("socket @{}", host.abstract_name),
            "network none",
        ],
    );
}

#[test]
fn a_writable_protected_file_fails() {
    let host = Host::new();
    let bundle = host.bundle("writable-git", |v| {
        v["mounts"]
            .as_array_mut()
            .unwrap()
            .retain(|m| m["destination"] != "/work/.git/config" && m["destination"] != "/work/.git/hooks");
    });
    let run = under_shim(&host, &bundle);
    assert_fails(&run, &["read-only /work/.git/config", "read-only /work/.git/hooks"]);
    assert_eq!(
        run.get("read-only /work/.git/config")["observed"],
        "writable: opened for writing (nothing written)"
    );
    assert_eq!(
        fs::read_dir(host.work.join(".git/hooks")).unwrap().count(),
        1,
        "nothing left behind"
    );
}
