//! The sandbox runs of a project, for the verbs that act on one after it
//! started (`allow`, `deny`, `denials`): the running ones, from the
//! runtime's state and each one's effective spec (its annotations name the
//! working directory, the network mode and the policy file), and the ended
//! ones whose network log was kept (the proxy's `started` line names the
//! working directory). A run belongs to the project of every directory at
//! or below its working directory.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use claude_shim_bundle::annotations;

use crate::hostfs::{Dir, Kind};
use crate::runtime::Runtime;

/// A sandbox that runs now.
#[derive(Debug, Clone)]
pub struct Running {
    pub id: String,
    /// Its directory of claude-shim's state (proxy.log, control.sock).
    pub meta_dir: PathBuf,
    pub workdir: Option<PathBuf>,
    /// `none`, `allowlist` or `public`; None for a container without a mode.
    pub mode: Option<String>,
    /// The policy file it started from; None for an embedded policy.
    pub policy_file: Option<PathBuf>,
    pub policy_name: Option<String>,
    /// The creation time as `state` gives it (RFC 3339), to order runs.
    pub created: String,
}

/// Every running (or created, or paused) container under the root, newest first.
pub fn running(rt: &Runtime) -> Vec<Running> {
    let mut out: Vec<Running> = rt
        .list()
        .unwrap_or_default()
        .into_iter()
        .filter(|s| s["status"] != "stopped")
        .filter_map(|s| {
            let id = s["id"].as_str()?.to_owned();
            let spec = rt.effective_spec(&id).ok()?;
            let ann = spec.annotations().clone().unwrap_or_default();
            Some(Running {
                meta_dir: rt.meta_dir(&id),
                workdir: ann.get(annotations::WORKDIR).map(PathBuf::from),
                mode: ann.get(annotations::NETWORK).cloned(),
                policy_file: ann.get(annotations::POLICY_FILE).map(PathBuf::from),
                policy_name: ann.get(annotations::POLICY).cloned(),
                created: s["created"].as_str().unwrap_or_default().to_owned(),
                id,
            })
        })
        .collect();
    out.sort_by(|a, b| b.created.cmp(&a.created));
    out
}

/// Whether a run whose working directory is `workdir` is one of the project `cwd` lies in.
pub fn holds(workdir: Option<&Path>, cwd: &Path) -> bool {
    workdir.is_some_and(|w| cwd.starts_with(w))
}

/// The one running sandbox `wanted` names, or else the only one of the
/// project of `cwd` among those `fits` keeps; `what` says what for.
pub fn pick(
    runs: &[Running],
    wanted: Option<&str>,
    cwd: &Path,
    what: &str,
    fits: impl Fn(&Running) -> bool,
) -> Result<Running> {
    if let Some(id) = wanted {
        return match runs.iter().find(|r| r.id == id) {
            Some(r) => Ok(r.clone()),
            None => bail!("{what} of {id}: no sandbox with that id runs (under this --root)"),
        };
    }
    let ours: Vec<&Running> = runs
        .iter()
        .filter(|r| holds(r.workdir.as_deref(), cwd) && fits(r))
        .collect();
    match ours.as_slice() {
        [one] => Ok((*one).clone()),
        [] => bail!(
            "{what}: no sandbox of this project ({}) runs; name one with --run ID",
            cwd.display()
        ),
        many => bail!(
            "{what}: {} sandboxes of this project run ({}); name one with --run ID",
            many.len(),
            many.iter().map(|r| r.id.as_str()).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// The working directory a network log names in its proxy's `started` line
/// (among its first lines).
pub fn log_workdir(log: impl Read) -> Option<PathBuf> {
    BufReader::new(log.take(64 * 1024))
        .lines()
        .take(8)
        .map_while(|l| l.ok())
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(&l).ok())
        .find(|v| v["event"] == "started")
        .and_then(|v| v["workdir"].as_str().map(PathBuf::from))
}

/// The kept network log of the newest ended run of the project of `cwd`:
/// its run id and name in `logs`. The logs directory is reached through a
/// handle that follows no link (a sandbox whose working directory is the
/// home can write there).
pub fn last_kept(logs: &Dir, cwd: &Path) -> Result<Option<(String, PathBuf)>> {
    let mut found: Vec<(i128, String, PathBuf)> = Vec::new();
    for (name, kind) in logs.list(Path::new(""))? {
        let rel = PathBuf::from(&name);
        let Some(id) = rel.to_str().and_then(|n| n.strip_suffix(".log")) else {
            continue;
        };
        if kind != Kind::File {
            continue;
        }
        let (Ok(Some(st)), Ok(file)) = (logs.stat(&rel), logs.open_file(&rel)) else {
            continue;
        };
        if holds(log_workdir(file).as_deref(), cwd) {
            found.push((st.mtime_ns, id.to_owned(), rel));
        }
    }
    Ok(found.into_iter().max().map(|(_, id, rel)| (id, rel)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: &str, workdir: &str) -> Running {
        Running {
            id: id.into(),
            meta_dir: PathBuf::from("/state").join(id),
            workdir: Some(workdir.into()),
            mode: Some("allowlist".into()),
            policy_file: None,
            policy_name: None,
            created: String::new(),
        }
    }

    #[test]
    fn the_only_run_of_the_project_is_picked() {
        let runs = [run("a", "/p"), run("b", "/q"), run("c", "/q")];
        let any = |_: &Running| true;
        assert_eq!(pick(&runs, None, Path::new("/p/src"), "x", any).unwrap().id, "a");
        let many = pick(&runs, None, Path::new("/q"), "allow", any)
            .unwrap_err()
            .to_string();
        assert_eq!(
            many,
            "allow: 2 sandboxes of this project run (b, c); name one with --run ID"
        );
        let none = pick(&runs, None, Path::new("/r"), "allow", any)
            .unwrap_err()
            .to_string();
        assert!(none.contains("no sandbox of this project (/r) runs"), "{none}");
        assert_eq!(pick(&runs, Some("c"), Path::new("/r"), "x", any).unwrap().id, "c");
        assert!(pick(&runs, Some("d"), Path::new("/p"), "x", any).is_err());
        // `/pq` is not below `/p`.
        assert!(pick(&runs, None, Path::new("/pq"), "x", any).is_err());
    }

    #[test]
    fn a_log_names_its_run_s_workdir() {
        let log = "{\"event\":\"policy change\"}\n{\"event\":\"started\",\"workdir\":\"/home/u/proj\"}\n";
        assert_eq!(log_workdir(log.as_bytes()), Some(PathBuf::from("/home/u/proj")));
        assert_eq!(log_workdir("{\"event\":\"started\"}\n".as_bytes()), None);
    }
}
