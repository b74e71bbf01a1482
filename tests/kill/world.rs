//! The scratch world of one suite run: its state root, working directory and
//! cgroup parent, a bundle and a policy per network mode, and the runtime
//! command of each (verb, mode) case. The bottom of the suite.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use claude_shim_e2e::*;
use serde_json::json;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) enum Verb {
    Create,
    Run,
    Sandbox,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) enum Mode {
    None,
    Allowlist,
    Public,
}

impl Mode {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::None => "none",
            Mode::Allowlist => "allowlist",
            Mode::Public => "public",
        }
    }
}

/// The scratch world of one suite run.
pub(crate) struct World {
    pub(crate) env: Env,
    /// The sandboxes' working directory (placeholders appear here).
    pub(crate) work: PathBuf,
    /// What `work` held before the suite.
    pub(crate) work_before: BTreeSet<PathBuf>,
    /// The cgroup parent every container goes under.
    pub(crate) cgroup_parent: String,
    /// In every container process's command line: `sleep 0.3<digits>`.
    pub(crate) marker: String,
    bundles: BTreeMap<Mode, PathBuf>,
    pub(crate) policies: BTreeMap<Mode, String>,
}

impl World {
    pub(crate) fn new() -> Self {
        let env = Env::new();
        fs::create_dir_all(&env.root).unwrap();
        let work = env.dir.path().join("work");
        fs::create_dir_all(work.join(".git")).unwrap();
        fs::write(work.join(".git/config"), "[core]\n").unwrap();
        fs::write(work.join("src.txt"), "code\n").unwrap();
        let work_before = tree(&work);
        let pid = std::process::id();
        let marker = format!("0.3{:07}", pid % 10_000_000);
        let mut w = World {
            env,
            work,
            work_before,
            cgroup_parent: format!("/claude-shim-kill-{pid}"),
            marker,
            bundles: BTreeMap::new(),
            policies: BTreeMap::new(),
        };
        let public = w.env.dir.path().join("public.toml");
        fs::write(&public, "version = 1\n[network]\nmode = \"public\"\n").unwrap();
        w.policies.insert(Mode::None, "offline".into());
        w.policies.insert(Mode::Allowlist, "agent".into());
        w.policies.insert(Mode::Public, public.to_string_lossy().into_owned());
        for mode in [Mode::None, Mode::Allowlist, Mode::Public] {
            let marker = w.marker.clone();
            let b = w.env.bundle(mode.name(), |v| {
                set_args(v, &["sleep", &marker]);
                let ns = v["linux"]["namespaces"].as_array_mut().unwrap();
                if !ns.iter().any(|n| n["type"] == "network") {
                    ns.push(json!({"type": "network"}));
                }
                v["annotations"] = json!({"run.claude-shim.network": mode.name()});
            });
            w.bundles.insert(mode, b);
        }
        w
    }

    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut c = self.env.command(args);
        c.env("CLAUDE_SHIM_CGROUP_PARENT", &self.cgroup_parent)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    }

    /// The runtime command of one case; `id` for create and run.
    pub(crate) fn runtime(&self, verb: Verb, mode: Mode, id: &str, sandbox_cmd: &[&str]) -> Command {
        let bundle = self.bundles[&mode].to_str().unwrap().to_owned();
        match verb {
            Verb::Create => self.command(&["create", "--bundle", &bundle, id]),
            Verb::Run => self.command(&["run", "--bundle", &bundle, id]),
            Verb::Sandbox => {
                let mut args = vec![
                    "sandbox",
                    "--policy",
                    &self.policies[&mode],
                    "--workdir",
                    self.work.to_str().unwrap(),
                    "--",
                ];
                args.extend_from_slice(sandbox_cmd);
                self.command(&args)
            }
        }
    }

    /// Runs to the end; the exit status and stderr (through a file: a
    /// created container keeps the runtime's stdio open).
    pub(crate) fn finish(&self, args: &[&str]) -> (Option<i32>, String) {
        let out = output_of(self.command(args), self.env.dir.path());
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Every path under `dir` (not following symlinks).
pub(crate) fn tree(dir: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
            out.insert(e.path());
        }
    }
    out
}
