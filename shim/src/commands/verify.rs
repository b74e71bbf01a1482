//! `verify`: compile the policy into its sandbox, run the probe in it (under
//! claude-shim, and under every `--runtime` given, on the very same bundle),
//! and print `check | expected | observed | PASS/FAIL`; non-zero on any FAIL.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::process::Command;

use anyhow::{anyhow, Context, Result};

use crate::commands::run::{generated_id, run_bundle, RunOptions};
use crate::runtime::Runtime;
use crate::sandbox;
use crate::sandbox::lease::Lease;
use crate::seal;
use crate::verify::report::{self, ProbeRun, Report};
use crate::verify::{from_spec, prepare_spec, Canary, HostFacts};
use claude_shim_bundle::Compiled;

fn capture(dir: &Path, name: &str) -> Result<(File, std::path::PathBuf)> {
    let path = dir.join(name);
    let f = File::create(&path).with_context(|| format!("create {}", path.display()))?;
    Ok((f, path))
}

/// The probe under claude-shim itself, its output in files.
fn under_claude_shim(rt: &Runtime, bundle: &Path, dir: &Path) -> Result<ProbeRun> {
    let (out, out_path) = capture(dir, "probe.out")?;
    let (err, err_path) = capture(dir, "probe.err")?;
    // With a terminal on our stdin the probe gets it, so TIOCSTI is tried on
    // the caller's real terminal; otherwise /dev/null.
    let stdin: OwnedFd = if nix::unistd::isatty(0).unwrap_or(false) {
        std::io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .context("duplicate stdin")?
    } else {
        File::open("/dev/null").context("open /dev/null")?.into()
    };
    let id = generated_id("verify");
    let opts = RunOptions {
        id: &id,
        bundle,
        pid_file: None,
        console_socket: None,
        preserve_fds: 0,
        no_pivot: false,
        detach: false,
        keep: false,
        stdio: Some([stdin, OwnedFd::from(out), OwnedFd::from(err)]),
    };
    let code = run_bundle(
        rt,
        opts,
        &crate::admin::apply,
        &mut Some,
        Some(std::time::Duration::from_secs(2)),
    )?;
    Ok(ProbeRun {
        stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
        exit_code: Some(code),
    })
}

/// The same bundle under another runc-compatible runtime, with its own state root.
fn under_runtime(runtime: &Path, bundle: &Path, dir: &Path) -> Result<ProbeRun> {
    let id = generated_id("verify-peer");
    let root = dir.join("peer-root");
    let out = Command::new(runtime)
        .arg("--root")
        .arg(&root)
        .args(["run", "--bundle"])
        .arg(bundle)
        .arg(&id)
        .stdin(crate::commands::verify_peers::empty_stdin()?)
        .output()
        .with_context(|| format!("run runtime {}", runtime.display()))?;
    // Whatever happened, leave nothing of the peer's container.
    let mut delete = Command::new(runtime);
    delete.arg("--root").arg(&root).args(["delete", "--force", &id]);
    crate::commands::verify_peers::quietly(delete);
    Ok(ProbeRun {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        exit_code: out.status.code(),
    })
}

pub fn verify(rt: &Runtime, args: &crate::cli::Verify) -> Result<i32> {
    crate::runtime::foreground::defer_termination()?;
    let policy = sandbox::load_policy(args.policy.as_deref())?;
    if policy.filesystem.workspace == claude_shim_bundle::policy::values::Workspace::Review {
        anyhow::bail!(
            "verify {}: workspace = \"review\" is not verified yet (its layer is made per run); verify checks the live workspace's defences",
            policy.name()
        );
    }
    let reach = from_spec::Reach::parse(args.reach.as_deref())?;
    let peers = match &args.peers {
        Some(p) => crate::commands::verify_peers::load(p)?,
        None => Vec::new(),
    };
    // Held until the probes are done: see `Canary`.
    let canary = Canary::open().context("listen on a canary port of the host")?;
    let inv = sandbox::invocation(
        args.workdir.as_deref(),
        args.rootfs.as_deref(),
        &["true".to_owned()],
        false,
    )?;
    let ours = rt.root.join(".claude-shim");
    std::fs::create_dir_all(&ours).with_context(|| format!("create state directory {}", ours.display()))?;
    // Before compiling, as `sandbox` does: placeholders are shared with any
    // sandbox running on the same directory.
    let mut lease = Lease::acquire(&ours, &inv.workdir)?;
    let work = ours.join(format!("{}.verify", generated_id("v")));
    let bundle = work.join("bundle");
    let result = (|| -> Result<(Vec<Report>, Compiled)> {
        let mut compiled = sandbox::compile_policy(&policy, &inv, Some(&ours))?;
        let exp = from_spec::expectations(&policy, &inv, &compiled.spec, &HostFacts::collect(&canary), &reach)?;
        let exe = seal::exe_on_disk()?;
        prepare_spec(&mut compiled.spec, &exe, &exp).map_err(|e| anyhow!("{e}"))?;
        lease.create(&compiled.placeholders)?;
        lease.share()?;
        std::fs::create_dir_all(&work).with_context(|| format!("create {}", work.display()))?;
        sandbox::write(&bundle, &compiled, false, true)?;
        let mut reports = vec![Report::for_expectations(
            "claude-shim",
            &exp,
            &under_claude_shim(rt, &bundle, &work)?,
        )];
        for (n, peer) in peers.iter().enumerate() {
            let run = crate::commands::verify_peers::run(peer, &exp, &exe, &work, &inv.workdir, n)?;
            reports.push(Report::for_expectations(&peer.name, &exp, &run));
        }
        for runtime in &args.runtime {
            let name = runtime
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            reports.push(Report::for_expectations(
                &name,
                &exp,
                &under_runtime(runtime, &bundle, &work)?,
            ));
        }
        Ok((reports, compiled))
    })();
    lease.release();
    let _ = std::fs::remove_dir_all(&work);
    let (reports, compiled) = result?;

    if args.json {
        let json = if reports.len() == 1 {
            reports[0].to_json()
        } else {
            report::side_by_side_json(&reports)
        };
        println!("{json}");
    } else {
        println!("policy: {}", policy.name());
        for o in &compiled.opt_outs {
            println!("opt-out: {o}");
        }
        if reports.len() == 1 {
            print!("{}", reports[0].table());
        } else {
            print!("{}", report::side_by_side(&reports));
        }
    }
    Ok(report::exit_code(&reports))
}
