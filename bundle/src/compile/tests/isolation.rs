//! The kernel-isolation pass through whole compiles: namespaces and the user
//! namespace choice, resources, and the seccomp profile.

use oci_spec::runtime::LinuxNamespaceType;

use super::*;
use crate::seccomp::{self, Decision};

#[test]
fn namespaces_and_user_namespace_choice() {
    let types = |c: &Compiled| -> Vec<LinuxNamespaceType> {
        c.spec
            .linux()
            .as_ref()
            .unwrap()
            .namespaces()
            .iter()
            .flatten()
            .map(|n| n.typ())
            .collect()
    };
    use LinuxNamespaceType::*;
    let c = agent();
    assert_eq!(types(&c), [Pid, Network, Ipc, Uts, Mount, Cgroup, User]);
    assert!(c
        .spec
        .linux()
        .as_ref()
        .unwrap()
        .namespaces()
        .iter()
        .flatten()
        .all(|n| n.path().is_none()));
    let l = c.spec.linux().as_ref().unwrap();
    let uid = &l.uid_mappings().as_ref().unwrap()[0];
    assert_eq!((uid.container_id(), uid.host_id(), uid.size()), (0, 1000, 1));
    let gid = &l.gid_mappings().as_ref().unwrap()[0];
    assert_eq!((gid.container_id(), gid.host_id(), gid.size()), (0, 1000, 1));
    assert_eq!(c.spec.hostname().as_deref(), Some("sandbox"));

    let root = Invocation {
        unprivileged: false,
        uid: 0,
        gid: 0,
        ..inv()
    };
    let c = run(&Policy::embedded_default(), &FakeHost::typical(), &root);
    assert_eq!(types(&c), [Pid, Network, Ipc, Uts, Mount, Cgroup]);
    assert!(c.spec.linux().as_ref().unwrap().uid_mappings().is_none());
    let c = run(
        &policy("[identity]\nuser_namespace = \"always\""),
        &FakeHost::typical(),
        &root,
    );
    assert!(types(&c).contains(&User));
    let c = run(
        &policy("[identity]\nuser_namespace = \"never\""),
        &FakeHost::typical(),
        &root,
    );
    assert!(!types(&c).contains(&User));
    let e = error(
        &policy("[identity]\nuser_namespace = \"never\""),
        &FakeHost::typical(),
        &inv(),
    );
    assert!(
        e.starts_with("use policy test.toml: identity.user_namespace: \"never\" is refused when running unprivileged"),
        "{e}"
    );
}

#[test]
fn resources_and_best_effort() {
    let c = agent();
    let r = c.spec.linux().as_ref().unwrap().resources().as_ref().unwrap();
    assert_eq!(r.memory().as_ref().unwrap().limit(), Some(4 << 30));
    assert_eq!(r.pids().as_ref().unwrap().limit(), 4096);
    let cpu = r.cpu().as_ref().unwrap();
    assert_eq!((cpu.quota(), cpu.period()), (Some(200_000), Some(100_000)));
    assert!(r.devices().is_none());
    assert_eq!(annotation(&c, annotations::BEST_EFFORT_RESOURCES), None);
    assert!(c.spec.linux().as_ref().unwrap().cgroups_path().is_none());

    let c = run(
        &policy("[resources]\nmemory = \"512MiB\"\nbest_effort = true"),
        &FakeHost::typical(),
        &inv(),
    );
    let r = c.spec.linux().as_ref().unwrap().resources().as_ref().unwrap();
    assert_eq!(r.memory().as_ref().unwrap().limit(), Some(512 << 20));
    assert!(r.pids().is_none() && r.cpu().is_none());
    assert_eq!(annotation(&c, annotations::BEST_EFFORT_RESOURCES), Some("true"));
    assert_eq!(c.opt_outs, ["resources.best_effort = true"]);

    let c = run(&policy(""), &FakeHost::typical(), &inv());
    assert!(c.spec.linux().as_ref().unwrap().resources().is_none());

    let c = run(&Policy::embedded_offline(), &FakeHost::typical(), &inv());
    let rl = c.spec.process().as_ref().unwrap().rlimits().clone().unwrap();
    let rl: Vec<(String, u64, u64)> = rl.iter().map(|r| (r.typ().to_string(), r.soft(), r.hard())).collect();
    assert_eq!(
        rl,
        [
            ("RLIMIT_CORE".to_owned(), 0, 0),
            ("RLIMIT_NOFILE".to_owned(), 4096, 4096)
        ]
    );
}

#[test]
fn seccomp_is_the_agent_profile_plus_explicit_allows() {
    let c = agent();
    assert_eq!(
        c.spec.linux().as_ref().unwrap().seccomp().as_ref(),
        Some(&seccomp::agent_profile())
    );
    let c = run(&policy("[seccomp]\nallow = [\"ptrace\"]"), &FakeHost::typical(), &inv());
    let s = c.spec.linux().as_ref().unwrap().seccomp().clone().unwrap();
    assert_eq!(seccomp::decide(&s, "ptrace", [0; 6]), Decision::Allow);
    assert_eq!(seccomp::decide(&s, "mount", [0; 6]), Decision::Errno(1));
    assert_eq!(c.opt_outs, ["seccomp.allow: ptrace"]);

    let host = FakeHost::typical()
        .content("/etc/p.json", r#"{"defaultAction": "SCMP_ACT_LOG"}"#)
        .content("/etc/bad.json", "{");
    let c = run(&policy("[seccomp]\nprofile = \"/etc/p.json\""), &host, &inv());
    let s = c.spec.linux().as_ref().unwrap().seccomp().clone().unwrap();
    assert_eq!(s.default_action(), oci_spec::runtime::LinuxSeccompAction::ScmpActLog);
    assert_eq!(
        c.opt_outs,
        ["seccomp.profile: /etc/p.json (not the built-in agent profile)"]
    );
    let e = error(&policy("[seccomp]\nprofile = \"/etc/bad.json\""), &host, &inv());
    assert!(
        e.starts_with("use policy test.toml: seccomp.profile: /etc/bad.json is not an OCI LinuxSeccomp JSON"),
        "{e}"
    );
    let e = error(&policy("[seccomp]\nprofile = \"/etc/none.json\""), &host, &inv());
    assert!(
        e.starts_with("use policy test.toml: seccomp.profile: read /etc/none.json:"),
        "{e}"
    );
}
