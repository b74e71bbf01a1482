//! claude-shim: parse the command line, set up logging, dispatch a verb, and
//! turn its result into runc's exit codes (0, the process's own status for
//! `run`/`exec`, 1 for an error, 255 for a failed `exec`).

mod admin;
mod bounded;
mod claude;
mod cli;
mod commands;
mod doctor;
mod hostfs;
mod logging;
mod network;
mod program;
mod replace;
mod runtime;
mod sandbox;
mod seal;
mod session;
mod state;
mod terminal;
mod timing;
mod units;
mod verify;

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::runtime::Runtime;

/// One line for an error and its causes, each reading naturally after "failed to".
fn error_line(err: &anyhow::Error) -> String {
    let parts: Vec<String> = err
        .chain()
        .map(|e| match e.downcast_ref::<std::io::Error>() {
            Some(io) => io_text(io),
            None => e.to_string(),
        })
        .collect();
    let line = format!("failed to {}", parts.join(": "));
    // One line, whatever the input held: a config.json value quoted in a
    // serde error may carry a newline, a carriage return or a terminal
    // escape; each control character is shown escaped (found by the
    // config.json fuzz, issue 11).
    terminal::escaped(&line).into_owned()
}

/// "No such file or directory (os error 2)" -> "no such file or directory".
fn io_text(e: &std::io::Error) -> String {
    let text = e.to_string();
    let text = match text.find(" (os error") {
        Some(i) => text[..i].to_owned(),
        None => text,
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => text,
    }
}

fn needs_seal(cmd: &Command) -> bool {
    matches!(
        cmd,
        Command::Create(_)
            | Command::Run(_)
            | Command::Exec(_)
            | Command::Sandbox(_)
            | Command::Verify(_)
            | Command::Claude(_)
    ) || matches!(cmd, Command::Shell(_) if std::env::var_os(session::SESSION_ENV).is_none())
}

fn dispatch(cli: &Cli, cmd: &Command) -> anyhow::Result<i32> {
    use commands::*;
    if let Command::Probe(a) = cmd {
        // Inside a sandbox: no state root, no cgroups, nothing but the checks.
        let args = crate::verify::probe::Args {
            expect: a.expect.as_deref(),
            expect_json: a.expect_json.as_deref(),
            print_status: a.print_status,
        };
        return crate::verify::probe::main(&args);
    }
    if let Command::Spawner = cmd {
        // Inside the session sandbox, as its init.
        return session::spawner::main();
    }
    if let Command::Connect(a) = cmd {
        // Inside a sandbox too: a stream through its proxy, nothing of the runtime.
        return network::connect::run(&a.host, a.port);
    }
    // Generated from the clap definitions; nothing of the runtime is needed.
    match cmd {
        Command::Man { dir } => return manual::man(dir),
        Command::Completion { shell } => return manual::completion(*shell),
        // Before Runtime::new: the checks must run (and say why) where it cannot.
        Command::Doctor(a) => return commands::doctor::doctor(a),
        // Review runs live in the user's state, not the runtime's.
        Command::Changes(a) => return commands::review::changes(a),
        Command::Apply(a) => return commands::review::apply(a),
        Command::Discard(a) => return commands::review::discard(a),
        _ => {}
    }
    if cli.global.systemd_cgroup {
        if !systemd_running() {
            anyhow::bail!("use --systemd-cgroup: systemd is not running on this machine");
        }
        if !runtime::cgroup_v2::is_unified() {
            anyhow::bail!("use --systemd-cgroup: this machine's cgroups are not unified (cgroup v2 only)");
        }
    }
    let rt = Runtime::new(cli.global.root.as_deref(), cli.global.systemd_cgroup)?;
    if matches!(
        cmd,
        Command::Create(_)
            | Command::Run(_)
            | Command::Sandbox(_)
            | Command::Verify(_)
            | Command::Claude(_)
            | Command::Shell(_)
    ) {
        crate::sandbox::nested::refuse()?;
    }
    match cmd {
        Command::Create(a) => create::create(&rt, a),
        Command::Start(a) => create::start(&rt, a),
        Command::State(a) => info::state(&rt, &a.container_id),
        Command::Kill(a) => create::kill(&rt, a),
        Command::Delete(a) => create::delete(&rt, a),
        Command::Run(a) => run::run(&rt, a),
        Command::Exec(a) => exec::exec(&rt, a),
        Command::Ps(a) => info::ps(&rt, a),
        Command::List(a) => info::list(&rt, a),
        Command::Pause(a) => create::pause(&rt, &a.container_id),
        Command::Resume(a) => create::resume(&rt, &a.container_id),
        Command::Update(a) => update::update(&rt, a),
        Command::Features(_) => features::features(),
        Command::Events(a) => commands::events::events(&rt, a),
        Command::Spec(a) => spec::spec(a),
        Command::Sandbox(a) => sandbox::sandbox(&rt, a),
        Command::Bundle(a) => sandbox::bundle(a),
        Command::Verify(a) => verify::verify(&rt, a),
        Command::Claude(a) => commands::claude::claude(&rt, a),
        Command::Shell(a) => commands::claude::shell(&rt, &a.command),
        Command::Gc => gc::gc(&rt),
        Command::Policy(a) => match &a.command {
            cli::PolicyCommand::Import { file } => commands::claude::policy_import(file.as_deref()),
        },
        Command::Quarantine(a) => commands::quarantine::quarantine(a),
        Command::Denials(a) => crate::sandbox::follow::denials(&rt, a.id.as_deref(), a.follow),
        Command::Allow(a) => commands::allow::change(&rt, crate::network::policy::change::Op::Allow, a),
        Command::Deny(a) => commands::allow::change(&rt, crate::network::policy::change::Op::Deny, a),
        Command::Probe(_)
        | Command::Connect(_)
        | Command::Man { .. }
        | Command::Completion { .. }
        | Command::Doctor(_)
        | Command::Changes(_)
        | Command::Apply(_)
        | Command::Discard(_)
        | Command::Spawner => {
            unreachable!("handled above")
        }
        Command::Network(a) => network::run_helper(a),
    }
}

/// runc's exit status for a command that failed: 255 for `exec` (so a caller
/// can tell the runtime's failure from the process's own status, which is
/// what `exec` otherwise returns), 1 for every other verb.
fn failure_code(cmd: &Command) -> i32 {
    match cmd {
        Command::Exec(_) => 255,
        _ => 1,
    }
}

fn systemd_running() -> bool {
    std::path::Path::new("/run/systemd/system").is_dir()
}

/// clap's usage errors as one line, with runc's exit status.
fn parse_cli() -> Cli {
    // `claude-shim-shell CMD` (a link to this binary) is `claude-shim __shell CMD`:
    // CLAUDE_CODE_SHELL_PREFIX names one program and passes one argument.
    let mut argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let called = argv
        .first()
        .and_then(|a| std::path::Path::new(a).file_name().map(|n| n.to_os_string()));
    if called.as_deref() == Some(std::ffi::OsStr::new(commands::claude::SHELL_ENTRY)) {
        argv.splice(1..1, ["__shell".into(), "--".into()]);
    }
    match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            let rendered = e.to_string();
            let first = rendered
                .lines()
                .next()
                .unwrap_or_default()
                .trim_start_matches("error: ");
            eprintln!("claude-shim: error: failed to parse the command line: {first}");
            std::process::exit(1);
        }
    }
}

fn main() {
    timing::init();
    let cli = parse_cli();
    if cli.version {
        println!("claude-shim version {}", env!("CARGO_PKG_VERSION"));
        println!("spec: {}", libcontainer::oci_spec::runtime::VERSION);
        println!("libcontainer: 0.7.0");
        println!("libseccomp: {}", runtime::guards::libseccomp_version());
        return;
    }
    let Some(cmd) = &cli.command else {
        use clap::CommandFactory;
        let _ = Cli::command().print_help();
        std::process::exit(0);
    };
    let sink = match logging::init(cli.global.log.as_deref(), cli.global.log_format, cli.global.debug) {
        Ok(s) => Some(s),
        Err(e) => {
            logging::report_error(None, &error_line(&e));
            std::process::exit(1);
        }
    };
    tracing::debug!(args = ?std::env::args().collect::<Vec<_>>(), "claude-shim started");
    if needs_seal(cmd) {
        if let Err(e) = seal::ensure_sealed() {
            logging::report_error(sink, &error_line(&e));
            std::process::exit(1);
        }
        timing::mark("sealed");
    }
    let code = match dispatch(&cli, cmd) {
        Ok(code) => code,
        Err(e) => {
            logging::report_error(sink, &error_line(&e));
            failure_code(cmd)
        }
    };
    timing::mark("exit");
    std::process::exit(code);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_after_failed_to() {
        let io = std::io::Error::from_raw_os_error(2);
        let e = anyhow::Error::new(io)
            .context("read /b/config.json")
            .context("create container x");
        assert_eq!(
            error_line(&e),
            "failed to create container x: read /b/config.json: no such file or directory"
        );
        let e = anyhow::anyhow!("unknown variant `a\r\nb\u{1b}[2J`");
        assert_eq!(error_line(&e), "failed to unknown variant `a\\r\\nb\\u{1b}[2J`");
    }
}
