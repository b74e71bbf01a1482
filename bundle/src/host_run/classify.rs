//! `classify`: whether a host tool runs code from one path of a project
//! without being asked to run the project, and by which class of rule. The
//! live mode's exit search and protection and the review mode's `changes`
//! ask it; they give it a read-only view of the tree (`Tree`: lstat and
//! bounded reads, relative to the project's top), so it answers for the
//! host's tree and for an overlay's merged view alike.
//!
//! Classes, not instances: a repository is what git takes for one (its own
//! test, `is_git_directory()` in git's setup.c: a `HEAD`, and `objects/` and
//! `refs/` or a `commondir`), whatever the folder is called; the files a
//! repository's config includes (`include.path`, `includeIf.*.path`,
//! git-config(1), relative to the including file) count whether or not they
//! exist yet; the hooks directory `core.hooksPath` names (relative to the
//! worktree's top, githooks(5)) with, in husky's layout (`.husky/_`), the
//! folder beside it whose scripts husky's hooks run. The named entries are
//! the list in `mod.rs`.
//!
//! Environments inside the project run at every start of their interpreter,
//! whoever starts it (an editor probing the interpreter included): a
//! virtualenv's `.pth` files and `sitecustomize.py` (site(7), Python's
//! `site` module docs), its `pyvenv.cfg` and `bin/` (first on PATH once
//! activated), and `node_modules/.bin/` (on PATH for every npm script and
//! `npx`). They are classed here; what each mode does with them is the
//! threat model's (docs/sandbox.md).

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use super::gitconfig;
use super::list::Class;
use super::table::HOST_RUN;
use crate::compile::{HostView, PathKind};

/// A read-only view of a project's tree. Paths are relative to its top,
/// made of normal components only.
pub trait Tree {
    /// lstat: what is at `rel`, never following a link; None when nothing
    /// is there (or it cannot be reached).
    fn kind(&self, rel: &Path) -> Option<PathKind>;
    /// At most `limit` bytes of the regular file at `rel` (a link is not
    /// followed); None when it is not a regular file or cannot be read.
    fn read(&self, rel: &Path, limit: usize) -> Option<Vec<u8>>;
    /// The tree's absolute top, when it has one, so that an absolute path a
    /// config names can be placed in it.
    fn root(&self) -> Option<&Path> {
        None
    }
}

/// A `HostView` seen from one of its directories.
pub struct Rooted<'a> {
    pub host: &'a dyn HostView,
    pub root: &'a Path,
}

impl Tree for Rooted<'_> {
    fn kind(&self, rel: &Path) -> Option<PathKind> {
        self.host.kind(&self.root.join(rel))
    }

    fn read(&self, rel: &Path, limit: usize) -> Option<Vec<u8>> {
        let path = self.root.join(rel);
        if self.host.kind(&path) != Some(PathKind::File) {
            return None;
        }
        let mut raw = self.host.read(&path).ok()?;
        raw.truncate(limit);
        Some(raw)
    }

    fn root(&self) -> Option<&Path> {
        Some(self.root)
    }
}

/// The answer for a path the host runs code from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub class: Class,
    /// The host-run entry the path is (or lies in), relative to the top: the
    /// outermost one, what is protected or moved as one piece (`sub/.claude`
    /// for `sub/.claude/settings.json`, the repository for a file in it).
    pub entry: PathBuf,
    /// Which tool runs what from it.
    pub runs: &'static str,
}

/// How much of a config file is read; git's own are far smaller.
const CONFIG_LIMIT: usize = 1 << 20;

/// How deep includes are followed (git stops at 10, `MAX_INCLUDE_DEPTH`).
const INCLUDE_DEPTH: usize = 10;

const RUNS_REPOSITORY: &str = "git: a repository (by its shape) and everything in it: config, hooks, fsmonitor";
const RUNS_INCLUDED: &str = "git: a file the repository's config includes (include.path)";
const RUNS_HOOKS: &str = "git: the hooks directory core.hooksPath names, run on commit";
const RUNS_HUSKY: &str = "husky: the scripts its hooks in core.hooksPath run";
const RUNS_VENV: &str = "Python: a virtualenv's start-up files and executables, run by every start of its interpreter";
const RUNS_NODE_BIN: &str = "npm: node_modules/.bin, on PATH for every npm script and npx";

/// Classifies the paths of one tree: reads what the top repository's config
/// names once, and remembers which folders are repositories.
pub struct Classifier<'t> {
    tree: &'t dyn Tree,
    /// Files repositories' configs include, relative to the top.
    included: Vec<PathBuf>,
    /// Hooks directories (`core.hooksPath`), relative to the top, each with
    /// what it runs, and husky's folder beside its `_`.
    hooks: Vec<(PathBuf, &'static str)>,
    /// Folders already asked whether git takes them for a repository.
    repos: RefCell<HashMap<PathBuf, bool>>,
}

/// `classify` for one path; a caller with many paths keeps a `Classifier`.
pub fn classify(rel: &Path, tree: &dyn Tree) -> Option<Verdict> {
    Classifier::new(tree).classify(rel)
}

impl<'t> Classifier<'t> {
    /// Reads the top repository's config (`.git/config`, or the repository
    /// a `.git` file names when it lies in the tree).
    pub fn new(tree: &'t dyn Tree) -> Self {
        let mut c = Classifier {
            tree,
            included: Vec::new(),
            hooks: Vec::new(),
            repos: RefCell::new(HashMap::new()),
        };
        let top = Path::new(".git");
        match tree.kind(top) {
            Some(PathKind::Dir) => c.add_repository(top, Path::new("")),
            Some(PathKind::File) => {
                if let Some(dir) = c.gitdir_of(top) {
                    c.add_repository(&dir, Path::new(""));
                }
            }
            _ => {}
        }
        c
    }

    /// Takes in what the repository directory `git_dir` (relative to the top)
    /// names, its worktree's top being `worktree`: a repository the caller
    /// found below the top, whose config may include files anywhere in the
    /// tree.
    pub fn add_repository(&mut self, git_dir: &Path, worktree: &Path) {
        let mut seen = Vec::new();
        for name in ["config", "config.worktree"] {
            self.read_config(&git_dir.join(name), worktree, 0, &mut seen);
        }
    }

    /// The files the repositories' configs include, relative to the top.
    pub fn included(&self) -> &[PathBuf] {
        &self.included
    }

    /// Whether and why the host runs code from `rel` (relative to the top).
    pub fn classify(&self, rel: &Path) -> Option<Verdict> {
        let parts: Vec<&str> = rel
            .components()
            .map(|c| match c {
                Component::Normal(n) => n.to_str(),
                _ => None,
            })
            .collect::<Option<_>>()?;
        if parts.is_empty() {
            return None;
        }
        let mut prefix = PathBuf::new();
        for (i, name) in parts.iter().enumerate() {
            prefix.push(name);
            let verdict = |class, runs| {
                Some(Verdict {
                    class,
                    entry: prefix.clone(),
                    runs,
                })
            };
            if let Some(h) = HOST_RUN.iter().find(|h| h.is_at(&parts[..=i])) {
                return verdict(h.class, h.runs);
            }
            if self.included.contains(&prefix) {
                return verdict(Class::GitConfigured, RUNS_INCLUDED);
            }
            if let Some((_, runs)) = self.hooks.iter().find(|(h, _)| *h == prefix) {
                return verdict(Class::GitConfigured, runs);
            }
            // Only a folder with something below it in `rel` can hold what
            // the rest of the path names, except the repository itself.
            if self.is_repository(&prefix) {
                return verdict(Class::Repository, RUNS_REPOSITORY);
            }
            let rest = &parts[i + 1..];
            if *name == "node_modules" && rest.len() >= 2 && rest[0] == ".bin" {
                return Some(Verdict {
                    class: Class::Environment,
                    entry: prefix.join(".bin").join(rest[1]),
                    runs: RUNS_NODE_BIN,
                });
            }
            if !rest.is_empty() && self.tree.kind(&prefix.join("pyvenv.cfg")) == Some(PathKind::File) {
                if let Some(n) = venv_start_up(rest) {
                    let mut entry = prefix.clone();
                    entry.extend(&rest[..n]);
                    return Some(Verdict {
                        class: Class::Environment,
                        entry,
                        runs: RUNS_VENV,
                    });
                }
            }
        }
        None
    }

    /// git's test for a repository directory (setup.c, `is_git_directory`):
    /// a `HEAD` (file or link), and `objects/` and `refs/`, or a `commondir`
    /// naming where they are. The content of `HEAD` is not checked: one git
    /// would refuse today may be fixed tomorrow.
    fn is_repository(&self, dir: &Path) -> bool {
        if let Some(&known) = self.repos.borrow().get(dir) {
            return known;
        }
        let t = self.tree;
        let is = matches!(t.kind(&dir.join("HEAD")), Some(PathKind::File | PathKind::Symlink(_)))
            && (t.kind(&dir.join("objects")).is_some() && t.kind(&dir.join("refs")).is_some()
                || t.kind(&dir.join("commondir")) == Some(PathKind::File));
        self.repos.borrow_mut().insert(dir.to_path_buf(), is);
        is
    }

    /// Reads a config file and what it includes, recording the includes and
    /// the hooks directory.
    fn read_config(&mut self, file: &Path, worktree: &Path, depth: usize, seen: &mut Vec<PathBuf>) {
        if depth > INCLUDE_DEPTH || seen.iter().any(|s| s == file) {
            return;
        }
        seen.push(file.to_path_buf());
        let Some(raw) = self.tree.read(file, CONFIG_LIMIT) else {
            return;
        };
        let entries = gitconfig::parse(&String::from_utf8_lossy(&raw));
        let base = file.parent().unwrap_or(Path::new(""));
        for e in entries.iter().filter(|e| e.is_include()) {
            let Some(target) = e.value.as_deref().and_then(|v| self.place(v, base)) else {
                continue;
            };
            if !self.included.contains(&target) {
                self.included.push(target.clone());
            }
            self.read_config(&target, worktree, depth + 1, seen);
        }
        let hooks = gitconfig::last(&entries, "core", "hookspath").and_then(|e| e.value.as_deref());
        if let Some(dir) = hooks.and_then(|v| self.place(v, worktree)) {
            // husky (v9): core.hooksPath = .husky/_, whose hooks run the
            // user's scripts in .husky/ (husky's "How it works").
            if dir.file_name().is_some_and(|n| n == "_") {
                if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                    self.hooks.push((parent.to_path_buf(), RUNS_HUSKY));
                }
            }
            self.hooks.push((dir, RUNS_HOOKS));
        }
    }

    /// A path as a config value writes it, relative to `base` (a relative
    /// one) or the tree's root (an absolute one), made relative to the top
    /// and lexically normalised; None when it lies outside the tree.
    fn place(&self, value: &str, base: &Path) -> Option<PathBuf> {
        if value.is_empty() || value.starts_with('~') {
            // `~/`: the caller's home, not the project's.
            return None;
        }
        let p = Path::new(value);
        let joined = if p.is_absolute() {
            p.strip_prefix(self.tree.root()?).ok()?.to_path_buf()
        } else {
            base.join(p)
        };
        let mut out = PathBuf::new();
        for c in joined.components() {
            match c {
                Component::Normal(n) => out.push(n),
                Component::CurDir => {}
                Component::ParentDir => {
                    if !out.pop() {
                        return None;
                    }
                }
                Component::RootDir | Component::Prefix(_) => return None,
            }
        }
        (!out.as_os_str().is_empty()).then_some(out)
    }

    /// The repository a `.git` file names (`gitdir: PATH`), relative to the
    /// top, when it lies in the tree.
    fn gitdir_of(&self, file: &Path) -> Option<PathBuf> {
        let raw = self.tree.read(file, 4096)?;
        let text = String::from_utf8_lossy(&raw);
        let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
        self.place(target, file.parent().unwrap_or(Path::new("")))
    }
}

/// How many components of `rest` (a path inside a virtualenv's top) make
/// the start-up file or executable it is or lies in, if any: `pyvenv.cfg`,
/// `bin/X`, and in `lib*/python*/site-packages/`, `*.pth`,
/// `sitecustomize.py` and `usercustomize.py`.
fn venv_start_up(rest: &[&str]) -> Option<usize> {
    match rest {
        ["pyvenv.cfg", ..] => Some(1),
        ["bin" | "Scripts", _, ..] => Some(2),
        [lib, python, "site-packages", name, ..]
            if lib.starts_with("lib")
                && python.starts_with("python")
                && (name.ends_with(".pth") || *name == "sitecustomize.py" || *name == "usercustomize.py") =>
        {
            Some(4)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
