//! `__man DIR` and `__completion SHELL`: the man pages and shell completions
//! hack/install puts in place, generated from the same clap `Command` that
//! parses the command line, so they cannot drift from it.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use clap::CommandFactory;

use crate::cli::{Cli, CompletionShell};

/// One page per visible verb (`claude-shim-sandbox.1`, ...) and `claude-shim.1`.
pub fn man(dir: &Path) -> anyhow::Result<i32> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    clap_mangen::generate_to(Cli::command(), dir)
        .with_context(|| format!("write the man pages to {}", dir.display()))?;
    Ok(0)
}

/// The completion script for SHELL, on stdout.
pub fn completion(shell: CompletionShell) -> anyhow::Result<i32> {
    let shell = match shell {
        CompletionShell::Bash => clap_complete::Shell::Bash,
        CompletionShell::Zsh => clap_complete::Shell::Zsh,
        CompletionShell::Fish => clap_complete::Shell::Fish,
    };
    let mut cmd = Cli::command();
    // Into memory first: clap_complete panics on a write error (a closed pipe).
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "claude-shim", &mut script);
    std::io::stdout()
        .write_all(&script)
        .context("write the completion script to stdout")?;
    Ok(0)
}
