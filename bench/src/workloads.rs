//! The agent workloads and the source tree they run on: a generated git
//! repository (git status, git log --stat), one generated C file (gcc -O2 -c),
//! a copy of the host's headers (find | xargs grep) and a small make project.
//! The tree is generated once per size and reused; it is bind-mounted at the
//! same path into every sandbox, so every runtime runs the same commands.

use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Size {
    pub repo_files: usize,
    pub repo_commits: usize,
    pub files_per_commit: usize,
    pub c_functions: usize,
    pub make_units: usize,
    pub make_functions: usize,
    /// Headers copied: all of /usr/include, or only /usr/include/linux.
    pub all_headers: bool,
}

pub const FULL: Size = Size {
    repo_files: 3000,
    repo_commits: 200,
    files_per_commit: 20,
    c_functions: 150,
    make_units: 8,
    make_functions: 40,
    all_headers: true,
};

pub const QUICK: Size = Size {
    repo_files: 300,
    repo_commits: 20,
    files_per_commit: 10,
    c_functions: 20,
    make_units: 4,
    make_functions: 10,
    all_headers: false,
};

/// One workload: a metric id and the argv the timing probe runs in the tree.
pub struct Workload {
    pub metric: &'static str,
    pub argv: Vec<String>,
}

pub fn workloads(tree: &Path) -> Vec<Workload> {
    let t = |p: &str| tree.join(p).display().to_string();
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        Workload {
            metric: "workload_git_status",
            argv: v(&["git", "-C", &t("repo"), "status"]),
        },
        Workload {
            metric: "workload_git_log_stat",
            argv: v(&["git", "-C", &t("repo"), "log", "--stat"]),
        },
        Workload {
            metric: "workload_gcc",
            argv: v(&["gcc", "-O2", "-pipe", "-c", &t("src/gen.c"), "-o", &t("out/gen.o")]),
        },
        Workload {
            metric: "workload_find_grep",
            // grep exits 1 for a batch without a match, so xargs 123 is fine; 126/127 (no grep) is not.
            argv: v(&[
                "sh",
                "-c",
                "find headers -name '*.h' -print0 | xargs -0 grep -l -e define >/dev/null; test $? -le 123",
            ]),
        },
        Workload {
            metric: "workload_make",
            argv: v(&["make", "-s", "-B", "-j2", "-C", &t("mk")]),
        },
    ]
}

/// A small deterministic generator, so the tree is the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64* (Vigna, "An experimental exploration of Marsaglia's xorshift generators").
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const WORDS: &[&str] = &[
    "sandbox",
    "bundle",
    "policy",
    "runtime",
    "seccomp",
    "namespace",
    "mount",
    "proxy",
    "agent",
    "probe",
    "filter",
    "cgroup",
    "pasta",
    "kernel",
    "syscall",
    "process",
    "container",
    "network",
    "allow",
    "deny",
];

fn text(rng: &mut Rng, lines: usize) -> String {
    let mut s = String::new();
    for _ in 0..lines {
        let n = 4 + rng.below(8);
        let line: Vec<&str> = (0..n).map(|_| WORDS[rng.below(WORDS.len())]).collect();
        let _ = writeln!(s, "{}", line.join(" "));
    }
    s
}

fn run(cmd: &mut Command, what: &str) -> Result<()> {
    let out = cmd.output().with_context(|| format!("run {what}"))?;
    if !out.status.success() {
        bail!("run {what}: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

fn repo(dir: &Path, size: &Size) -> Result<()> {
    fs::create_dir_all(dir)?;
    let git = |args: &[&str]| {
        let mut c = Command::new("git");
        c.arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null");
        c
    };
    run(git(&["init", "-q", "-b", "main"]).stdout(Stdio::null()), "git init")?;
    let mut rng = Rng(0x5eed_cafe);
    let path = |i: usize| format!("src/d{:02}/f{:04}.txt", i % 50, i);
    let mut stream = Vec::new();
    for c in 0..size.repo_commits {
        let when = 1_700_000_000 + c * 3600;
        let msg = format!("commit {c}: {}", text(&mut rng, 1).trim());
        let _ = write!(
            stream,
            "commit refs/heads/main\nauthor Bench <bench@example.invalid> {when} +0000\ncommitter Bench <bench@example.invalid> {when} +0000\ndata {}\n{msg}\n",
            msg.len() + 1
        );
        let files: Vec<usize> = if c == 0 {
            (0..size.repo_files).collect()
        } else {
            (0..size.files_per_commit).map(|_| rng.below(size.repo_files)).collect()
        };
        for f in files {
            let lines = 20 + rng.below(40);
            let body = text(&mut rng, lines);
            let _ = write!(stream, "M 100644 inline {}\ndata {}\n{body}\n", path(f), body.len());
        }
        stream.push(b'\n');
    }
    let mut child = git(&["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .context("run git fast-import")?;
    child
        .stdin
        .take()
        .context("open git fast-import's stdin")?
        .write_all(&stream)
        .context("feed git fast-import")?;
    if !child.wait()?.success() {
        bail!("run git fast-import in {}: it failed", dir.display());
    }
    run(
        git(&["reset", "-q", "--hard", "main"]).stdout(Stdio::null()),
        "git reset --hard",
    )?;
    // A few edits and new files, so status has something to report.
    for i in 0..10.min(size.repo_files) {
        let p = dir.join(path(i * 7 % size.repo_files));
        let mut s = fs::read_to_string(&p)?;
        s.push_str("edited\n");
        fs::write(&p, s)?;
        fs::write(dir.join(format!("untracked{i}.txt")), "new\n")?;
    }
    Ok(())
}

fn c_source(functions: usize, seed: u64) -> String {
    let mut rng = Rng(seed);
    let mut s = String::from("#include <stddef.h>\n#include <string.h>\n\n");
    for f in 0..functions {
        let (a, b, c) = (1 + rng.below(97), 1 + rng.below(89), 1 + rng.below(13));
        let _ = write!(
            s,
            "unsigned long f{f}(const unsigned char *p, size_t n, unsigned long k) {{\n\
             \tunsigned long h = {a}UL, t[16];\n\tmemset(t, 0, sizeof t);\n\
             \tfor (size_t i = 0; i < n; i++) {{\n\t\th = (h * {b}UL) ^ (p[i] + k);\n\
             \t\tt[i & 15] += h >> {c};\n\t\tif (h & 1) h += t[(i + {c}) & 15]; else h -= t[i & 7];\n\t}}\n\
             \tfor (int j = 0; j < 16; j++) h ^= t[j] << (j & 7);\n\treturn h;\n}}\n\n"
        );
    }
    s
}

fn make_project(dir: &Path, size: &Size) -> Result<()> {
    fs::create_dir_all(dir)?;
    let mut objs = Vec::new();
    for u in 0..size.make_units {
        fs::write(
            dir.join(format!("u{u}.c")),
            c_source(size.make_functions, 100 + u as u64),
        )?;
        objs.push(format!("u{u}.o"));
    }
    let makefile = format!(
        "OBJS = {}\nall: lib.a\nlib.a: $(OBJS)\n\tar rcs $@ $(OBJS)\n%.o: %.c\n\t$(CC) -O1 -pipe -c $< -o $@\n",
        objs.join(" ")
    );
    fs::write(dir.join("Makefile"), makefile)?;
    Ok(())
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    run(
        Command::new("cp").arg("-a").arg(from).arg(to),
        &format!("cp -a {} {}", from.display(), to.display()),
    )
}

/// Builds the tree under `dir` unless one of this size is already there.
pub fn prepare(dir: &Path, size: &Size) -> Result<PathBuf> {
    let stamp = dir.join(".generated");
    let want = format!("{size:?}\n");
    if fs::read_to_string(&stamp).ok().as_deref() == Some(want.as_str()) {
        return Ok(dir.to_path_buf());
    }
    let _ = fs::remove_dir_all(dir);
    for d in ["src", "out", "tmp", "headers"] {
        fs::create_dir_all(dir.join(d)).with_context(|| format!("create {}", dir.join(d).display()))?;
    }
    repo(&dir.join("repo"), size).with_context(|| format!("generate the git repository in {}", dir.display()))?;
    fs::write(dir.join("src/gen.c"), c_source(size.c_functions, 7))?;
    make_project(&dir.join("mk"), size)?;
    if size.all_headers {
        copy_tree(Path::new("/usr/include"), &dir.join("headers/include"))?;
    } else {
        copy_tree(Path::new("/usr/include/linux"), &dir.join("headers/linux"))?;
    }
    fs::write(&stamp, want)?;
    Ok(dir.to_path_buf())
}

/// A tree of `files` empty files for the start-up row in a large working
/// directory: 150 top-level directories of 10 subdirectories, files spread
/// evenly, and three .env files (which the sandbox hides) at different depths.
/// Kept between runs (a `.generated` stamp holds the count).
pub fn big_tree(dir: &Path, files: usize) -> Result<PathBuf> {
    let stamp = dir.join(".generated");
    let want = format!("{files} files\n");
    if fs::read_to_string(&stamp).ok().as_deref() == Some(want.as_str()) {
        return Ok(dir.to_path_buf());
    }
    let _ = fs::remove_dir_all(dir);
    let leaves = 150 * 10;
    let per_leaf = files.div_ceil(leaves);
    let mut made = 0;
    for top in 0..150 {
        for sub in 0..10 {
            let leaf = dir.join(format!("d{top:03}/s{sub}"));
            fs::create_dir_all(&leaf).with_context(|| format!("create {}", leaf.display()))?;
            for f in 0..per_leaf {
                if made == files {
                    break;
                }
                let p = leaf.join(format!("f{f:03}.txt"));
                fs::File::create(&p).with_context(|| format!("create {}", p.display()))?;
                made += 1;
            }
        }
    }
    for env in [".env", "d010/.env.local", "d120/s7/.env"] {
        let p = dir.join(env);
        fs::write(&p, "TOKEN=not-a-secret\n").with_context(|| format!("write {}", p.display()))?;
    }
    fs::write(&stamp, want)?;
    Ok(dir.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_big_tree_holds_the_files_asked_for() {
        let d = tempfile::tempdir().unwrap();
        let root = big_tree(&d.path().join("t"), 3001).unwrap();
        let mut n = 0;
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            for e in fs::read_dir(dir).unwrap().flatten() {
                if e.file_type().unwrap().is_dir() {
                    stack.push(e.path());
                } else if e.file_name().to_string_lossy().starts_with('f') {
                    n += 1;
                }
            }
        }
        assert_eq!(n, 3001);
        assert!(root.join("d120/s7/.env").is_file());
    }

    #[test]
    fn generated_text_is_deterministic() {
        assert_eq!(c_source(3, 7), c_source(3, 7));
        assert_ne!(c_source(3, 7), c_source(3, 8));
        assert_eq!(text(&mut Rng(1), 5), text(&mut Rng(1), 5));
    }

    #[test]
    fn every_workload_runs_in_the_tree() {
        let w = workloads(Path::new("/t"));
        assert_eq!(w.len(), 5);
        assert!(w.iter().all(|w| w.metric.starts_with("workload_")));
        assert!(w[0].argv.contains(&"/t/repo".to_owned()));
    }
}
