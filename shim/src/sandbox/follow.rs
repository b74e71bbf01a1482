//! `claude-shim denials [--follow] [RUN]`: the hosts a sandbox's proxy
//! refused, one line each as the exit report prints them, and the changes
//! made from the host (`allow`, `deny`). While the run goes on they are read
//! from its proxy log (in the runtime's state, beside the container's), with
//! the command that allows each refused host; after it ended, from its kept
//! network log. Without RUN: the running sandbox of the project of the
//! current directory, else its last run that kept a log. The whole-agent
//! TUI owns its terminal while it runs, so a refusal printed there would
//! break its screen or vanish under it; another terminal can watch this
//! instead (`claude` prints the command line at start).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::denials::{changes, refusals, upstream_errors};
use super::lookup;
use crate::runtime::Runtime;

/// How often a followed log is read again.
const POLL: Duration = Duration::from_millis(300);

/// The log to read: a running sandbox's proxy log (with the command that
/// allows a host in it), or an ended run's kept log.
struct Source {
    id: String,
    file: File,
    /// While it runs: its state directory (gone once it is deleted), and the
    /// `claude-shim` command line prefix (`--root` included) for the offers.
    live: Option<(PathBuf, String)>,
}

/// What of the log is new since `printed`: the lines to print.
fn new_lines(log: &str, printed: &mut [usize; 3], offer: Option<(&str, &str)>) -> Vec<String> {
    let mut out = Vec::new();
    let r = refusals(log);
    for refusal in r.iter().skip(printed[0]) {
        let mut line = format!("claude-shim: refused egress: {}", refusal.line);
        if let (Some(entry), Some((shim, id))) = (&refusal.entry, offer) {
            line.push_str(&format!("; to allow it: {shim} allow --run {id} {entry}"));
        }
        out.push(line);
    }
    printed[0] = r.len();
    let c = changes(log);
    for l in c.iter().skip(printed[1]) {
        out.push(format!("claude-shim: changed from the host: {l}"));
    }
    printed[1] = c.len();
    let u = upstream_errors(log);
    for l in u.iter().skip(printed[2]) {
        out.push(format!("claude-shim: API gateway: {l}"));
    }
    printed[2] = u.len();
    out
}

/// The command line prefix that reaches the runs of `rt`.
fn shim_command(rt: &Runtime) -> String {
    match Runtime::new(None, false) {
        Ok(d) if d.root == rt.root => "claude-shim".to_owned(),
        _ => format!("claude-shim --root {}", rt.root.display()),
    }
}

fn not_an_id(id: &str) -> bool {
    id.is_empty() || id.contains('/') || id.starts_with('.')
}

fn open_live(dir: &Path, id: &str, rt: &Runtime) -> Result<Source> {
    let file = File::open(dir.join("proxy.log")).with_context(|| format!("open the proxy log of {id}"))?;
    Ok(Source {
        id: id.to_owned(),
        file,
        live: Some((dir.to_path_buf(), shim_command(rt))),
    })
}

fn open_kept(logs: &crate::hostfs::Dir, id: &str, rel: &Path) -> Result<Source> {
    let file = logs
        .open_file(rel)
        .with_context(|| format!("open the network log of {id}"))?;
    Ok(Source {
        id: id.to_owned(),
        file,
        live: None,
    })
}

fn source(rt: &Runtime, id: Option<&str>) -> Result<Source> {
    let ours = rt.root.join(".claude-shim");
    let logs = || super::state_dir("logs");
    if let Some(id) = id {
        if not_an_id(id) {
            bail!("show the denials of {id:?}: not a run id");
        }
        let dir = ours.join(id);
        if dir.join("proxy.log").is_file() {
            return open_live(&dir, id, rt);
        }
        let rel = PathBuf::from(format!("{id}.log"));
        let logs = logs()?;
        if logs.stat(&rel)?.is_some() {
            return open_kept(&logs, id, &rel);
        }
        bail!(
            "show the denials of {id}: no sandbox with a proxy runs with that id, and no network log of it is kept \
             in {} (a run that made no network request keeps none)",
            logs.path().display()
        );
    }
    let cwd = std::env::current_dir().context("read the working directory")?;
    let cwd = std::fs::canonicalize(&cwd).unwrap_or(cwd);
    let live = lookup::running(rt);
    if let Some(r) = live
        .iter()
        .find(|r| lookup::holds(r.workdir.as_deref(), &cwd) && r.meta_dir.join("proxy.log").is_file())
    {
        return open_live(&r.meta_dir, &r.id, rt);
    }
    let logs = logs()?;
    match lookup::last_kept(&logs, &cwd)? {
        Some((id, rel)) => open_kept(&logs, &id, &rel),
        None => bail!(
            "show the denials: no sandbox with a proxy runs for this project ({}) and no network log of one of its \
             runs is kept in {}; name a run: claude-shim denials RUN",
            cwd.display(),
            logs.path().display()
        ),
    }
}

pub fn denials(rt: &Runtime, id: Option<&str>, follow: bool) -> Result<i32> {
    let Source { id, mut file, live } = source(rt, id)?;
    match (&live, follow) {
        (Some(_), true) => println!("claude-shim: following the denials of {id} (until it ends)"),
        (None, _) => println!("claude-shim: the denials of {id} (ended; from its kept network log)"),
        (Some(_), false) => {}
    }
    let offer = live.as_ref().map(|(_, shim)| (shim.as_str(), id.as_str()));
    let mut text = String::new();
    let mut printed = [0; 3];
    loop {
        // Only whole lines: the proxy may be half-way through one.
        let mut chunk = Vec::new();
        file.read_to_end(&mut chunk).context("read the network log")?;
        let whole = chunk.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        file.seek(SeekFrom::Current(-((chunk.len() - whole) as i64)))
            .context("read the network log")?;
        text.push_str(&String::from_utf8_lossy(&chunk[..whole]));
        for l in new_lines(&text, &mut printed, offer) {
            println!("{l}");
        }
        // The proxy log goes with the container's state when it is deleted.
        match &live {
            Some((dir, _)) if follow && dir.exists() => std::thread::sleep(POLL),
            _ => return Ok(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refusal_is_printed_once_as_it_comes() {
        let mut printed = [0; 3];
        let a = r#"{"proto":"http-connect","host":"evil.example","port":443,"decision":"deny","reason":"not on the allowlist"}
"#;
        assert_eq!(
            new_lines(a, &mut printed, Some(("claude-shim", "sandbox-1"))),
            ["claude-shim: refused egress: evil.example:443 (not on the allowlist); to allow it: claude-shim allow --run sandbox-1 evil.example"]
        );
        let b = format!(
            "{a}{a}{}\n{}\n",
            r#"{"proto":"gateway","upstream_error":"the upstream 127.0.0.1:9 did not answer: refused"}"#,
            r#"{"event":"policy change","op":"allow","entry":"evil.example","said":"evil.example is allowed (allowed by evil.example)"}"#
        );
        assert_eq!(
            new_lines(&b, &mut printed, None),
            [
                "claude-shim: changed from the host: allow evil.example: evil.example is allowed (allowed by evil.example)",
                "claude-shim: API gateway: the upstream 127.0.0.1:9 did not answer: refused"
            ]
        );
        assert!(new_lines(&b, &mut printed, None).is_empty());
    }
}
