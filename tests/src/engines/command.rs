//! Running an engine's tool and reading what it did: output as text, success
//! asserted, polling until a state shows, and a run under a pseudo-terminal.
//! The bottom of the engine harness.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Asserts `out` succeeded; returns its stdout.
pub fn expect_ok(tool: &str, args: &[&str], out: Output) -> String {
    assert!(
        out.status.success(),
        "{tool} {args:?} failed with {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Polls `f` until it returns Some or `within` is over.
pub fn wait_until<T>(within: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `argv` under a pseudo-terminal (util-linux script), as a user at a
/// terminal would (its input open, nothing typed); returns the exit code and
/// what the terminal showed, without NULs and CRs.
pub fn at_terminal(argv: &[&str], envs: &[(&str, &Path)], dir: &Path) -> (Option<i32>, String) {
    let quoted: Vec<String> = argv.iter().map(|a| format!("'{}'", a.replace('\'', "'\\''"))).collect();
    let mut c = Command::new("script");
    c.args(["-qec", &quoted.join(" "), "/dev/null"])
        .env("SHELL", "/bin/sh")
        .current_dir(dir);
    for (k, v) in envs {
        c.env(k, v);
    }
    // script's stdin stays open until the command ends: at end of input
    // script hangs the terminal up, which could cut the command's output.
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take();
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    let seen = text(&out.stdout).replace(['\0', '\r'], "");
    (out.status.code(), seen)
}

/// A command run under runc and under claude-shim: both gave the user the
/// same exit status and stdout; returns that stdout.
pub fn same_as_runc(outs: &[Output; 2]) -> String {
    let [runc, ours] = outs;
    assert_eq!(
        runc.status.code(),
        ours.status.code(),
        "exit status, runc vs claude-shim"
    );
    assert_eq!(text(&runc.stdout), text(&ours.stdout), "stdout, runc vs claude-shim");
    text(&ours.stdout)
}
