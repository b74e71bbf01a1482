//! The policy_compile group: how long claude-shim takes to compile a policy
//! whose `protected` list has 20,000 entries (half of them present in the
//! working directory, each bound read-only; half missing, each stood in
//! for) and write its bundle. Only claude-shim compiles policies; every
//! other runtime gets its not-applicable row.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::case::{ms, Ctx, Sample, SampleFn, State};
use crate::plan::Planner;
use crate::proc::{self, Hooks};
use crate::runtimes::{Kind, Launch, Runtime};

/// Entries in the generated policy's `protected` list.
pub const PROTECTED: usize = 20_000;
const PER_DIR: usize = 100;

impl<'a> Planner<'a> {
    pub(crate) fn policy_compile(&mut self) {
        let m = || vec!["policy_compile", "policy_compile_cpu"];
        for i in self.with_srt() {
            if self.ctx.rts[i].kind != Kind::Sandbox {
                self.na(
                    i,
                    "",
                    m(),
                    "claude-shim's policy compiler; the other runtimes take no policy",
                );
                continue;
            }
            let dir = self.ctx.work.join("protected");
            let (policy, workdir, out) = (dir.join("policy.toml"), dir.join("workdir"), dir.join("bundle"));
            let shown = proc::command_line(&command(&self.ctx.rts[i], &policy, &workdir, &out));
            self.case(i, "", m(), State::Ready, |_, rt| {
                generate(&policy, &workdir)?;
                let launch = Launch::Argv {
                    argv: vec!["/bin/true".into()],
                    cwd: workdir.clone(),
                    bpf: None,
                };
                let rt = rt.clone();
                let f: SampleFn = Box::new(move |ctx: &Ctx| compile_once(ctx, &rt, &policy, &workdir, &out));
                Ok((launch, f))
            });
            // The case shows the command it times, not the sandbox's own.
            if let Some(c) = self.cases.last_mut().filter(|c| c.command.is_some()) {
                c.command = Some(shown);
            }
        }
    }
}

/// `claude-shim bundle` of the generated policy (compile and write).
fn command(rt: &Runtime, policy: &Path, workdir: &Path, out: &Path) -> Command {
    let mut c = Command::new(rt.path.as_deref().unwrap_or(Path::new("/nonexistent")));
    c.arg("bundle")
        .arg("--policy")
        .arg(policy)
        .arg("--workdir")
        .arg(workdir)
        .arg("--out")
        .arg(out)
        .args(["--force", "--", "/bin/true"])
        .current_dir(workdir);
    c
}

fn compile_once(ctx: &Ctx, rt: &Runtime, policy: &Path, workdir: &Path, out: &Path) -> Result<Sample> {
    let f = ctx
        .runner
        .run(command(rt, policy, workdir, out), &Hooks::default(), ctx.timeout)?;
    if !f.status.success() {
        bail!("{}: {}", rt.name, f.why());
    }
    Ok(Sample {
        values: vec![("policy_compile", ms(f.elapsed)), ("policy_compile_cpu", ms(f.cpu))],
        note: None,
    })
}

/// The policy (only its `protected` list; every other field the strict
/// default) and its working directory: `p/dNNN/fNNN`, every even one a file.
fn generate(policy: &Path, workdir: &Path) -> Result<()> {
    let _ = fs::remove_dir_all(workdir);
    let mut list = String::new();
    for i in 0..PROTECTED {
        let (d, f) = (i / PER_DIR, i % PER_DIR);
        let rel = format!("p/d{d:03}/f{f:03}");
        if f == 0 {
            let sub = workdir.join(format!("p/d{d:03}"));
            fs::create_dir_all(&sub).with_context(|| format!("create {}", sub.display()))?;
        }
        if f % 2 == 0 {
            let p = workdir.join(&rel);
            fs::File::create(&p).with_context(|| format!("create {}", p.display()))?;
        }
        let _ = write!(list, "{}\"{rel}\"", if i == 0 { "" } else { ", " });
    }
    fs::write(policy, text(&list)).with_context(|| format!("write {}", policy.display()))?;
    Ok(())
}

fn text(list: &str) -> String {
    format!("version = 1\nname = \"protected-{PROTECTED}\"\n\n[filesystem]\nprotected = [{list}]\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generated_policy_lists_every_entry_and_half_are_present() {
        let dir = tempfile::tempdir().unwrap();
        let (policy, workdir) = (dir.path().join("policy.toml"), dir.path().join("workdir"));
        generate(&policy, &workdir).unwrap();
        let text = fs::read_to_string(&policy).unwrap();
        assert_eq!(text.matches("\"p/d").count(), PROTECTED);
        assert!(text.contains("\"p/d199/f099\""), "the last entry");
        assert!(workdir.join("p/d000/f000").is_file());
        assert!(!workdir.join("p/d000/f001").exists());
        assert!(workdir.join("p/d199").is_dir());
    }
}
