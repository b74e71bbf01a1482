//! One probe run and its reading: under claude-shim or runc, its results by
//! check, and the assertions the tests make on them.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use claude_shim_e2e::*;
use serde_json::Value;

use crate::host::{Host, GIT_CONFIG};

/// One probe run: its results by check id, in order, and how it ended.
pub(crate) struct Run {
    lines: Vec<Value>,
    code: Option<i32>,
    stderr: String,
}

impl Run {
    pub(crate) fn get(&self, check: &str) -> &Value {
        self.lines
            .iter()
            .find(|l| l["check"] == check)
            .unwrap_or_else(|| panic!("no result for {check:?}; stderr: {}", self.stderr))
    }

    pub(crate) fn pass(&self, check: &str) -> Option<bool> {
        self.get(check)["pass"].as_bool()
    }

    fn failures(&self) -> Vec<String> {
        self.lines
            .iter()
            .filter(|l| l["pass"] == false)
            .map(|l| format!("{} | {} | {}", l["check"], l["expected"], l["observed"]))
            .collect()
    }

    pub(crate) fn table(&self) -> String {
        let mut out = String::new();
        for l in &self.lines {
            let verdict = match l["pass"].as_bool() {
                Some(true) => "PASS",
                Some(false) => "FAIL",
                None => "N/A",
            };
            out += &format!(
                "{} | {} | {} | {verdict}\n",
                l["check"].as_str().unwrap(),
                l["expected"].as_str().unwrap(),
                l["observed"].as_str().unwrap()
            );
        }
        out
    }

    pub(crate) fn assert_all_pass(&self, runtime: &str) {
        assert_eq!(
            self.code,
            Some(0),
            "probe under {runtime} exited badly: {}",
            self.stderr
        );
        let fails = self.failures();
        assert!(
            fails.is_empty(),
            "under {runtime}, {} checks failed:\n{}\nall:\n{}",
            fails.len(),
            fails.join("\n"),
            self.table()
        );
        // Not applicable is allowed only where it cannot apply: stdout and
        // stderr are files here, not terminals.
        for l in self.lines.iter().filter(|l| l["pass"].is_null()) {
            let check = l["check"].as_str().unwrap();
            assert!(
                check == "TIOCSTI fd 1" || check == "TIOCSTI fd 2" || check == "TIOCSTI fd 0",
                "{check} is not applicable under {runtime}: {l}"
            );
            assert!(l["reason"].is_string(), "{l}");
        }
    }
}

pub(crate) fn parse(stdout: &[u8], code: Option<i32>, stderr: &[u8]) -> Run {
    let stdout = String::from_utf8_lossy(stdout);
    let stderr = String::from_utf8_lossy(stderr).into_owned();
    let lines = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("probe line {l:?}: {e}; stderr: {stderr}")))
        .collect();
    Run { lines, code, stderr }
}

pub(crate) fn under_shim(host: &Host, bundle: &Path) -> Run {
    let id = unique_id("verify");
    let out = host.env.run(&["run", "--bundle", bundle.to_str().unwrap(), &id]);
    host.env.assert_no_leaks(&id);
    assert_eq!(fs::read(host.work.join(".git/config")).unwrap(), GIT_CONFIG);
    parse(&out.stdout, out.status.code(), &out.stderr)
}

pub(crate) fn under_runc(host: &Host, bundle: &Path) -> Run {
    let id = unique_id("verify-runc");
    let root = host.env.dir.path().join("runc-state");
    let out_path = host.env.dir.path().join(format!("{id}.out"));
    let err_path = host.env.dir.path().join(format!("{id}.err"));
    let status = Command::new("runc")
        .arg("--root")
        .arg(&root)
        .args(["run", "--bundle", bundle.to_str().unwrap(), &id])
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out_path).unwrap())
        .stderr(fs::File::create(&err_path).unwrap())
        .status()
        .expect("runc is installed (hack/setup)");
    assert_gone(&root, &id);
    assert_eq!(fs::read(host.work.join(".git/config")).unwrap(), GIT_CONFIG);
    parse(
        &fs::read(&out_path).unwrap(),
        status.code(),
        &fs::read(&err_path).unwrap(),
    )
}

pub(crate) fn seccomp_checks(run: &Run) -> Vec<&Value> {
    run.lines.iter().filter(|l| l["group"] == "seccomp").collect()
}

/// Checks whose verdict differs between two runs.
pub(crate) fn verdict_differences(a: &Run, b: &Run) -> Vec<String> {
    let mut differ = Vec::new();
    for l in &a.lines {
        let check = l["check"].as_str().unwrap();
        let other = b.get(check);
        if other["pass"] != l["pass"] {
            differ.push(format!(
                "{check}: {} {} / {} {}",
                l["pass"], l["observed"], other["pass"], other["observed"]
            ));
        }
    }
    differ
}

pub(crate) fn assert_fails(run: &Run, checks: &[&str]) {
    assert_eq!(run.code, Some(0), "the probe itself must finish: {}", run.stderr);
    for check in checks {
        assert_eq!(
            run.pass(check),
            Some(false),
            "{check} should FAIL: {}\n{}",
            run.get(check),
            run.table()
        );
    }
}
