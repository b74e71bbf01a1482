//! The compile tests' fake host and helpers. The tests compile whole specs
//! against it and sit in one file per concern: filesystem, git (the
//! repositories and the host-run entries below the top), identity (the
//! process pass), isolation (the linux pass), network, and spec for the spec
//! as a whole and the invocation checks.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use oci_spec::runtime::Mount;

use super::*;
use crate::policy::Policy;

mod filesystem;
mod git;
mod home;
mod identity;
mod isolation;
mod network;
mod review;
mod run_as;
mod sockets;
mod spec;

/// A host made of a map of paths; what the binary's std::fs view would say.
#[derive(Default, Clone)]
struct FakeHost {
    paths: BTreeMap<PathBuf, PathKind>,
    files: BTreeMap<PathBuf, Vec<u8>>,
    /// What the socket census reports (bound paths, existing or not).
    sockets: Vec<PathBuf>,
    /// Owners and modes; a path not here is root's, 0755 or 0644.
    owners: BTreeMap<PathBuf, Owner>,
}

impl FakeHost {
    fn with(mut self, path: &str, kind: PathKind) -> Self {
        let p = PathBuf::from(path);
        let mut parent = p.parent();
        while let Some(d) = parent {
            self.paths.entry(d.to_path_buf()).or_insert(PathKind::Dir);
            parent = d.parent();
        }
        self.paths.insert(p, kind);
        self
    }
    fn dir(self, path: &str) -> Self {
        self.with(path, PathKind::Dir)
    }
    fn file(self, path: &str) -> Self {
        self.with(path, PathKind::File)
    }
    fn link(self, path: &str, target: &str) -> Self {
        self.with(path, PathKind::Symlink(target.into()))
    }
    /// A unix socket at `path`, in the census.
    fn socket(mut self, path: &str) -> Self {
        self.sockets.push(path.into());
        self.with(path, PathKind::Other)
    }
    /// `path`'s owner and mode (the path must be there already).
    fn owned(mut self, path: &str, uid: u32, gid: u32, mode: u32) -> Self {
        assert!(
            self.paths.contains_key(Path::new(path)),
            "{path} is not on the fake host"
        );
        self.owners.insert(path.into(), Owner { uid, gid, mode });
        self
    }
    fn content(mut self, path: &str, text: &str) -> Self {
        self = self.file(path);
        self.files.insert(path.into(), text.as_bytes().to_vec());
        self
    }

    /// A Debian-like host with a user, a repository and some secrets.
    fn typical() -> Self {
        Self::default()
            .dir("/usr/bin")
            .link("/bin", "usr/bin")
            .link("/lib", "usr/lib")
            .dir("/etc")
            .dir("/opt")
            .dir("/var/tmp")
            .dir("/var/lib")
            .dir("/proc")
            .dir("/sys")
            .dir("/dev")
            .dir("/tmp")
            .dir("/run/user/1000")
            .dir("/lost+found")
            .dir("/root")
            .file("/vmlinuz.old")
            .with("/weird.sock", PathKind::Other)
            .dir("/home/u/.ssh")
            .file("/home/u/.netrc")
            .dir("/home/u/.cache")
            .dir("/home/u/proj/.git/hooks")
            .file("/home/u/proj/.git/config")
            .file("/home/u/proj/.env")
            .file("/home/u/proj/web/.env.local")
            .file("/home/u/proj/.bashrc")
    }
}

impl HostView for FakeHost {
    fn kind(&self, path: &Path) -> Option<PathKind> {
        self.paths.get(path).cloned()
    }
    fn read_dir(&self, path: &Path) -> std::io::Result<Vec<(OsString, PathKind)>> {
        Ok(self
            .paths
            .iter()
            .filter(|(p, _)| p.parent() == Some(path) && p.as_path() != path)
            .map(|(p, k)| (p.file_name().unwrap().to_owned(), k.clone()))
            .collect())
    }
    fn find(
        &self,
        root: &Path,
        matches: &dyn Fn(&str) -> bool,
        max_depth: usize,
        max_entries: usize,
    ) -> std::io::Result<Vec<(PathBuf, PathKind)>> {
        // As the binary's walk: not into .git, .hg, node_modules or target.
        let skipped = |p: &Path| {
            p.strip_prefix(root).unwrap().parent().is_some_and(|d| {
                d.components()
                    .any(|c| matches!(c.as_os_str().to_str(), Some(".git" | ".hg" | "node_modules" | "target")))
            })
        };
        Ok(self
            .paths
            .iter()
            .filter(|(p, _)| {
                p.starts_with(root)
                    && *p != root
                    && p.strip_prefix(root).unwrap().components().count() <= max_depth
                    && !skipped(p)
                    && matches(p.file_name().unwrap().to_str().unwrap())
            })
            .map(|(p, k)| (p.clone(), k.clone()))
            .take(max_entries)
            .collect())
    }
    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        match (self.files.get(path), self.paths.get(path)) {
            (Some(content), _) => Ok(content.clone()),
            // A file made with `file` is empty.
            (None, Some(PathKind::File)) => Ok(Vec::new()),
            _ => Err(std::io::Error::from_raw_os_error(2)),
        }
    }
    fn unix_sockets(&self) -> std::io::Result<Vec<PathBuf>> {
        Ok(self.sockets.clone())
    }
    fn owner(&self, path: &Path) -> Option<Owner> {
        let kind = self.paths.get(path)?;
        Some(self.owners.get(path).copied().unwrap_or(Owner {
            uid: 0,
            gid: 0,
            mode: if *kind == PathKind::Dir { 0o755 } else { 0o644 },
        }))
    }
    fn root_only(
        &self,
        root: &Path,
        max_depth: usize,
        max_entries: usize,
        skip: &dyn Fn(&str) -> bool,
    ) -> std::io::Result<Vec<PathBuf>> {
        if self.kind(root) != Some(PathKind::Dir) {
            return Err(std::io::Error::from_raw_os_error(2));
        }
        let mut out: Vec<PathBuf> = Vec::new();
        let mut seen = 0;
        for (p, kind) in &self.paths {
            let Ok(rel) = p.strip_prefix(root) else { continue };
            let depth = rel.components().count();
            if depth == 0 || depth > max_depth {
                continue;
            }
            seen += 1;
            if seen > max_entries {
                return Err(std::io::Error::other("too many entries"));
            }
            let skipped = rel.components().any(|c| skip(c.as_os_str().to_str().unwrap()));
            // Not entered: below a directory already listed.
            if skipped || out.iter().any(|o| p.starts_with(o)) {
                continue;
            }
            let mode = self.owner(p).unwrap().mode;
            let hidden = match kind {
                PathKind::File => mode & 0o004 == 0 && mode & 0o440 != 0,
                PathKind::Dir => mode & 0o005 != 0o005,
                _ => false,
            };
            if hidden {
                out.push(p.clone());
            }
        }
        Ok(out)
    }
}

fn inv() -> Invocation {
    Invocation {
        workdir: "/home/u/proj".into(),
        home: "/home/u".into(),
        uid: 1000,
        gid: 1000,
        unprivileged: true,
        env: vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("HOME".into(), "/home/u".into()),
            ("TERM".into(), "xterm-256color".into()),
            ("LC_ALL".into(), "C.UTF-8".into()),
            ("EDITOR".into(), "vi".into()),
            ("GH_TOKEN".into(), "ghp_secret".into()),
            ("ANTHROPIC_API_KEY".into(), "sk-ant".into()),
            ("SSH_AUTH_SOCK".into(), "/tmp/ssh-x/agent.1".into()),
            ("AWS_SECRET_ACCESS_KEY".into(), "aws".into()),
            ("RANDOM_THING".into(), "x".into()),
        ],
        args: vec!["claude".into(), "--help".into()],
        terminal: false,
        rootfs: None,
    }
}

fn policy(text: &str) -> Policy {
    Policy::from_toml_str(&format!("version = 1\n{text}"), "test.toml").unwrap()
}

fn run(p: &Policy, host: &FakeHost, inv: &Invocation) -> Compiled {
    compile(p, host, inv).unwrap_or_else(|e| panic!("{e}"))
}

fn agent() -> Compiled {
    run(&Policy::embedded_default(), &FakeHost::typical(), &inv())
}

fn mount_at<'a>(c: &'a Compiled, dest: &str) -> Vec<&'a Mount> {
    c.spec
        .mounts()
        .as_ref()
        .unwrap()
        .iter()
        .filter(|m| m.destination() == Path::new(dest))
        .collect()
}

fn only_mount<'a>(c: &'a Compiled, dest: &str) -> &'a Mount {
    let m = mount_at(c, dest);
    assert_eq!(m.len(), 1, "mounts at {dest}: {m:?}");
    m[0]
}

fn opts(m: &Mount) -> Vec<&str> {
    m.options().iter().flatten().map(String::as_str).collect()
}

fn env_of(c: &Compiled) -> BTreeMap<String, String> {
    c.spec
        .process()
        .as_ref()
        .unwrap()
        .env()
        .iter()
        .flatten()
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

fn annotation<'a>(c: &'a Compiled, key: &str) -> Option<&'a str> {
    c.spec.annotations().as_ref().unwrap().get(key).map(String::as_str)
}

fn error(p: &Policy, host: &FakeHost, inv: &Invocation) -> String {
    let e = compile(p, host, inv).unwrap_err().to_string();
    assert!(!e.contains('\n'), "{e}");
    e
}
