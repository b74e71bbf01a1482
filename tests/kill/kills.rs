//! One kill: a case's command timed to place the kills across it, then the
//! command started and SIGKILLed after a delay.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use claude_shim_e2e::*;

use crate::world::{Mode, Verb, World};

/// Starts `cmd`, SIGKILLs it `after` later; true if the kill landed (it was still running).
pub(crate) fn kill_after(mut cmd: Command, after: Duration) -> bool {
    let mut child: Child = cmd.spawn().unwrap();
    std::thread::sleep(after);
    if child.try_wait().unwrap().is_some() {
        return false;
    }
    let _ = child.kill();
    let status = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    status.signal() == Some(libc::SIGKILL)
}

/// How long one whole command of the case takes here, so kills fall across it.
pub(crate) fn calibrate(w: &World, verb: Verb, mode: Mode) -> Duration {
    let id = unique_id("kill-cal");
    let started = Instant::now();
    let (code, err) = match verb {
        Verb::Create | Verb::Run => {
            let status = w.runtime(Verb::Create, mode, &id, &[]).status().unwrap();
            (status.code(), String::new())
        }
        Verb::Sandbox => {
            let out = output_of(w.runtime(verb, mode, &id, &["sleep", &w.marker]), w.env.dir.path());
            (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
        }
    };
    let took = started.elapsed();
    assert_eq!(
        code,
        Some(0),
        "{verb:?} in mode {} fails without a kill: {err}",
        mode.name()
    );
    if verb != Verb::Sandbox {
        let (code, err) = w.finish(&["delete", "--force", &id]);
        assert_eq!(code, Some(0), "delete --force {id}: {err}");
    }
    // `run` also starts the container and waits for it.
    match verb {
        Verb::Run => took + took / 2 + Duration::from_millis(300),
        _ => took,
    }
}
