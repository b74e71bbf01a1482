//! hack/install as a user runs it (issue 26): the binary, man pages and
//! completions into a scratch prefix, the runtime registered with every
//! engine through the machine's real /etc files; each engine then runs a
//! container under the registered name, and `--uninstall` leaves every file
//! under the engines' configuration directories as it found them. A guard
//! uninstalls even when an assertion fails, since other test files run after.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use claude_shim_e2e::docker::Docker;
use claude_shim_e2e::engine_files::{assert_doctor_sees_registrations, assert_man_page, changed, snapshot};
use claude_shim_e2e::engines::{remove_cgroup_tree, text, Containerd, Podman, DEFAULT_ROOT, IMAGE};
use claude_shim_e2e::{assert_gone, output_of, require_root, shim_path, workspace};

/// A scratch prefix and install state; uninstalls on drop, whatever happened.
struct Installed {
    dir: tempfile::TempDir,
    uninstalled: bool,
}

impl Installed {
    fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("claude-shim-install-")
            .tempdir()
            .unwrap();
        let me = Installed {
            dir,
            uninstalled: false,
        };
        let out = output_of(me.script(&["--prefix", me.prefix().to_str().unwrap()]), me.dir.path());
        assert!(
            out.status.success(),
            "hack/install: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        me
    }
    fn prefix(&self) -> PathBuf {
        self.dir.path().join("prefix")
    }
    fn bin(&self) -> PathBuf {
        self.prefix().join("bin/claude-shim")
    }
    fn script(&self, args: &[&str]) -> Command {
        let mut c = Command::new(workspace().join("hack/install"));
        c.args(args)
            .env("CLAUDE_SHIM", shim_path())
            .env("CLAUDE_SHIM_INSTALL_STATE", self.dir.path().join("state"))
            .stdin(Stdio::null());
        c
    }
    fn uninstall(&mut self) -> std::process::Output {
        self.uninstalled = true;
        output_of(self.script(&["--uninstall"]), self.dir.path())
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        if !self.uninstalled {
            let out = self.uninstall();
            eprintln!(
                "hack/install --uninstall (after a failure): {}{}",
                text(&out.stdout),
                text(&out.stderr)
            );
        }
    }
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn install_registers_every_engine_and_uninstall_restores_their_files() {
    require_root();
    let before = snapshot();
    let mut inst = Installed::new();
    let bin = inst.bin();
    let bin_s = bin.to_str().unwrap();

    // Idempotent: a second run changes nothing.
    let first = snapshot();
    let again = output_of(
        inst.script(&["--prefix", inst.prefix().to_str().unwrap()]),
        inst.dir.path(),
    );
    assert!(again.status.success(), "second hack/install: {}", text(&again.stderr));
    assert_eq!(first.keys().collect::<Vec<_>>(), snapshot().keys().collect::<Vec<_>>());
    assert!(first == snapshot(), "a second hack/install changed the engines' files");

    // The man page of a verb, and bash completing `claude-shim sa`.
    assert_man_page(Some(&inst.prefix().join("share/man")));
    let completion = inst.prefix().join("share/bash-completion/completions/claude-shim");
    let bash = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {}; COMP_WORDS=(claude-shim sa); COMP_CWORD=1; COMP_LINE='claude-shim sa'; COMP_POINT=14; \
             _claude__shim claude-shim sa claude-shim; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            completion.display()
        ))
        .output()
        .unwrap();
    assert_eq!(
        text(&bash.stdout),
        "sandbox\n",
        "bash completion of `claude-shim sa`: {}",
        text(&bash.stderr)
    );
    for f in [
        "share/zsh/site-functions/_claude-shim",
        "share/fish/vendor_completions.d/claude-shim.fish",
    ] {
        let script = std::fs::read_to_string(inst.prefix().join(f)).unwrap();
        assert!(script.contains("sandbox"), "{f} does not complete sandbox");
    }

    // doctor, from the installed binary, sees each registration.
    let _ = assert_doctor_sees_registrations(bin_s);

    // podman with the machine's containers.conf and so the drop-in (podman
    // reads no drop-in when CONTAINERS_CONF is set), storage kept private.
    let podman = Podman::new();
    let d = podman.dir.path();
    let cidfile = d.join("installed.cid");
    let mut c = Command::new("podman");
    c.env_remove("CONTAINERS_CONF")
        .env("CONTAINERS_STORAGE_CONF", d.join("storage.conf"))
        .current_dir(d)
        .args(["--tmpdir", d.join("tmp").to_str().unwrap()])
        .args(["--network-config-dir", d.join("net").to_str().unwrap()])
        .args(["--events-backend", "file", "--cgroup-manager", "cgroupfs"])
        .args([
            "run",
            "--rm",
            "--runtime",
            "claude-shim",
            "--pull=never",
            "--network=none",
        ])
        .arg(format!("--cidfile={}", cidfile.display()))
        .arg(format!("--cgroup-parent={}", podman.cgroup_parent))
        .args(["--ulimit", "nofile=20000:20000", "--ulimit", "nproc=32768:32768"])
        .args([IMAGE, "echo", "podman ran it"]);
    let out = output_of(c, d);
    assert_eq!(
        text(&out.stdout),
        "podman ran it\n",
        "podman run --runtime claude-shim: {}",
        text(&out.stderr)
    );
    let cid = std::fs::read_to_string(&cidfile).unwrap();
    assert_gone(Path::new(DEFAULT_ROOT), cid.trim());
    // One container through the private configuration as well, so that the
    // harness's end check (it reads that configuration's event log) has one.
    let out = podman.run_container("run", "claude-shim", &["--rm", IMAGE, "true"]);
    assert!(
        out.status.success(),
        "podman run (private configuration): {}",
        text(&out.stderr)
    );
    podman.finish();

    // Docker: a private dockerd whose runtimes are /etc/docker/daemon.json's.
    let docker = Docker::with_runtimes_from(Path::new("/etc/docker/daemon.json"));
    let runtimes = docker.ok(&["info", "--format", "{{json .Runtimes}}"]);
    assert!(runtimes.contains(bin_s), "docker info runtimes: {runtimes}");
    let out = docker.run(&[
        "run",
        "--rm",
        "--runtime",
        "claude-shim",
        IMAGE,
        "echo",
        "docker ran it",
    ]);
    assert_eq!(
        text(&out.stdout),
        "docker ran it\n",
        "docker run --runtime claude-shim: {}",
        text(&out.stderr)
    );

    // containerd: the machine's config imports the drop-in; ctr names the binary.
    let dump = Command::new("containerd")
        .args(["--config", "/etc/containerd/config.toml", "config", "dump"])
        .output()
        .unwrap();
    let dump = text(&dump.stdout);
    assert!(
        dump.contains("runtimes.claude-shim]") && dump.contains(&format!("BinaryName = \"{bin_s}\"")),
        "containerd config dump lacks the runtime claude-shim:\n{dump}"
    );
    let ctr = Containerd::new();
    let id = ctr.new_id("install");
    let out = ctr.run_container(
        bin_s,
        &["--rm", "--runtime", "io.containerd.runc.v2"],
        &id,
        &["echo", "ctr ran it"],
    );
    assert_eq!(
        text(&out.stdout),
        "ctr ran it\n",
        "ctr run --runc-binary {bin_s}: {}",
        text(&out.stderr)
    );

    doctor_engines(&bin, &docker, &ctr);
    ctr.finish();
    docker.finish();

    let out = inst.uninstall();
    assert!(out.status.success(), "hack/install --uninstall: {}", text(&out.stderr));
    let changed = changed(&before, &snapshot());
    assert!(
        changed.is_empty(),
        "uninstall left these different from before install: {changed:?}"
    );
    let left = files_under(&inst.prefix());
    assert!(left.is_empty(), "uninstall left files in the prefix: {left:?}");
    assert!(
        !inst.dir.path().join("state").exists(),
        "uninstall left its state directory"
    );
}

/// `doctor --engines IMAGE` from the installed binary, reaching the private
/// dockerd and containerd through the variables their clients read
/// (DOCKER_HOST, CONTAINERD_ADDRESS): an ok line for each container started.
/// Then, with claude-shim's entry taken out of daemon.json and no dockerd to
/// ask, the docker line fails with its fix. (podman's run line is the VM
/// lane's: podman's default rlimits fail on this machine, docs/engines.md.)
fn doctor_engines(bin: &Path, docker: &Docker, ctr: &Containerd) {
    let ctr_socket = ctr.dir.path().join("containerd.sock");
    // ctr gives containers of the default namespace the cgroup /default/ID.
    let had_default_cgroup = Path::new("/sys/fs/cgroup/memory/default").exists();
    let doctor = |docker_host: &str| {
        Command::new(bin)
            .args(["doctor", "--engines", IMAGE])
            .env("DOCKER_HOST", docker_host)
            .env("DOCKER_CONFIG", docker.dir.path().join("cli"))
            .env("CONTAINERD_ADDRESS", &ctr_socket)
            .env_remove("CONTAINERD_NAMESPACE")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = doctor(&docker.socket());
    let report = text(&out.stdout);
    let line = |prefix: &str| {
        report
            .lines()
            .find(|l| l[4..].starts_with(prefix))
            .unwrap_or_default()
            .to_owned()
    };
    let bin_s = bin.to_str().unwrap();
    let want_docker =
        format!("ok   docker run: docker run --rm --runtime claude-shim --network none {IMAGE} true exited 0");
    assert_eq!(line(" docker run: "), want_docker, "{report}{}", text(&out.stderr));
    let ctr_line = line(" ctr run: ");
    assert!(
        ctr_line.starts_with(&format!("ok   ctr run: ctr run --rm --runc-binary {bin_s} {IMAGE} "))
            && ctr_line.ends_with(" true exited 0"),
        "{ctr_line:?}\n{report}{}",
        text(&out.stderr)
    );
    if !had_default_cgroup {
        let left = remove_cgroup_tree("/default");
        assert!(left.is_empty(), "ctr run's cgroups left behind: {left:?}");
    }

    // The registration taken out, as a user editing daemon.json would; put back after.
    let daemon_json = Path::new("/etc/docker/daemon.json");
    let installed = std::fs::read(daemon_json).unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&installed).unwrap();
    v["runtimes"].as_object_mut().unwrap().remove("claude-shim");
    std::fs::write(daemon_json, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let nowhere = format!("unix://{}", ctr.dir.path().join("no-dockerd.sock").display());
    let out = doctor(&nowhere);
    std::fs::write(daemon_json, &installed).unwrap();
    let report = text(&out.stdout);
    let docker_line = report
        .lines()
        .find(|l| l[4..].starts_with(" docker: "))
        .unwrap_or_default();
    assert_eq!(
        docker_line,
        "FAIL docker: no runtime claude-shim in /etc/docker/daemon.json (dockerd is not running); \
         fix: run hack/install (it registers claude-shim with every engine it finds)",
        "{report}"
    );
    assert!(
        !report.contains(" docker run: "),
        "a docker run without the registration:\n{report}"
    );
    assert_eq!(out.status.code(), Some(1), "doctor's exit code with a FAIL:\n{report}");
    if !had_default_cgroup {
        remove_cgroup_tree("/default");
    }
}
