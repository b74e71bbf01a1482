//! `--publish HOSTPORT:PORT`: a server the sandbox runs is reached from the
//! host at 127.0.0.1:HOSTPORT in every network mode, and nowhere else; a
//! taken port refuses the sandbox in one line; from inside, publishing
//! opens no way out (the egress checks of sandbox.rs pass with it on).

use std::fs;
use std::process::{Command, Stdio};

use claude_shim_e2e::*;

use crate::allow::{spawn_sandbox, wait_for, AWAIT, WAIT_FILE};
use crate::verify::{policy_file, workdir};
use crate::world::{output_of, World};

/// A port nobody listens on in a fresh namespace (the world's host has only
/// 18080): from the kernel, in the test's own namespace.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `curl URL` on the world's host, the side the user is on.
fn host_curl(world: &World, env: &Env, url: &str) -> String {
    let mut c = Command::new("curl");
    c.args(["-s", "--max-time", "5", url]);
    let out = output_of(world.wrap(c), env.dir.path());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn serve_and_reach(env: &Env, world: &World, mode: &str) {
    let name = format!("pub-{mode}-{}", if env.as_user.is_some() { "user" } else { "root" });
    let network = match mode {
        "allowlist" => "mode = \"allowlist\"\nallow = [\"pub.test\"]",
        m => &format!("mode = \"{m}\""),
    };
    let host_port = free_port();
    let publish = format!("{host_port}:8000");
    // In public mode the policy publishes it (`network.publish`), elsewhere `--publish`.
    let (network, flag) = match mode {
        "public" => (format!("{network}\npublish = [\"{publish}\"]"), None),
        _ => (network.to_owned(), Some(publish.as_str())),
    };
    let policy = policy_file(env, &name, &network);
    let work = workdir(env, &name);
    let xdg = workdir(env, &format!("{name}-state"));
    fs::write(work.join("hello.txt"), format!("hello from {name}\n")).unwrap();
    // The server, and from inside: the host's side of the port is not there.
    let script = format!(
        "{WAIT_FILE}
         python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &
         n=0; until curl -s -o /dev/null http://127.0.0.1:8000/; do n=$((n+1)); [ $n -lt 300 ] || exit 3; sleep 0.1; done
         echo \"inside $(curl -s -o /dev/null -w '%{{http_code}}' --noproxy '*' --max-time 3 http://127.0.0.1:{host_port}/)\" > out
         echo \"egress $(curl -s -o /dev/null -w '%{{http_code}}' --noproxy '*' --max-time 3 http://10.123.0.2:18080/)\" >> out
         touch ready; wait_file stop; kill $!"
    );
    let (p, w) = (policy.to_str().unwrap(), work.to_str().unwrap());
    let err = env.dir.path().join(format!("{name}.err"));
    let mut args = vec!["sandbox", "--policy", p, "--workdir", w];
    if let Some(f) = flag {
        args.extend(["--publish", f]);
    }
    args.extend(["--", "sh", "-c", &script]);
    let mut sandbox = spawn_sandbox(world, env, &xdg, &args, &err);
    wait_for(&work, "ready", &mut sandbox, &err);
    let got = host_curl(world, env, &format!("http://127.0.0.1:{host_port}/hello.txt"));
    // The world's host address: no listener there.
    let other = host_curl(world, env, &format!("http://10.123.0.2:{host_port}/hello.txt"));
    fs::write(work.join("stop"), "").unwrap();
    let status = sandbox.wait(AWAIT);
    let inside = fs::read_to_string(work.join("out")).unwrap_or_default();
    eprintln!("{name}: curl 127.0.0.1:{host_port} on the host: {got:?}; 10.123.0.2:{host_port}: {other:?}; inside: {inside:?}");
    assert!(
        status.success(),
        "{name}: {}",
        fs::read_to_string(&err).unwrap_or_default()
    );
    assert_eq!(
        got,
        format!("hello from {name}\n"),
        "{name}: the host reaches the server"
    );
    assert_eq!(other, "", "{name}: 127.0.0.1 only");
    assert!(
        inside.contains("inside 000\n"),
        "{name}: nothing of the host at {host_port} inside: {inside}"
    );
    // The published port opens no way out: a direct connection to the
    // world's host stays refused where the mode refuses it.
    if mode != "public" {
        assert!(inside.contains("egress 000\n"), "{name}: {inside}");
    }
}

#[test]
fn a_published_port_is_reached_from_the_host_in_every_mode() {
    let world = World::new();
    let env = Env::new();
    for mode in ["none", "allowlist", "public"] {
        serve_and_reach(&env, &world, mode);
    }
    let (uid, gid) = test_user();
    let user = Env::as_user(uid, gid);
    for mode in ["none", "allowlist"] {
        serve_and_reach(&user, &world, mode);
    }
}

/// The world's host serves 0.0.0.0:18080: publishing there refuses the
/// sandbox before it runs, in one line naming the port.
#[test]
fn a_taken_port_refuses_the_sandbox() {
    let world = World::new();
    let env = Env::new();
    let work = workdir(&env, "pub-taken");
    let policy = policy_file(&env, "pub-taken", "mode = \"none\"");
    let mut c = world.wrap(env.command(&[
        "sandbox",
        "--policy",
        policy.to_str().unwrap(),
        "--workdir",
        work.to_str().unwrap(),
        "--publish",
        "18080:8000",
        "--",
        "touch",
        "ran",
    ]));
    c.stdin(Stdio::null());
    let out = output_of(c, env.dir.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("publish port 8000 of the sandbox on 127.0.0.1:18080: the port is taken"),
        "{err}"
    );
    assert!(!work.join("ran").exists());
    // Nothing of the refused sandbox is left under the root.
    let left: Vec<String> = fs::read_dir(&env.root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != ".claude-shim")
        .chain(
            fs::read_dir(env.root.join(".claude-shim"))
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !is_kept_cache(n) && !n.starts_with(".lease")),
        )
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
