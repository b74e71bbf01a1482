//! `quarantine [list]` and `quarantine restore RUN`: what sandboxes left that
//! the host would run, moved aside at their exit (sandbox::quarantine).

use std::fmt::Write as _;
use std::io::Write as _;

use anyhow::Result;

use crate::cli::{QuarantineArgs, QuarantineCommand};
use crate::sandbox::quarantine::store;

pub fn quarantine(args: &QuarantineArgs) -> Result<i32> {
    match &args.command {
        None | Some(QuarantineCommand::List) => {
            let runs = store::runs()?;
            let mut text = String::new();
            if runs.is_empty() {
                let _ = writeln!(text, "the quarantine is empty ({})", store::root()?.path().display());
            }
            for run in runs {
                match run {
                    Ok(m) => {
                        // Paths a sandbox named: shown, never sent to the terminal.
                        let shown =
                            |p: &std::path::Path| crate::terminal::escaped(&p.display().to_string()).into_owned();
                        let _ = writeln!(text, "{}  {}  {}", m.run, m.time, shown(&m.workdir));
                        for s in &m.moved {
                            let _ = writeln!(text, "  {}  ({})", shown(&s.path), s.runs);
                        }
                    }
                    Err(e) => eprintln!("claude-shim: warning: failed to read quarantine run {e}"),
                }
            }
            // A reader that stopped early (`| head`) is not an error.
            match std::io::stdout().lock().write_all(text.as_bytes()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
                _ => Ok(0),
            }
        }
        Some(QuarantineCommand::Restore { run }) => {
            let lines = store::restore(run)?;
            let kept = lines.iter().filter(|l| l.starts_with("kept")).count();
            for l in lines {
                println!("{}", crate::terminal::escaped(&l));
            }
            Ok(if kept > 0 { 1 } else { 0 })
        }
    }
}
