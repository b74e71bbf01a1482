//! The two runtimes compared and the table that compares them: what a user
//! sees of a command under each, one row per check, and the verdict. The
//! bottom of the suite.

use claude_shim_e2e::engines::*;

pub(crate) const RUNTIMES: [&str; 2] = ["runc", "claude-shim"];

/// What a user sees of one command: its exit code and its output.
pub(crate) type Seen = (Option<i32>, String);

pub(crate) fn seen(out: std::process::Output) -> Seen {
    (out.status.code(), text(&out.stdout))
}

/// The checks of one test: each runs under both runtimes; the table of
/// check / runc / claude-shim is printed at the end (`--nocapture` shows it
/// for a passing run too), then every difference fails the test.
#[derive(Default)]
pub(crate) struct Table {
    rows: Vec<(String, Seen, Seen)>,
}

impl Table {
    /// Runs `check` under runc and then claude-shim (a runtime's name in the
    /// output, as in a container name, reads "RT").
    pub(crate) fn same(&mut self, name: &str, mut check: impl FnMut(&str) -> Seen) {
        let (code, out) = check("runc");
        let theirs = (code, out.replace("runc", "RT"));
        let (code, out) = check("claude-shim");
        let ours = (code, out.replace("claude-shim", "RT"));
        self.rows.push((name.to_owned(), theirs, ours));
    }

    pub(crate) fn finish(self, title: &str) {
        let cell = |s: &Seen| {
            let out = s.1.trim_end().replace('\n', " | ");
            format!("exit {} {out:?}", s.0.map_or("signal".into(), |c| c.to_string()))
        };
        println!("\n{title}: check / runc / claude-shim");
        for (name, theirs, ours) in &self.rows {
            let verdict = if theirs == ours { "same" } else { "DIFFERENT" };
            println!(
                "{name:<44} | runc {} | claude-shim {} | {verdict}",
                cell(theirs),
                cell(ours)
            );
        }
        let differ: Vec<&str> = self
            .rows
            .iter()
            .filter(|(_, theirs, ours)| theirs != ours)
            .map(|(name, ..)| name.as_str())
            .collect();
        assert!(differ.is_empty(), "claude-shim differs from runc in: {differ:?}");
    }
}
