//! runc as the oracle (issues 12 and 25): runc with a state root of its own
//! beside the test's, and the bundle arguments both runtimes take, for the
//! parity suites that run the same bundle under each.

use std::path::Path;
use std::process::{Command, Output};

use crate::{output_of, Env};

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// runc with its own state root beside the test's.
pub fn runc(env: &Env, args: &[&str]) -> Output {
    let mut c = Command::new("runc");
    c.arg("--root").arg(env.dir.path().join("runc")).args(args);
    output_of(c, env.dir.path())
}

pub fn runc_ok(env: &Env, args: &[&str]) -> String {
    let out = runc(env, args);
    assert!(
        out.status.success(),
        "runc {args:?}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

pub fn in_bundle(bundle: &Path) -> Vec<String> {
    vec!["--bundle".into(), bundle.to_string_lossy().into_owned()]
}

pub fn run_args<'a>(bundle: &'a [String], id: &'a str) -> Vec<&'a str> {
    let mut v = vec!["run"];
    v.extend(bundle.iter().map(String::as_str));
    v.push(id);
    v
}

/// One runtime's result, printed for the test's log.
pub fn show(name: &str, rt: &str, out: &Output) {
    eprintln!(
        "{name} under {rt}: exit {:?}\nstdout: {:?}\nstderr: {:?}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// `run` of `bundle` under claude-shim (nothing left behind), then runc;
/// both printed.
pub fn run_both(env: &Env, bundle: &Path, name: &str) -> [Output; 2] {
    let b = in_bundle(bundle);
    let id = crate::unique_id(name);
    let ours = env.run(&run_args(&b, &id));
    env.assert_no_leaks(&id);
    let theirs = runc(env, &run_args(&b, &format!("runc-{id}")));
    show(name, "claude-shim", &ours);
    show(name, "runc", &theirs);
    [ours, theirs]
}
