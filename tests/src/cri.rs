//! Harness for the Kubernetes test: a private containerd with its CRI plugin
//! (`hack/containerd cri`: the claude-shim runtime handler, a local pause
//! image, CNI on a test-only bridge), and a CRI client (the `k8s-cri` crate's
//! tonic client over containerd's unix socket) that makes the kubelet's calls.
//! At the end it checks that nothing is left: pods, containers, runtime state,
//! shims, cgroups, network namespaces, mounts, the bridge.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use k8s_cri::v1::image_service_client::ImageServiceClient;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::*;
use tonic::transport::{Channel, Endpoint};

use crate::engines::{
    assert_nothing_left, daemon_leaks, entries, remove_cgroup_tree, stop_daemon, tear_down, text, write_admin_policy,
    ADMIN_POLICY_ENV, IMAGE,
};
use crate::{rootfs, shim_path, workspace};

/// The runtime handler of docs/kubernetes.md, which a RuntimeClass names.
pub const HANDLER: &str = "claude-shim";

/// One containerd at a time: shims put their sockets under /run/containerd/s,
/// and the leftover check looks there.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// What the kubelet would hold: a connection to the CRI, and the private
/// containerd behind it.
pub struct Cri {
    pub dir: tempfile::TempDir,
    pub cgroup_parent: String,
    rt: tokio::runtime::Runtime,
    runtime: RuntimeServiceClient<Channel>,
    image: ImageServiceClient<Channel>,
    bridge: String,
    shim_sockets_before: Vec<PathBuf>,
    netns_before: Vec<PathBuf>,
    finished: bool,
    _serial: std::sync::MutexGuard<'static, ()>,
}

/// A pod's handle: its id and the config it was created with (CreateContainer
/// takes both).
pub struct Pod {
    pub id: String,
    pub config: PodSandboxConfig,
}

impl Cri {
    /// A containerd whose claude-shim applies the admin policy `admin`, if any.
    pub fn new(admin: Option<&str>) -> Self {
        crate::require_root();
        let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let shim_sockets_before = entries(Path::new("/run/containerd/s"));
        let netns_before = entries(Path::new("/run/netns"));
        let dir = tempfile::Builder::new().prefix("claude-shim-cri-").tempdir().unwrap();
        let mut c = Command::new(workspace().join("hack/containerd"));
        c.arg("cri")
            .arg(dir.path())
            .env("CLAUDE_SHIM", shim_path())
            .env("CLAUDE_SHIM_ROOTFS", rootfs())
            .env_remove(ADMIN_POLICY_ENV)
            .stdin(Stdio::null());
        if let Some(toml) = admin {
            c.env(ADMIN_POLICY_ENV, write_admin_policy(dir.path(), toml));
        }
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "hack/containerd cri {}: {}{}",
            dir.path().display(),
            text(&out.stdout),
            text(&out.stderr)
        );
        let sock = dir.path().join("containerd.sock");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let channel = rt
            .block_on(
                Endpoint::from_static("http://localhost").connect_with_connector(tower::service_fn(
                    move |_: tonic::transport::Uri| {
                        let sock = sock.clone();
                        async move {
                            let stream = tokio::net::UnixStream::connect(sock).await?;
                            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
                        }
                    },
                )),
            )
            .expect("connect to containerd's CRI socket");
        let name = dir.path().file_name().unwrap().to_string_lossy().into_owned();
        let bridge = std::fs::read_to_string(dir.path().join("cni-bridge"))
            .unwrap()
            .trim()
            .to_owned();
        Self {
            bridge,
            cgroup_parent: format!("/{name}"),
            runtime: RuntimeServiceClient::new(channel.clone()),
            image: ImageServiceClient::new(channel),
            rt,
            dir,
            shim_sockets_before,
            netns_before,
            finished: false,
            _serial: serial,
        }
    }

    /// The CNI subnet of this containerd's bridge.
    pub fn subnet(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("cni-subnet"))
            .unwrap()
            .trim()
            .to_owned()
    }

    fn call<T>(
        &mut self,
        f: impl FnOnce(
            &mut RuntimeServiceClient<Channel>,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>> + '_>,
        >,
    ) -> Result<T, tonic::Status> {
        let runtime = &mut self.runtime;
        self.rt.block_on(f(runtime)).map(tonic::Response::into_inner)
    }

    pub fn version(&mut self) -> VersionResponse {
        self.call(|c| Box::pin(c.version(VersionRequest::default()))).unwrap()
    }

    /// The image the kubelet would check before creating a container.
    pub fn image_present(&mut self, name: &str) -> bool {
        let req = ImageStatusRequest {
            image: Some(ImageSpec {
                image: name.to_owned(),
                ..Default::default()
            }),
            verbose: false,
        };
        let image = &mut self.image;
        self.rt
            .block_on(image.image_status(req))
            .unwrap()
            .into_inner()
            .image
            .is_some()
    }

    /// A pod config as the kubelet writes it: metadata, hostname, the
    /// test's cgroup parent, `annotations`, and `edit` for the rest.
    pub fn pod_config(
        &self,
        name: &str,
        annotations: &[(&str, &str)],
        edit: impl FnOnce(&mut LinuxSandboxSecurityContext),
    ) -> PodSandboxConfig {
        let mut security = LinuxSandboxSecurityContext {
            namespace_options: Some(NamespaceOption {
                network: NamespaceMode::Pod as i32,
                pid: NamespaceMode::Container as i32,
                ipc: NamespaceMode::Pod as i32,
                ..Default::default()
            }),
            ..Default::default()
        };
        edit(&mut security);
        PodSandboxConfig {
            metadata: Some(PodSandboxMetadata {
                name: name.to_owned(),
                uid: format!("uid-{name}-{}", std::process::id()),
                namespace: "agents".to_owned(),
                attempt: 0,
            }),
            hostname: name.to_owned(),
            annotations: annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            linux: Some(LinuxPodSandboxConfig {
                cgroup_parent: self.cgroup_parent.clone(),
                security_context: Some(security),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// RunPodSandbox with the claude-shim runtime handler.
    pub fn run_pod(&mut self, config: PodSandboxConfig) -> Result<Pod, tonic::Status> {
        let req = RunPodSandboxRequest {
            config: Some(config.clone()),
            runtime_handler: HANDLER.to_owned(),
        };
        let id = self.call(|c| Box::pin(c.run_pod_sandbox(req)))?.pod_sandbox_id;
        Ok(Pod { id, config })
    }

    /// CreateContainer of the test image running `cmd`, with `edit` for the
    /// rest of the config.
    pub fn create_container(
        &mut self,
        pod: &Pod,
        name: &str,
        cmd: &[&str],
        edit: impl FnOnce(&mut ContainerConfig),
    ) -> Result<String, tonic::Status> {
        let mut config = ContainerConfig {
            metadata: Some(ContainerMetadata {
                name: name.to_owned(),
                attempt: 0,
            }),
            image: Some(ImageSpec {
                image: IMAGE.to_owned(),
                ..Default::default()
            }),
            command: cmd.iter().map(|s| s.to_string()).collect(),
            linux: Some(LinuxContainerConfig {
                security_context: Some(LinuxContainerSecurityContext {
                    namespace_options: pod
                        .config
                        .linux
                        .as_ref()
                        .and_then(|l| l.security_context.as_ref())
                        .and_then(|s| s.namespace_options.clone()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        edit(&mut config);
        let req = CreateContainerRequest {
            pod_sandbox_id: pod.id.clone(),
            config: Some(config),
            sandbox_config: Some(pod.config.clone()),
        };
        Ok(self.call(|c| Box::pin(c.create_container(req)))?.container_id)
    }

    pub fn start_container(&mut self, id: &str) -> Result<(), tonic::Status> {
        let req = StartContainerRequest {
            container_id: id.to_owned(),
        };
        self.call(|c| Box::pin(c.start_container(req))).map(drop)
    }

    /// CreateContainer then StartContainer; panics on an error.
    pub fn start(&mut self, pod: &Pod, name: &str, cmd: &[&str]) -> String {
        let id = self.create_container(pod, name, cmd, |_| {}).unwrap();
        self.start_container(&id).unwrap();
        id
    }

    pub fn exec_sync(&mut self, id: &str, cmd: &[&str]) -> ExecSyncResponse {
        let req = ExecSyncRequest {
            container_id: id.to_owned(),
            cmd: cmd.iter().map(|s| s.to_string()).collect(),
            timeout: 20,
        };
        self.call(|c| Box::pin(c.exec_sync(req))).unwrap()
    }

    pub fn container_status(&mut self, id: &str) -> ContainerStatus {
        let req = ContainerStatusRequest {
            container_id: id.to_owned(),
            verbose: false,
        };
        self.call(|c| Box::pin(c.container_status(req)))
            .unwrap()
            .status
            .unwrap()
    }

    /// Polls ContainerStatus until the container has exited; its status.
    pub fn wait_exited(&mut self, id: &str) -> ContainerStatus {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let s = self.container_status(id);
            if s.state == ContainerState::ContainerExited as i32 {
                return s;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "container {id} never exited: {s:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    pub fn stop_container(&mut self, id: &str, timeout: i64) {
        let req = StopContainerRequest {
            container_id: id.to_owned(),
            timeout,
        };
        self.call(|c| Box::pin(c.stop_container(req))).unwrap();
    }

    pub fn remove_container(&mut self, id: &str) {
        let req = RemoveContainerRequest {
            container_id: id.to_owned(),
        };
        self.call(|c| Box::pin(c.remove_container(req))).unwrap();
    }

    /// PodSandboxStatus's verbose info (containerd puts the pause pid there).
    pub fn pod_info(&mut self, id: &str) -> serde_json::Value {
        let req = PodSandboxStatusRequest {
            pod_sandbox_id: id.to_owned(),
            verbose: true,
        };
        let info: HashMap<String, String> = self.call(|c| Box::pin(c.pod_sandbox_status(req))).unwrap().info;
        serde_json::from_str(info.get("info").expect("verbose info")).unwrap()
    }

    /// The pod's IP address, which CNI gave it.
    pub fn pod_ip(&mut self, id: &str) -> String {
        let req = PodSandboxStatusRequest {
            pod_sandbox_id: id.to_owned(),
            verbose: false,
        };
        let status = self
            .call(|c| Box::pin(c.pod_sandbox_status(req)))
            .unwrap()
            .status
            .unwrap();
        status.network.expect("the pod's network status").ip
    }

    /// StopPodSandbox then RemovePodSandbox, as the kubelet ends a pod.
    pub fn end_pod(&mut self, id: &str) {
        let req = StopPodSandboxRequest {
            pod_sandbox_id: id.to_owned(),
        };
        self.call(|c| Box::pin(c.stop_pod_sandbox(req))).unwrap();
        let req = RemovePodSandboxRequest {
            pod_sandbox_id: id.to_owned(),
        };
        self.call(|c| Box::pin(c.remove_pod_sandbox(req))).unwrap();
    }

    /// Asserts the CRI and claude-shim left nothing: no pod or container in
    /// the CRI's lists, no runtime state, then (containerd stopped) no shim,
    /// socket, mount, network namespace, bridge or cgroup.
    pub fn finish(mut self) {
        let pods = self
            .call(|c| Box::pin(c.list_pod_sandbox(ListPodSandboxRequest::default())))
            .unwrap()
            .items;
        assert!(pods.is_empty(), "ListPodSandbox lists pods left behind: {pods:?}");
        let containers = self
            .call(|c| Box::pin(c.list_containers(ListContainersRequest::default())))
            .unwrap()
            .containers;
        assert!(
            containers.is_empty(),
            "ListContainers lists containers left behind: {containers:?}"
        );
        // The runc v2 shim runs the runtime with --root <Root>/<namespace>.
        // Containers only: the root also holds claude-shim's own .claude-shim.
        let state: Vec<PathBuf> = entries(&self.dir.path().join("claude-shim/k8s.io"))
            .into_iter()
            .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
            .collect();
        assert!(state.is_empty(), "claude-shim state left behind: {state:?}");
        self.stop();
        let dir = self.dir.path();
        let mut leaks = daemon_leaks(dir, &self.shim_sockets_before);
        leaks.extend(
            entries(Path::new("/run/netns"))
                .into_iter()
                .filter(|n| !self.netns_before.contains(n) && n.to_string_lossy().contains("/cni-"))
                .map(|n| format!("network namespace {}", n.display())),
        );
        leaks.extend(remove_cgroup_tree(&self.cgroup_parent));
        let bridge = Command::new("ip")
            .args(["-o", "link", "show", "type", "bridge"])
            .output()
            .unwrap();
        leaks.extend(
            text(&bridge.stdout)
                .lines()
                .filter(|l| l.contains(&format!(" {}:", self.bridge)))
                .map(|l| format!("bridge {l}")),
        );
        assert_nothing_left("the CRI", dir, &leaks);
        self.finished = true;
    }

    fn stop(&self) {
        stop_daemon("containerd", self.dir.path());
    }
}

impl Drop for Cri {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        // A failed test: remove what can be removed so later tests start clean
        // (the CRI's own network namespaces and mounts go with its pods).
        if let Ok(pods) = self.call(|c| Box::pin(c.list_pod_sandbox(ListPodSandboxRequest::default()))) {
            for p in pods.items {
                let req = StopPodSandboxRequest {
                    pod_sandbox_id: p.id.clone(),
                };
                let _ = self.call(|c| Box::pin(c.stop_pod_sandbox(req)));
                let req = RemovePodSandboxRequest { pod_sandbox_id: p.id };
                let _ = self.call(|c| Box::pin(c.remove_pod_sandbox(req)));
            }
        }
        tear_down("containerd", self.dir.path(), &self.cgroup_parent);
    }
}
