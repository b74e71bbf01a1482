//! Kubernetes without a cluster: the kubelet's CRI calls, made by a Rust CRI
//! client (tests/src/cri.rs) against a private containerd whose CRI plugin
//! has the `claude-shim` runtime handler of docs/kubernetes.md, with a local
//! pause image and CNI on a bridge that exists only for the test. Each test
//! ends by checking nothing is left: pods, containers, runtime state, shims,
//! cgroups, network namespaces, mounts, the bridge.

use std::time::{Duration, Instant};

use claude_shim_e2e::cri::{Cri, Pod};
use claude_shim_e2e::engines::{text, wait_until, IMAGE};
use k8s_cri::v1::{ContainerState, NamespaceMode};

/// An agent that ignores SIGTERM (StopContainer must fall back to SIGKILL).
const AGENT: &str = "trap '' TERM; echo ready > /tmp/ready; while :; do sleep 0.1; done";

fn exec(cri: &mut Cri, id: &str, script: &str) -> (i32, String, String) {
    let r = cri.exec_sync(id, &["sh", "-c", script]);
    (r.exit_code, text(&r.stdout), text(&r.stderr))
}

fn wait_ready(cri: &mut Cri, id: &str) {
    wait_until(Duration::from_secs(15), &format!("{id} to start"), || {
        (exec(cri, id, "cat /tmp/ready").0 == 0).then_some(())
    });
}

fn start_agent(cri: &mut Cri, pod: &Pod, name: &str) -> String {
    let id = cri.start(pod, name, &["sh", "-c", AGENT]);
    wait_ready(cri, &id);
    id
}

/// The pod's pause process, from PodSandboxStatus's verbose info.
fn pause_pid(cri: &mut Cri, pod: &Pod) -> i64 {
    let info = cri.pod_info(&pod.id);
    info["pid"].as_i64().unwrap_or_else(|| panic!("no pid in {info}"))
}

#[test]
fn agent_pod_under_the_admin_policy() {
    let mut cri = Cri::new(Some("version = 1\n"));
    assert_eq!(cri.version().runtime_name, "containerd");
    assert!(cri.image_present(IMAGE), "the test image is in the CRI's namespace");

    // The host's network: refused by the admin policy, the reason in the
    // CRI's error as the kubelet (and `kubectl describe pod`) would show it.
    let host = cri.pod_config("hostnet", &[], |s| {
        s.namespace_options.as_mut().unwrap().network = NamespaceMode::Node as i32;
    });
    let err = cri.run_pod(host).err().expect("a host-network pod is refused");
    assert!(
        err.message().contains("the host's net namespace is forbidden"),
        "the reason reaches the CRI: {}",
        err.message()
    );

    let pod = cri.run_pod(cri.pod_config("agent", &[], |_| {})).unwrap();
    let pause = pause_pid(&mut cri, &pod);
    let agent = start_agent(&mut cri, &pod, "agent");

    // ExecSync: the sandbox as the agent sees it. The CRI's spec gives the
    // container its default capabilities and no no_new_privileges; the admin
    // policy leaves none and stacks its seccomp filter.
    let (code, out, err) = exec(
        &mut cri,
        &agent,
        "grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; \
         for n in net ipc uts; do readlink /proc/self/ns/$n; done; \
         unshare -Ur id",
    );
    assert_eq!(code, 1, "unshare fails: {out}{err}");
    let mut want = "CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n".to_owned();
    // The agent joined the pod's namespaces (the pause container's).
    for ns in ["net", "ipc", "uts"] {
        let link = std::fs::read_link(format!("/proc/{pause}/ns/{ns}")).unwrap();
        want.push_str(&format!("{}\n", link.display()));
    }
    assert_eq!(out, want, "the agent's status and namespaces");
    assert!(
        err.contains("Operation not permitted"),
        "the nested user namespace is refused: {err}"
    );

    // ContainerStatus: exit codes.
    let three = cri.start(&pod, "exits", &["sh", "-c", "exit 3"]);
    let s = cri.wait_exited(&three);
    assert_eq!(s.exit_code, 3, "{s:?}");

    // StopContainer with a timeout: TERM is ignored, KILL follows.
    let t = Instant::now();
    cri.stop_container(&agent, 2);
    let waited = t.elapsed();
    let s = cri.container_status(&agent);
    assert_eq!(s.state, ContainerState::ContainerExited as i32, "{s:?}");
    assert_eq!(s.exit_code, 137, "killed after the timeout: {s:?}");
    assert!(
        waited >= Duration::from_secs(2),
        "StopContainer waited {waited:?} for TERM"
    );
    cri.remove_container(&agent);
    cri.remove_container(&three);
    cri.end_pod(&pod.id);

    // A privileged container: the CRI allows it only in a privileged pod;
    // its spec adds every host device, which the admin policy refuses.
    let config = cri.pod_config("privileged", &[], |s| s.privileged = true);
    match cri.run_pod(config) {
        Err(e) => panic!("a privileged pod's pause container: {}", e.message()),
        Ok(pod) => {
            let id = cri
                .create_container(&pod, "privileged", &["true"], |c| {
                    c.linux.as_mut().unwrap().security_context.as_mut().unwrap().privileged = true;
                })
                .unwrap();
            let err = cri.start_container(&id).expect_err("a privileged container is refused");
            assert!(
                err.message()
                    .contains("is forbidden: the admin policy allows no added devices"),
                "the reason reaches the CRI: {}",
                err.message()
            );
            cri.remove_container(&id);
            cri.end_pod(&pod.id);
        }
    }
    cri.finish();
}

#[test]
fn pod_annotation_tightens_the_network() {
    let mut cri = Cri::new(None);
    let server = cri.run_pod(cri.pod_config("server", &[], |_| {})).unwrap();
    cri.start(
        &server,
        "server",
        &["sh", "-c", "while :; do echo hi-from-server | nc -l -p 8080; done"],
    );
    let ip = cri.pod_ip(&server.id);
    assert!(
        ip.starts_with(&cri.subnet().rsplit_once('.').unwrap().0.to_owned()),
        "CNI gave the pod {ip} on the test bridge {}",
        cri.subnet()
    );
    let connect =
        format!("i=0; until nc -w 2 {ip} 8080 </dev/null; do i=$((i+1)); [ $i -lt 20 ] || exit 1; sleep 0.2; done");

    // Without the annotation the pod network works as CNI wired it.
    let open = cri.run_pod(cri.pod_config("open", &[], |_| {})).unwrap();
    let client = start_agent(&mut cri, &open, "client");
    let (code, out, err) = exec(&mut cri, &client, &connect);
    assert_eq!((code, out.as_str()), (0, "hi-from-server\n"), "{err}");

    // run.claude-shim.network=none on the pod: the same eth0, but only lo
    // passes (the filter is in the pod's namespace, which the container
    // cannot change without CAP_NET_ADMIN).
    let closed = cri
        .run_pod(cri.pod_config("closed", &[("run.claude-shim.network", "none")], |_| {}))
        .unwrap();
    let client = start_agent(&mut cri, &closed, "client");
    let (code, out, err) = exec(
        &mut cri,
        &client,
        &format!("ip -o link | cut -d' ' -f2 | cut -d@ -f1; nc -w 2 {ip} 8080 </dev/null; echo nc=$?"),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "lo:\neth0\nnc=1\n", "eth0 is there and filtered: {err}");
    let (code, _, err) = exec(&mut cri, &client, "ip link set eth0 down");
    assert!(code != 0 && err.contains("Operation not permitted"), "{code}: {err}");

    // StopPodSandbox stops the pod's containers itself.
    for pod in [closed, open, server] {
        cri.end_pod(&pod.id);
    }
    cri.finish();
}
