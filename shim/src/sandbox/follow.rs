//! `claude-shim denials [--follow] [ID]`: the hosts a running sandbox's
//! proxy refused, read from its proxy log (in the runtime's state, beside
//! the container's), one line each as the exit report prints them. The
//! whole-agent TUI owns its terminal while it runs, so a refusal printed
//! there would break its screen or vanish under it; another terminal can
//! watch this instead (`claude` prints the command line at start).

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::denials::{refused, upstream_errors};

/// How often a followed log is read again.
const POLL: Duration = Duration::from_millis(300);

/// The meta directory of `id` under `ours` (`<root>/.claude-shim`), or of
/// the sandbox whose proxy log started last.
fn sandbox_dir(ours: &Path, id: Option<&str>) -> Result<PathBuf> {
    if let Some(id) = id {
        if id.is_empty() || id.contains('/') || id.starts_with('.') {
            bail!("follow the denials of {id:?}: not a container id");
        }
        let dir = ours.join(id);
        if !dir.join("proxy.log").is_file() {
            bail!("follow the denials of {id}: no running sandbox with a proxy has that id");
        }
        return Ok(dir);
    }
    let newest = std::fs::read_dir(ours)
        .with_context(|| format!("read {}", ours.display()))?
        .flatten()
        .filter_map(|e| {
            let log = e.path().join("proxy.log");
            let m = std::fs::metadata(&log).ok()?;
            Some((m.created().or_else(|_| m.modified()).ok()?, e.path()))
        })
        .max();
    match newest {
        Some((_, dir)) => Ok(dir),
        None => bail!(
            "follow the denials: no running sandbox with a proxy under {}",
            ours.display()
        ),
    }
}

/// What of the log is new since `printed` lines: the new lines to print.
fn new_lines(log: &str, printed: &mut (usize, usize)) -> Vec<String> {
    let mut out = Vec::new();
    let r = refused(log);
    for l in r.iter().skip(printed.0) {
        out.push(format!("claude-shim: refused egress: {l}"));
    }
    printed.0 = r.len();
    let u = upstream_errors(log);
    for l in u.iter().skip(printed.1) {
        out.push(format!("claude-shim: API gateway: {l}"));
    }
    printed.1 = u.len();
    out
}

pub fn denials(ours: &Path, id: Option<&str>, follow: bool) -> Result<i32> {
    let dir = sandbox_dir(ours, id)?;
    let name = dir.file_name().unwrap_or_default().to_string_lossy().into_owned();
    if follow {
        println!("claude-shim: following the denials of {name} (until it ends)");
    }
    let mut file =
        std::fs::File::open(dir.join("proxy.log")).with_context(|| format!("open the proxy log of {name}"))?;
    let mut text = String::new();
    let mut printed = (0, 0);
    loop {
        // Only whole lines: the proxy may be half-way through one.
        let mut chunk = Vec::new();
        file.read_to_end(&mut chunk).context("read the proxy log")?;
        let whole = chunk.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        file.seek(SeekFrom::Current(-((chunk.len() - whole) as i64)))
            .context("read the proxy log")?;
        text.push_str(&String::from_utf8_lossy(&chunk[..whole]));
        for l in new_lines(&text, &mut printed) {
            println!("{l}");
        }
        // The log goes with the container's state when it is deleted.
        if !follow || !dir.exists() {
            return Ok(0);
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refusal_is_printed_once_as_it_comes() {
        let mut printed = (0, 0);
        let a = r#"{"proto":"http-connect","host":"evil.example","port":443,"decision":"deny","reason":"not on the allowlist"}
"#;
        assert_eq!(
            new_lines(a, &mut printed),
            ["claude-shim: refused egress: evil.example:443 (not on the allowlist)"]
        );
        let b = format!(
            "{a}{a}{}\n",
            r#"{"proto":"gateway","upstream_error":"the upstream 127.0.0.1:9 did not answer: refused"}"#
        );
        assert_eq!(
            new_lines(&b, &mut printed),
            ["claude-shim: API gateway: the upstream 127.0.0.1:9 did not answer: refused"]
        );
        assert!(new_lines(&b, &mut printed).is_empty());
    }
}
