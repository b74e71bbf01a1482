//! git over SSH from an allowlist sandbox: the sandbox has no route out, and
//! the GIT_SSH_COMMAND the runtime sets sends ssh through the proxy, which
//! admits `ssh.test:22` only when the policy lists that port.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use claude_shim_e2e::*;

use crate::verify::{policy_file, workdir};
use crate::world::{sh, World};

/// dropbear in the world's gateway namespace at 198.20.123.2:22, in a mount
/// namespace of its own where a scratch directory stands over /root, so the
/// key it trusts is the test's and the host's /root is never written.
struct SshServer(Child);

impl SshServer {
    fn start(world: &World, dir: &Path, client_pub: &str) -> Self {
        let home = dir.join("server-root");
        fs::create_dir_all(home.join(".ssh")).unwrap();
        for d in [&home, &home.join(".ssh")] {
            fs::set_permissions(d, fs::Permissions::from_mode(0o700)).unwrap();
        }
        fs::write(home.join(".ssh/authorized_keys"), client_pub).unwrap();
        let script = format!(
            "mount --bind {home} /root && exec dropbear -F -E -s -p 198.20.123.2:22 -r {key}",
            home = home.display(),
            key = dir.join("host_key").display()
        );
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                world.gateway_ns(),
                "unshare",
                "-m",
                "--propagation",
                "private",
            ])
            .args(["sh", "-c", &script])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start dropbear (hack/setup installs dropbear-bin)");
        let server = SshServer(child);
        // Listening once the gateway namespace has a socket on :22.
        for _ in 0..100 {
            let ss = Command::new("ip")
                .args(["netns", "exec", world.gateway_ns(), "ss", "-Hltn", "sport = :22"])
                .output()
                .unwrap();
            if !ss.stdout.is_empty() {
                return server;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("dropbear did not listen on 198.20.123.2:22");
    }
}

impl Drop for SshServer {
    fn drop(&mut self) {
        // Our own child, by pid; dropbear's per-connection children end with their sessions.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn out_of(c: &mut Command) -> String {
    let o = c.output().unwrap();
    assert!(o.status.success(), "{c:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn git_clones_over_ssh_through_the_proxy_when_the_port_is_allowed() {
    let world = World::new();
    let env = Env::new();
    let dir = env.dir.path();
    // The repository, the server's host key, the client's key pair.
    let repo = dir.join("repo");
    sh(&["git", "init", "-q", "-b", "main", repo.to_str().unwrap()]);
    fs::write(repo.join("README"), "cloned over ssh\n").unwrap();
    let git = |args: &[&str]| {
        let mut c = Command::new("git");
        c.arg("-C")
            .arg(&repo)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args);
        out_of(&mut c)
    };
    git(&["add", "README"]);
    git(&["commit", "-q", "-m", "first"]);
    let host_key = dir.join("host_key");
    sh(&["dropbearkey", "-t", "ed25519", "-f", host_key.to_str().unwrap()]);
    let host_pub = out_of(Command::new("dropbearkey").args(["-y", "-f", host_key.to_str().unwrap()]));
    let host_pub = host_pub
        .lines()
        .find(|l| l.starts_with("ssh-ed25519 "))
        .expect("dropbearkey -y prints the key");
    let work = workdir(&env, "ssh-work");
    let id = work.join("id");
    sh(&[
        "ssh-keygen",
        "-q",
        "-t",
        "ed25519",
        "-N",
        "",
        "-f",
        id.to_str().unwrap(),
    ]);
    fs::write(work.join("known_hosts"), format!("ssh.test {host_pub}\n")).unwrap();
    let client_pub = fs::read_to_string(work.join("id.pub")).unwrap();
    let _server = SshServer::start(&world, dir, &client_pub);

    // The user's own options ride along after the runtime's ProxyCommand.
    let script = format!(
        "export GIT_SSH_COMMAND=\"$GIT_SSH_COMMAND -i $PWD/id -o UserKnownHostsFile=$PWD/known_hosts -o StrictHostKeyChecking=yes -o BatchMode=yes\"\n\
         echo \"command: $GIT_SSH_COMMAND\"\n\
         git clone -q root@ssh.test:{repo} clone 2>&1 && cat clone/README\n\
         echo \"status $?\"",
        repo = repo.display()
    );
    let run = |name: &str, allow: &str| {
        let policy = policy_file(&env, name, &format!("mode = \"allowlist\"\nallow = [{allow}]"));
        let out = world.sandbox_sh(&env, &policy, &work, &script);
        let _ = fs::remove_dir_all(work.join("clone"));
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };

    let allowed = run("ssh-allowed", "\"ssh.test:22\"");
    assert!(
        allowed.contains("ProxyCommand=/dev/.claude-shim-connect __connect %h %p"),
        "{allowed}"
    );
    assert!(
        allowed.contains("cloned over ssh\nstatus 0"),
        "git clone over ssh: {allowed}"
    );

    // The name on the list without the port: the web's ports only, and ssh
    // is told why in one line.
    let refused = run("ssh-refused", "\"ssh.test\"");
    assert!(!refused.contains("cloned over ssh"), "{refused}");
    assert!(
        refused.contains(
            "failed to reach ssh.test:22: the sandbox's network policy refuses it (allow it as ssh.test:22, or *:22"
        ),
        "{refused}"
    );
}
