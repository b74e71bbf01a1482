//! What the quarantine at exit found and did, and the report of it: one
//! line per entry on stderr, the restore command first.

use std::path::PathBuf;

/// One entry the run left, as found at exit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Left {
    /// Relative to the working directory.
    pub rel: PathBuf,
    /// Which tool runs what from it.
    pub runs: &'static str,
}

/// What `finish` did.
#[derive(Debug, Default)]
pub struct Outcome {
    pub workdir: PathBuf,
    /// The quarantine run it went to (its directory's name), if anything moved.
    pub run: Option<String>,
    pub moved: Vec<Left>,
    /// Left in place and reported (`after_effects = "report"`).
    pub reported: Vec<Left>,
    /// Left in place because moving failed, with why.
    pub failed: Vec<(Left, String)>,
    /// What kept the search from being made.
    pub errors: Vec<String>,
}

impl Outcome {
    /// The report on stderr, one line per entry (the paths are the sandbox's
    /// to name, so their control characters are shown escaped).
    pub fn print(&self) {
        for line in self.lines() {
            eprintln!("{}", crate::terminal::escaped(&line));
        }
    }

    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let path = |l: &Left| self.workdir.join(&l.rel).display().to_string();
        if let Some(run) = &self.run {
            out.push(format!(
                "claude-shim: moved aside what the run left that the host would run (restore: claude-shim quarantine restore {run}):"
            ));
            for l in &self.moved {
                out.push(format!("claude-shim:   {} ({})", path(l), l.runs));
            }
        }
        if !self.reported.is_empty() {
            out.push(
                "claude-shim: the run left what the host would run (left in place: filesystem.after_effects = \"report\"):"
                    .to_owned(),
            );
            for l in &self.reported {
                out.push(format!("claude-shim:   {} ({})", path(l), l.runs));
            }
        }
        for (l, why) in &self.failed {
            out.push(format!(
                "claude-shim: warning: left in place {} ({}): failed to {why}",
                path(l),
                l.runs
            ));
        }
        for e in &self.errors {
            out.push(format!("claude-shim: warning: failed to {e}"));
        }
        out
    }
}
