//! What the quarantine at exit found and did, and the report of it: one
//! line per entry on stderr, the restore command first. An entry left where
//! the host would run it, or a folder that could not be looked into, is an
//! error: the run then fails (`closed`), naming each.

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
    /// New since the run started, while other runs shared the directory:
    /// left for the last run out (absolute paths).
    pub deferred: Vec<PathBuf>,
    /// Not movable into the quarantine, renamed in its folder to an inert
    /// name (relative to the working directory).
    pub inert: Vec<(Left, PathBuf)>,
    /// Left in place because moving failed, with why.
    pub failed: Vec<(Left, String)>,
    /// Folders that could not be looked into (relative), with why.
    pub blind: Vec<(PathBuf, String)>,
    /// What kept the search from being made.
    pub errors: Vec<String>,
    /// What went wrong without leaving anything in the host's way.
    pub warnings: Vec<String>,
}

impl Outcome {
    /// Nothing the run made is left where the host would run it, and
    /// nothing went unsearched.
    pub fn closed(&self) -> bool {
        self.failed.is_empty() && self.blind.is_empty() && self.errors.is_empty()
    }

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
        if !self.inert.is_empty() {
            out.push(
                "claude-shim: renamed in place what the run left that the host would run and could not be moved aside:"
                    .to_owned(),
            );
            for (l, to) in &self.inert {
                out.push(format!(
                    "claude-shim:   {} -> {} ({})",
                    path(l),
                    self.workdir.join(to).display(),
                    l.runs
                ));
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
        if !self.deferred.is_empty() {
            out.push(format!(
                "claude-shim: {} entries the host would run appeared in {} while other sandboxes ran there; \
                 which made each cannot be told without tracking, so the last sandbox to leave moves them aside",
                self.deferred.len(),
                self.workdir.display()
            ));
        }
        for (l, why) in &self.failed {
            out.push(format!(
                "claude-shim: error: left in place {} ({}): failed to {why}",
                path(l),
                l.runs
            ));
        }
        for (rel, why) in &self.blind {
            out.push(format!(
                "claude-shim: error: not looked into {}: {why}",
                self.workdir.join(rel).display()
            ));
        }
        for e in &self.errors {
            out.push(format!("claude-shim: error: failed to {e}"));
        }
        for w in &self.warnings {
            out.push(format!("claude-shim: warning: failed to {w}"));
        }
        out
    }
}
