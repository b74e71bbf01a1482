//! stdio end to end: `run`, `exec` and `sandbox` with each of stdin, stdout
//! and stderr at /dev/null, a pipe, a file and a terminal (a pty pair made
//! here), and with a terminal for the process itself. The output is compared
//! byte for byte.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use claude_shim_e2e::*;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Null,
    Pipe,
    File,
    Tty,
}

const KINDS: [Kind; 4] = [Kind::Null, Kind::Pipe, Kind::File, Kind::Tty];

/// Reads one line of input (or notes end of input) and writes it back on
/// stdout and stderr; a failed write is an exit status, not a silent loss.
const SCRIPT: &str =
    r#"if IFS= read -r l; then :; else l=EOF; fi; printf 'o:%s\n' "$l" || exit 3; printf 'e:%s\n' "$l" >&2 || exit 4"#;

/// One of the three streams as the child gets it, and how to read back what
/// it wrote.
struct Stream {
    child: Stdio,
    collect: Option<mpsc::Receiver<Vec<u8>>>,
    file: Option<PathBuf>,
    /// The pty master for a terminal on stdin: closing it would hang up the slave.
    _master: Option<File>,
}

impl Default for Stream {
    fn default() -> Self {
        Self {
            child: Stdio::null(),
            collect: None,
            file: None,
            _master: None,
        }
    }
}

fn pty() -> (File, OwnedFd) {
    let p = nix::pty::openpty(None, None).unwrap();
    (File::from(p.master), p.slave)
}

/// Reads `from` to its end (EIO on a pty master whose slaves all closed) in
/// a thread, so a child that fills a pipe never blocks on the test.
fn drain(mut from: impl Read + Send + 'static) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
        let _ = tx.send(out);
    });
    rx
}

fn input(kind: Kind, data: &[u8], scratch: &Path) -> Stream {
    let mut s = Stream::default();
    match kind {
        Kind::Null => {}
        // Written when the child is spawned (see `run`).
        Kind::Pipe => s.child = Stdio::piped(),
        Kind::File => {
            let path = scratch.join(unique_id("in"));
            fs::write(&path, data).unwrap();
            s.child = File::open(&path).unwrap().into();
        }
        Kind::Tty => {
            let (mut master, slave) = pty();
            // Typed ahead: the line waits in the terminal, as if typed before
            // the command started.
            master.write_all(data).unwrap();
            s.child = slave.into();
            s._master = Some(master);
        }
    }
    s
}

fn output(kind: Kind, scratch: &Path) -> Stream {
    let mut s = Stream::default();
    match kind {
        // As a shell's `>/dev/null` opens it: write-only.
        Kind::Null => s.child = fs::OpenOptions::new().write(true).open("/dev/null").unwrap().into(),
        Kind::Pipe => s.child = Stdio::piped(),
        Kind::File => {
            let path = scratch.join(unique_id("out"));
            s.child = File::create(&path).unwrap().into();
            s.file = Some(path);
        }
        Kind::Tty => {
            let (master, slave) = pty();
            s.child = slave.into();
            s.collect = Some(drain(master));
        }
    }
    s
}

struct Outcome {
    status: ExitStatus,
    stdout: Option<Vec<u8>>,
    stderr: Option<Vec<u8>>,
}

fn collected(s: &mut Stream) -> Option<Vec<u8>> {
    if let Some(rx) = s.collect.take() {
        return Some(
            rx.recv_timeout(Duration::from_secs(10))
                .expect("a process kept the output open after the command ended"),
        );
    }
    s.file.as_ref().map(|p| fs::read(p).unwrap())
}

/// Waits for claude-shim, killing it (and failing) after 30 s.
fn wait(child: &mut std::process::Child, what: &str) -> ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("claude-shim {what} did not finish in 30 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `cmd` with the three streams as given; None for a stream at /dev/null.
fn run(mut cmd: Command, kinds: [Kind; 3], data: &[u8], scratch: &Path) -> Outcome {
    let mut sin = input(kinds[0], data, scratch);
    let mut sout = output(kinds[1], scratch);
    let mut serr = output(kinds[2], scratch);
    cmd.stdin(std::mem::replace(&mut sin.child, Stdio::null()))
        .stdout(std::mem::replace(&mut sout.child, Stdio::null()))
        .stderr(std::mem::replace(&mut serr.child, Stdio::null()));
    let mut child = cmd.spawn().unwrap();
    // The slaves given to the child are closed here now (dropped with cmd),
    // so a pty master reads EIO once the child side is gone.
    drop(cmd);
    if let Some(mut w) = child.stdin.take() {
        w.write_all(data).unwrap();
    }
    if let Some(r) = child.stdout.take() {
        sout.collect = Some(drain(r));
    }
    if let Some(r) = child.stderr.take() {
        serr.collect = Some(drain(r));
    }
    let status = wait(&mut child, &format!("with stdio {kinds:?}"));
    Outcome {
        status,
        stdout: collected(&mut sout),
        stderr: collected(&mut serr),
    }
}

/// What SCRIPT writes on one stream, as the reader of that stream sees it.
fn expected(prefix: &str, stdin: Kind, kind: Kind) -> Option<Vec<u8>> {
    let line = if stdin == Kind::Null { "EOF" } else { "hello" };
    let eol = if kind == Kind::Tty { "\r\n" } else { "\n" };
    match kind {
        Kind::Null => None,
        _ => Some(format!("{prefix}:{line}{eol}").into_bytes()),
    }
}

fn show(b: &Option<Vec<u8>>) -> String {
    b.as_ref()
        .map(|b| format!("{:?}", String::from_utf8_lossy(b)))
        .unwrap_or("-".into())
}

/// Every kind on `stream` (0, 1, 2), the other two streams on files.
fn each_kind_on(stream: usize, cmd: &dyn Fn() -> Command, scratch: &Path) {
    let mut failures = Vec::new();
    for kind in KINDS {
        let mut kinds = [Kind::File; 3];
        kinds[stream] = kind;
        let out = run(cmd(), kinds, b"hello\n", scratch);
        let want_out = expected("o", kinds[0], kinds[1]);
        let want_err = expected("e", kinds[0], kinds[2]);
        if out.status.code() != Some(0) || out.stdout != want_out || out.stderr != want_err {
            failures.push(format!(
                "stdio {kinds:?}: exit {:?}, stdout {} (want {}), stderr {} (want {})",
                out.status.code(),
                show(&out.stdout),
                show(&want_out),
                show(&out.stderr),
                show(&want_err)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn run_bundle(env: &Env, terminal: bool, args: &[&str]) -> PathBuf {
    env.bundle(&unique_id("b"), |v| {
        set_args(v, args);
        v["process"]["terminal"] = serde_json::Value::Bool(terminal);
    })
}

fn run_cmd(env: &Env, bundle: &Path) -> Command {
    env.command(&["run", "--bundle", bundle.to_str().unwrap(), &unique_id("run")])
}

/// A running container to exec into; deleted (and checked gone) on drop.
struct Target<'a> {
    env: &'a Env,
    id: String,
}

impl<'a> Target<'a> {
    fn new(env: &'a Env) -> Self {
        let bundle = run_bundle(env, false, &["sleep", "1000"]);
        let id = unique_id("exec");
        env.ok(&["run", "--detach", "--bundle", bundle.to_str().unwrap(), &id]);
        Self { env, id }
    }

    fn exec(&self, tty: bool, script: &str) -> Command {
        let mut args = vec!["exec"];
        if tty {
            args.push("--tty");
        }
        args.extend([self.id.as_str(), "sh", "-c", script]);
        self.env.command(&args)
    }
}

impl Drop for Target<'_> {
    fn drop(&mut self) {
        self.env.ok(&["delete", "--force", &self.id]);
        if !std::thread::panicking() {
            self.env.assert_no_leaks(&self.id);
        }
    }
}

struct Sandbox {
    work: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        // Not under /tmp: the sandbox has a /tmp of its own.
        let work = tempfile::Builder::new()
            .prefix("claude-shim-stdio-")
            .tempdir_in("/var/tmp")
            .unwrap();
        Self { work }
    }

    fn command(&self, env: &Env, script: &str) -> Command {
        let rootfs = rootfs();
        env.command(&[
            "sandbox",
            "--policy",
            "offline",
            "--rootfs",
            rootfs.to_str().unwrap(),
            "--workdir",
            self.work.path().to_str().unwrap(),
            "--",
            "sh",
            "-c",
            script,
        ])
    }
}

#[test]
fn run_each_stream() {
    let env = Env::new();
    let bundle = run_bundle(&env, false, &["sh", "-c", SCRIPT]);
    for stream in 0..3 {
        each_kind_on(stream, &|| run_cmd(&env, &bundle), env.dir.path());
    }
}

#[test]
fn exec_each_stream() {
    let env = Env::new();
    let target = Target::new(&env);
    for stream in 0..3 {
        each_kind_on(stream, &|| target.exec(false, SCRIPT), env.dir.path());
    }
}

#[test]
fn sandbox_each_stream() {
    let env = Env::new();
    let sandbox = Sandbox::new();
    for stream in 0..3 {
        each_kind_on(stream, &|| sandbox.command(&env, SCRIPT), env.dir.path());
    }
}

const TERMINAL_SCRIPT: &str =
    r#"if IFS= read -r l; then :; else l=EOF; fi; printf 'o:%s\n' "$l"; printf 'e:%s\n' "$l" >&2; cat; echo done"#;

/// Our terminal echoes the typed line, the process's terminal echoes it
/// again, then the process writes; `cat` ends at the end-of-file.
const TERMINAL_OUTPUT: &[u8] = b"hello\r\nhello\r\no:hello\r\ne:hello\r\ndone\r\n";

/// The process has a terminal of its own, relayed to ours (all three streams
/// on one pty). A line and an end-of-file (Ctrl-D) are typed ahead, before
/// claude-shim puts our terminal in raw mode: the line reaches the process
/// once, and the end-of-file ends its `cat` (it once arrived as a stray NUL
/// byte, echoed as ^@, and `cat` waited forever).
fn through_a_terminal(mut cmd: Command) {
    let (mut master, slave) = pty();
    master.write_all(b"hello\n\x04").unwrap();
    cmd.stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave));
    let mut child = cmd.spawn().unwrap();
    drop(cmd);
    let rx = drain(master);
    let status = wait(&mut child, "at a terminal");
    let out = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(
        (status.code(), String::from_utf8_lossy(&out)),
        (Some(0), String::from_utf8_lossy(TERMINAL_OUTPUT))
    );
}

#[test]
fn run_at_a_terminal() {
    let env = Env::new();
    let bundle = run_bundle(&env, true, &["sh", "-c", TERMINAL_SCRIPT]);
    through_a_terminal(run_cmd(&env, &bundle));
}

#[test]
fn exec_at_a_terminal() {
    let env = Env::new();
    let target = Target::new(&env);
    through_a_terminal(target.exec(true, TERMINAL_SCRIPT));
}

#[test]
fn sandbox_at_a_terminal() {
    let env = Env::new();
    let sandbox = Sandbox::new();
    through_a_terminal(sandbox.command(&env, TERMINAL_SCRIPT));
}

/// A state root deeper than a socket address holds (108 bytes): the
/// console socket is bound through a handle on its directory.
#[test]
fn run_at_a_terminal_under_a_long_state_root() {
    let mut env = Env::new();
    env.root = env.dir.path().join("state-".to_owned() + &"d".repeat(110));
    let bundle = run_bundle(&env, true, &["sh", "-c", TERMINAL_SCRIPT]);
    through_a_terminal(run_cmd(&env, &bundle));
}
