//! The policy fuzz suite (issue 11): generated policies go through what
//! `claude-shim bundle` runs, `Policy::from_toml_str` then `compile` against a
//! host with hostile symlinks (to `/`, into /proc, loops). 20,000 cases per
//! run; 0 panics and every error one line. A failing input is shrunk by
//! proptest and printed; keep it as a file under tests/fuzz/regressions/policy/,
//! which every run replays first. No case touches the machine: the host is a
//! map in memory.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use claude_shim_bundle::{compile, HostView, Invocation, Owner, PathKind, Policy};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

const CASES: u32 = 20_000;

struct Host(BTreeMap<PathBuf, PathKind>);

impl Host {
    fn new() -> Self {
        let mut m = BTreeMap::new();
        for d in [
            "/",
            "/usr",
            "/usr/bin",
            "/etc",
            "/proc",
            "/proc/sys",
            "/sys",
            "/dev",
            "/tmp",
            "/run",
            "/var",
            "/var/tmp",
            "/home",
            "/home/u",
            "/home/u/.ssh",
            "/home/u/.cache",
            "/home/u/proj",
            "/home/u/proj/.git",
            "/home/u/proj/.git/hooks",
            "/data",
        ] {
            m.insert(PathBuf::from(d), PathKind::Dir);
        }
        for f in [
            "/home/u/.netrc",
            "/etc/shadow",
            "/home/u/proj/.env",
            "/home/u/proj/.git/config",
            "/profile.json",
        ] {
            m.insert(PathBuf::from(f), PathKind::File);
        }
        for (l, t) in [
            ("/bin", "usr/bin"),
            ("/home/u/root", "/"),
            ("/home/u/proc", "../../proc/sys"),
            ("/home/u/loop", "/home/u/loop"),
            ("/home/u/ssh", ".ssh"),
            ("/home/u/proj/.claude", "/etc"),
            ("/home/u/proj/.vscode", "../../../dev/shm"),
            ("/home/u/dangling", "/nowhere/x"),
        ] {
            m.insert(PathBuf::from(l), PathKind::Symlink(PathBuf::from(t)));
        }
        m.insert(PathBuf::from("/dev/zero"), PathKind::Other);
        Self(m)
    }
}

impl HostView for Host {
    fn kind(&self, path: &Path) -> Option<PathKind> {
        self.0.get(path).cloned()
    }

    fn read_dir(&self, path: &Path) -> std::io::Result<Vec<(OsString, PathKind)>> {
        Ok(self
            .0
            .iter()
            .filter(|(p, _)| p.parent() == Some(path))
            .map(|(p, k)| (p.file_name().unwrap_or_default().to_owned(), k.clone()))
            .collect())
    }

    fn find(
        &self,
        root: &Path,
        matches: &dyn Fn(&str) -> bool,
        _max_depth: usize,
        max_entries: usize,
    ) -> std::io::Result<Vec<(PathBuf, PathKind)>> {
        Ok(self
            .0
            .iter()
            .filter(|(p, _)| {
                p.starts_with(root) && *p != root && p.file_name().and_then(|n| n.to_str()).is_some_and(matches)
            })
            .map(|(p, k)| (p.clone(), k.clone()))
            .take(max_entries)
            .collect())
    }

    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        match self.0.get(path) {
            Some(PathKind::File) if path == Path::new("/profile.json") => {
                Ok(br#"{"defaultAction":"SCMP_ACT_ALLOW"}"#.to_vec())
            }
            Some(PathKind::File) => Ok(b"{".to_vec()),
            // What the binary's bounded reader says of a device (shim/src/bounded.rs).
            Some(_) => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "it is not a regular file",
            )),
            None => Err(std::io::Error::from_raw_os_error(2)),
        }
    }

    /// Every socket-like entry, and one the host does not have.
    fn unix_sockets(&self) -> std::io::Result<Vec<PathBuf>> {
        let mut out: Vec<PathBuf> = self
            .0
            .iter()
            .filter(|(_, k)| **k == PathKind::Other)
            .map(|(p, _)| p.clone())
            .collect();
        out.push(PathBuf::from("/gone/x.sock"));
        Ok(out)
    }

    fn owner(&self, path: &Path) -> Option<Owner> {
        let mode = match self.0.get(path)? {
            _ if path == Path::new("/etc/shadow") => 0o640,
            PathKind::Dir => 0o755,
            _ => 0o644,
        };
        Some(Owner { uid: 0, gid: 0, mode })
    }

    fn root_only(
        &self,
        root: &Path,
        _max_depth: usize,
        _max_entries: usize,
        _skip: &dyn Fn(&str) -> bool,
    ) -> std::io::Result<Vec<PathBuf>> {
        Ok(self
            .0
            .keys()
            .filter(|p| p.starts_with(root) && self.owner(p).is_some_and(|o| o.mode & 0o004 == 0))
            .cloned()
            .collect())
    }
}

fn inv(unprivileged: bool, terminal: bool) -> Invocation {
    Invocation {
        workdir: "/home/u/proj".into(),
        home: "/home/u".into(),
        uid: if unprivileged { 1000 } else { 0 },
        gid: if unprivileged { 1000 } else { 0 },
        unprivileged,
        env: vec![
            ("PATH".into(), "/usr/bin".into()),
            ("GH_TOKEN".into(), "x".into()),
            ("LC_ALL".into(), "C".into()),
        ],
        args: vec!["sh".into()],
        terminal,
        rootfs: None,
    }
}

/// Strings a policy value might hold: valid ones, near misses and hostile ones.
fn string() -> impl Strategy<Value = String> {
    let long: &'static str = "x".repeat(300).leak();
    prop_oneof![
        4 => prop::sample::select(vec![
            "/", "/data", "~", "~/", "~/.cache", "~/root", "~/proc", "~/loop/x", "~/ssh", "~/dangling", "?~/nope",
            "?/data", "/proc/sys", "/sys/x", "/dev/zero", "/profile.json", "relative", "../x", "/a/../b", "~root/x",
            ".git/hooks/", ".claude/", ".vscode/", "/a\u{0}b", "a\u{0}", "\u{0}", "", " ", "*", "*.", "*.com",
            "github.com", "*.github.com:443", "a.com:0", "a.com:99999", "10.0.0.0/8", "10.0.0.1/24",
            "[fd00::/8]:443", "0.0.0.0/0", "agent", "host", "none", "allowlist", "public", "rw", "ro", "private",
            "auto", "always", "never", "CAP_NET_RAW", "CAP_SYS_ADMIN", "NET_RAW", "ptrace", "mount", "clone3",
            "socketcall", "ioctl", "mountt", "PATH", "LC_*", "GH_TOKEN", "IS_SANDBOX", "HTTPS_PROXY", "4GiB", "1",
            "0", "18446744073709551616", "1 parsec", "nofile", "NOFILE", "é", "\u{202e}", "\n", "a\nb", long,
        ])
        .prop_map(str::to_owned),
        1 => any::<String>(),
    ]
}

/// A TOML value.
fn value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        4 => string().prop_map(|s| toml_string(&s)),
        1 => any::<i64>().prop_map(|n| n.to_string()),
        1 => prop::sample::select(vec![
            "0", "1", "-1", "16777215", "4294967296", "9223372036854775807", "0.001", "1.5", "1e400", "nan", "inf",
            "true", "false",
        ])
        .prop_map(str::to_owned),
    ];
    leaf.prop_recursive(2, 8, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(", "))),
            prop::collection::vec((key(), inner), 0..3).prop_map(|kv| {
                let body: Vec<String> = kv.into_iter().map(|(k, v)| format!("{k} = {v}")).collect();
                format!("{{ {} }}", body.join(", "))
            }),
        ]
    })
}

fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Keys of the schema, and some that are not.
fn key() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "version",
        "name",
        "root",
        "workdir",
        "tmp",
        "writable",
        "readonly",
        "protected",
        "unprotected",
        "hidden",
        "unhidden",
        "hide_env_files",
        "masked",
        "allow",
        "pass_secrets",
        "set",
        "user_namespace",
        "capabilities",
        "no_new_privileges",
        "memory",
        "pids",
        "cpus",
        "best_effort",
        "rlimits",
        "profile",
        "mode",
        "deny",
        "allow_cidrs",
        "nofile",
        "core",
        "EDITOR",
        "IS_SANDBOX",
        "writabel",
        "\"quoted key\"",
    ])
    .prop_map(str::to_owned)
}

fn section() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "filesystem",
        "environment",
        "environment.set",
        "identity",
        "resources",
        "resources.rlimits",
        "seccomp",
        "network",
        "unknown",
    ])
    .prop_map(str::to_owned)
}

/// A policy document: mostly TOML made of the schema's keys, sometimes any text.
fn policy_text() -> impl Strategy<Value = String> {
    let doc = (
        prop::option::weighted(0.9, prop::sample::select(vec!["1", "2", "0", "\"1\"", "-1"])),
        prop::collection::vec((key(), value()), 0..3),
        prop::collection::vec((section(), prop::collection::vec((key(), value()), 0..5)), 0..5),
    )
        .prop_map(|(version, top, sections)| {
            let mut out = String::new();
            if let Some(v) = version {
                out.push_str(&format!("version = {v}\n"));
            }
            for (k, v) in top {
                out.push_str(&format!("{k} = {v}\n"));
            }
            for (s, kvs) in sections {
                out.push_str(&format!("[{s}]\n"));
                for (k, v) in kvs {
                    out.push_str(&format!("{k} = {v}\n"));
                }
            }
            out
        });
    prop_oneof![9 => doc, 1 => any::<String>()]
}

/// What `bundle` does with a policy text; Err names the first broken property.
fn check(text: &str, host: &Host, unprivileged: bool, terminal: bool) -> Result<(), String> {
    let policy = match Policy::from_toml_str(text, "fuzz.toml") {
        Ok(p) => p,
        Err(e) => return one_line(&e.to_string(), "use policy fuzz.toml: "),
    };
    match compile(&policy, host, &inv(unprivileged, terminal)) {
        Ok(c) => {
            let json = serde_json::to_string(&c.spec).map_err(|e| format!("the spec does not serialize: {e}"))?;
            if json.contains("\\u0000") {
                return Err(format!("a NUL byte reached the spec: {json}"));
            }
            for m in c.spec.mounts().iter().flatten() {
                let d = m.destination();
                let writable = !m.options().iter().flatten().any(|o| o == "ro");
                let bind = m.typ().as_deref() == Some("bind");
                if bind && writable && (d == Path::new("/") || d.starts_with("/proc") || d.starts_with("/sys")) {
                    return Err(format!("a writable bind at {}", d.display()));
                }
            }
            Ok(())
        }
        Err(e) => one_line(&e.to_string(), ""),
    }
}

fn one_line(e: &str, prefix: &str) -> Result<(), String> {
    if e.contains('\n') || e.contains('\r') {
        return Err(format!("a multi-line error: {e:?}"));
    }
    if e.is_empty() || !e.starts_with(prefix) {
        return Err(format!("an error that does not name the policy: {e:?}"));
    }
    Ok(())
}

fn regressions() -> Vec<(PathBuf, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fuzz/regressions/policy");
    let mut out: Vec<(PathBuf, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn regressions_still_hold() {
    let host = Host::new();
    let cases = regressions();
    assert!(!cases.is_empty(), "tests/fuzz/regressions/policy holds the kept cases");
    for (path, text) in cases {
        for (unprivileged, terminal) in [(false, false), (true, true)] {
            if let Err(e) = check(&text, &host, unprivileged, terminal) {
                panic!("{}: {e}", path.display());
            }
        }
    }
}

#[test]
fn generated_policies_never_panic_and_fail_in_one_line() {
    let seed: u64 = match std::env::var("CLAUDE_SHIM_FUZZ_SEED") {
        Ok(s) => s.parse().expect("CLAUDE_SHIM_FUZZ_SEED is a number"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1),
    };
    eprintln!("policy fuzz: {CASES} cases, seed {seed} (CLAUDE_SHIM_FUZZ_SEED={seed} replays it)");
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..].copy_from_slice(&seed.rotate_left(17).to_le_bytes());
    let config = Config {
        cases: CASES,
        failure_persistence: None,
        max_shrink_iters: 10_000,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::XorShift, &bytes));
    let host = Host::new();
    let strategy = (policy_text(), any::<bool>(), any::<bool>());
    let result = runner.run(&strategy, |(text, unprivileged, terminal)| {
        check(&text, &host, unprivileged, terminal).map_err(TestCaseError::fail)
    });
    if let Err(e) = result {
        panic!(
            "seed {seed}: {e}\nkeep the minimal input above as tests/fuzz/regressions/policy/<name>.toml once fixed"
        );
    }
}
