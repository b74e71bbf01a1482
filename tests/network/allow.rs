//! `claude-shim allow` and `deny` on a running sandbox, and `denials` while
//! it runs and after it ended: the sandbox refuses a host of the world,
//! `allow` admits it without a restart, `deny` takes it back, a process
//! inside that reaches for the control socket changes nothing, and the
//! run's kept log shows the refusals and the changes.

use std::fs;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use claude_shim_e2e::*;

use crate::verify::{policy_file, workdir};
use crate::world::{output_of, World};

/// Waits for the sandbox to touch `name` in its working directory.
pub(crate) fn wait_for(work: &Path, name: &str, sandbox: &mut Background, stderr: &Path) {
    let start = Instant::now();
    while !work.join(name).exists() {
        if let Some(status) = sandbox.try_wait() {
            let err = fs::read_to_string(stderr).unwrap_or_default();
            panic!("the sandbox ended ({status}) before {name}: {err}");
        }
        assert!(start.elapsed() < Duration::from_secs(60), "no {name} after 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `claude-shim ARGS` in the world, run from `cwd` with the run's state home.
pub(crate) fn shim_in(world: &World, env: &Env, cwd: &Path, xdg: &Path, args: &[&str]) -> Output {
    let mut c = world.wrap(env.command(args));
    c.current_dir(cwd).env("XDG_STATE_HOME", xdg);
    output_of(c, env.dir.path())
}

/// A sandbox started in the background in the world, its stderr in a
/// file; ended by its pid if the test fails before it ends.
pub(crate) fn spawn_sandbox(world: &World, env: &Env, xdg: &Path, args: &[&str], stderr: &Path) -> Background {
    let mut c = world.wrap(env.command(args));
    c.env("XDG_STATE_HOME", xdg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(stderr).unwrap());
    Background::shim(c.spawn().unwrap(), &shim_path(), &env.root)
}

/// A shell function for the scripts inside: `wait_file NAME` waits for the
/// test to create NAME in the working directory, and ends the sandbox
/// (exit 3) after 120 s, so that a sandbox whose test died does not wait
/// for ever.
pub(crate) const WAIT_FILE: &str =
    r#"wait_file() { n=0; while [ ! -e "$1" ]; do n=$((n+1)); [ $n -lt 1200 ] || exit 3; sleep 0.1; done; }"#;

/// How long a test waits for its sandbox to end.
pub(crate) const AWAIT: Duration = Duration::from_secs(150);

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Tries the control socket of every run under `root` from inside, with a
/// request to allow ports.test; prints what came back.
const INSIDE: &str = r#"
import glob, socket, sys
for path in glob.glob(sys.argv[1] + "/.claude-shim/*/control.sock"):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        s.sendall(b'{"op":"allow","entry":"ports.test"}\n')
        print("answer", s.recv(4096).decode().strip())
    except OSError as e:
        print("refused", e)
"#;

fn allow_and_deny(env: &Env, world: &World, name: &str) {
    let root = env.root.to_str().unwrap();
    // The state root shown read-only inside: a read-only mount does not
    // stop a connect, so the proxy's own check is what refuses.
    let policy = policy_file(
        env,
        name,
        &format!("mode = \"allowlist\"\nallow = [\"pub.test\"]\n\n[filesystem]\nreadonly = [\"{root}\"]"),
    );
    fs::create_dir_all(&env.root).unwrap();
    let work = workdir(env, name);
    let xdg = workdir(env, &format!("{name}-state"));
    // In the working directory: the sandbox's /tmp is its own.
    fs::write(work.join("inside.py"), INSIDE).unwrap();
    let script = format!(
        r#"p() {{ curl -s -o /dev/null -w '%{{http_code}}' --max-time 5 "$1"; }}
{WAIT_FILE}
echo "before $(p http://wild.test/)" >> out
touch ready1; wait_file go1
echo "allowed $(p http://wild.test/) $(curl -s --max-time 5 http://wild.test/)" >> out
python3 inside.py {root} >> out 2>&1
echo "ports $(p http://ports.test/)" >> out
touch ready2; wait_file go2
echo "denied $(p http://wild.test/)" >> out
"#
    );
    let err = env.dir.path().join(format!("{name}.err"));
    let (p, w) = (policy.to_str().unwrap(), work.to_str().unwrap());
    let mut sandbox = spawn_sandbox(
        world,
        env,
        &xdg,
        &["sandbox", "--policy", p, "--workdir", w, "--", "sh", "-c", &script],
        &err,
    );
    wait_for(&work, "ready1", &mut sandbox, &err);
    // While it runs: the refusal, with the command that allows it.
    let live = text(&shim_in(world, env, &work, &xdg, &["denials"]));
    assert!(
        live.contains("refused egress: wild.test:80 (not on the allowlist); to allow it: claude-shim --root ")
            && live.contains(" allow --run sandbox-"),
        "{live}"
    );
    // From the project's directory, the only sandbox of the project.
    let allowed = shim_in(world, env, &work, &xdg, &["allow", "wild.test"]);
    assert!(allowed.status.success(), "{}", text(&allowed));
    assert!(
        text(&allowed).contains("wild.test is allowed (allowed by wild.test)"),
        "{}",
        text(&allowed)
    );
    assert!(text(&allowed).contains("for this run only"), "{}", text(&allowed));
    fs::write(work.join("go1"), "").unwrap();
    wait_for(&work, "ready2", &mut sandbox, &err);
    let denied = shim_in(world, env, &work, &xdg, &["deny", "wild.test"]);
    assert!(denied.status.success(), "{}", text(&denied));
    assert!(
        text(&denied).contains("wild.test is refused (not on the allowlist)"),
        "{}",
        text(&denied)
    );
    fs::write(work.join("go2"), "").unwrap();
    let status = sandbox.wait(AWAIT);
    let out = fs::read_to_string(work.join("out")).unwrap();
    assert!(status.success(), "{out}\n{}", fs::read_to_string(&err).unwrap());
    assert!(out.contains("before 403"), "{out}");
    assert!(out.contains("allowed 200 hello-pub"), "allow admits it at once: {out}");
    assert!(out.contains("denied 403"), "deny takes it back: {out}");
    // The process inside reached the socket (the root is visible
    // read-only, which does not stop a connect) and the proxy refused it.
    assert!(
        out.contains("ports 403"),
        "the inside request changed the policy: {out}"
    );
    let answers: Vec<&str> = out.lines().filter(|l| l.starts_with("answer")).collect();
    assert!(
        !answers.is_empty() && answers.iter().all(|l| l.contains("changed from the host only")),
        "the proxy refused the process inside: {out}"
    );
    // After the run: its refusals and the changes, from its kept log.
    let after = shim_in(world, env, &work, &xdg, &["denials"]);
    let after = text(&after);
    assert!(after.contains("(ended; from its kept network log)"), "{after}");
    assert!(
        after.contains("refused egress: wild.test:80 (not on the allowlist)\n"),
        "{after}"
    );
    assert!(
        !after.contains("to allow it"),
        "an ended run is offered nothing: {after}"
    );
    assert!(
        after.contains("changed from the host: allow wild.test: wild.test is allowed"),
        "{after}"
    );
    assert!(
        after.contains("changed from the host: deny wild.test: wild.test is refused"),
        "{after}"
    );
    assert!(after.contains("refused egress: ports.test:80"), "{after}");
}

#[test]
fn allow_and_deny_change_a_running_sandbox() {
    let world = World::new();
    allow_and_deny(&Env::new(), &world, "allow-root");
    let (uid, gid) = test_user();
    allow_and_deny(&Env::as_user(uid, gid), &world, "allow-user");
}

/// `--save` writes the change into the policy file; an embedded policy
/// refuses it in one line, before anything changes.
#[test]
fn allow_save_writes_the_policy_file_and_refuses_an_embedded_one() {
    let world = World::new();
    let env = Env::new();
    fs::create_dir_all(&env.root).unwrap();
    let xdg = workdir(&env, "save-state");
    let policy = policy_file(&env, "save", "mode = \"allowlist\"\nallow = [\"pub.test\"]  # ours");
    let work = workdir(&env, "save");
    let script =
        format!("{WAIT_FILE}\ntouch ready1; wait_file go; curl -sf --max-time 5 http://wild.test/ > out; exit 0");
    let err = env.dir.path().join("save.err");
    let (p, w) = (policy.to_str().unwrap(), work.to_str().unwrap());
    let mut sandbox = spawn_sandbox(
        &world,
        &env,
        &xdg,
        &["sandbox", "--policy", p, "--workdir", w, "--", "sh", "-c", &script],
        &err,
    );
    let work2 = workdir(&env, "save-embedded");
    let mut embedded = spawn_sandbox(
        &world,
        &env,
        &xdg,
        &[
            "sandbox",
            "--workdir",
            work2.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &script,
        ],
        &env.dir.path().join("embedded.err"),
    );
    wait_for(&work, "ready1", &mut sandbox, &err);
    wait_for(&work2, "ready1", &mut embedded, &env.dir.path().join("embedded.err"));
    let refused = shim_in(&world, &env, &work2, &xdg, &["allow", "--save", "wild.test"]);
    let msg = text(&refused);
    assert!(!refused.status.success(), "{msg}");
    assert_eq!(msg.lines().count(), 1, "{msg}");
    assert!(
        msg.contains("runs the embedded policy agent, which has no file to write"),
        "{msg}"
    );
    let saved = shim_in(&world, &env, &work, &xdg, &["allow", "--save", "wild.test"]);
    assert!(saved.status.success(), "{}", text(&saved));
    assert!(
        text(&saved).contains(&format!("saved in {}", policy.display())),
        "{}",
        text(&saved)
    );
    let file = fs::read_to_string(&policy).unwrap();
    assert!(file.contains("allow = [\"pub.test\", \"wild.test\"]  # ours"), "{file}");
    fs::write(work.join("go"), "").unwrap();
    fs::write(work2.join("go"), "").unwrap();
    assert!(sandbox.wait(AWAIT).success());
    assert!(embedded.wait(AWAIT).success());
    assert_eq!(fs::read_to_string(work.join("out")).unwrap(), "hello-pub\n");
    assert_eq!(
        fs::read_to_string(work2.join("out")).unwrap(),
        "",
        "the embedded run was not changed"
    );
}
