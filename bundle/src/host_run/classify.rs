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
//! folder beside it whose scripts husky's hooks run; the gitlinks of the top
//! repository's index (`index`), whose repositories a plain `git status` at
//! the top recurses into, with what their configs name. The named entries
//! are the list in `table`. Anything under a `.git` is host-run.
//!
//! `classify` answers for one path; a walk asks `Classifier::entry` and
//! `Classifier::enter` folder by folder (`walk`), which costs a hash lookup
//! per path and at most a few lstats per folder.
//!
//! Environments inside the project run at every start of their interpreter,
//! whoever starts it (an editor probing the interpreter included): a
//! virtualenv's `.pth` files and `sitecustomize.py` (site(7), Python's
//! `site` module docs), its `pyvenv.cfg` and `bin/` (first on PATH once
//! activated), and `node_modules/.bin/` (on PATH for every npm script and
//! `npx`). They are classed here; what each mode does with them is the
//! threat model's (docs/sandbox.md).

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::path::{Component, Path, PathBuf};

use super::gitconfig;
use super::list::Class;
use super::shape::{is_git_dir, is_start_up_module};
use super::tree::Tree;
use crate::compile::PathKind;

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

/// How much of an index is read for its gitlinks: an index of a million
/// files is about 100 MiB; past this the rest are not seen (the gitlinks'
/// `.git` entries are still host-run by their name).
const INDEX_LIMIT: usize = 256 << 20;

/// How deep includes are followed (git stops at 10, `MAX_INCLUDE_DEPTH`).
const INCLUDE_DEPTH: usize = 10;

const RUNS_REPOSITORY: &str = "git: a repository (by its shape) and everything in it: config, hooks, fsmonitor";
const RUNS_GITLINK: &str = "git: a gitlink's repository, whose config a plain git status at the top runs";
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
    included: HashSet<PathBuf>,
    /// Hooks directories (`core.hooksPath`), relative to the top, each with
    /// what it runs, and husky's folder beside its `_`.
    hooks: Vec<(PathBuf, &'static str)>,
    /// The top index's gitlinks' `.git` entries, relative to the top.
    gitlinks: HashSet<PathBuf>,
    /// Folders already asked whether git takes them for a repository.
    repos: RefCell<HashMap<PathBuf, bool>>,
}

/// `classify` for one path; a caller with many paths keeps a `Classifier`.
pub fn classify(rel: &Path, tree: &dyn Tree) -> Option<Verdict> {
    Classifier::new(tree).classify(rel)
}

impl<'t> Classifier<'t> {
    /// Reads the top repository's config (`.git/config`, or the repository
    /// a `.git` file names when it lies in the tree), its index's gitlinks,
    /// and their repositories' configs.
    pub fn new(tree: &'t dyn Tree) -> Self {
        let mut c = Classifier {
            tree,
            included: HashSet::new(),
            hooks: Vec::new(),
            gitlinks: HashSet::new(),
            repos: RefCell::new(HashMap::new()),
        };
        let Some(top) = c.repository_of(Path::new("")) else {
            return c;
        };
        c.add_repository(&top, Path::new(""));
        for link in c.gitlinks_of(&top) {
            if let Some(repo) = c.repository_of(&link) {
                c.add_repository(&repo, &link);
            }
            c.gitlinks.insert(link.join(".git"));
        }
        c
    }

    /// The repository directory of the worktree `top` (relative): its
    /// `.git` folder, or the one its `.git` file names when it lies in the
    /// tree.
    fn repository_of(&self, top: &Path) -> Option<PathBuf> {
        let dot_git = top.join(".git");
        match self.tree.kind(&dot_git)? {
            PathKind::Dir => Some(dot_git),
            PathKind::File => self.gitdir_of(&dot_git),
            _ => None,
        }
    }

    /// The gitlinks in the index of the repository `git_dir`, as folders
    /// relative to the top; its shared index too when the index is split
    /// (git-update-index(1), "--split-index": `sharedindex.<hash>` holds
    /// the rest). A SHA-256 repository's object names are 32 bytes.
    fn gitlinks_of(&self, git_dir: &Path) -> Vec<PathBuf> {
        let config = self
            .tree
            .read(&git_dir.join("config"), CONFIG_LIMIT)
            .unwrap_or_default();
        let entries = gitconfig::parse(&String::from_utf8_lossy(&config));
        let sha256 = gitconfig::last(&entries, "extensions", "objectformat")
            .and_then(|e| e.value.as_deref())
            .is_some_and(|v| v.eq_ignore_ascii_case("sha256"));
        let hash_len = if sha256 { 32 } else { 20 };
        let mut files = vec!["index".to_owned()];
        let listing = self.tree.list(git_dir).unwrap_or_default();
        files.extend(listing.into_iter().filter(|n| n.starts_with("sharedindex.")));
        let mut out: Vec<PathBuf> = Vec::new();
        let mut seen = HashSet::new();
        for f in files {
            let raw = self.tree.read(&git_dir.join(f), INDEX_LIMIT).unwrap_or_default();
            for link in super::index::gitlinks(&raw, hash_len) {
                let placed = link.to_str().and_then(|l| self.place(l, Path::new("")));
                if let Some(p) = placed.filter(|p| seen.insert(p.clone())) {
                    out.push(p);
                }
            }
        }
        out
    }

    /// Takes in what the repository directory `git_dir` (relative to the top)
    /// names, its worktree's top being `worktree`: a repository the caller
    /// found below the top, whose config may include files anywhere in the
    /// tree.
    pub fn add_repository(&mut self, git_dir: &Path, worktree: &Path) {
        let mut seen = HashSet::new();
        for name in ["config", "config.worktree"] {
            self.read_config(&git_dir.join(name), worktree, 0, &mut seen);
        }
    }

    /// The files the repositories' configs include, relative to the top.
    pub fn included(&self) -> impl Iterator<Item = &Path> {
        self.included.iter().map(PathBuf::as_path)
    }

    /// The `.git` entries of the top index's gitlinks, relative to the top,
    /// sorted: repositories a plain `git status` at the top recurses into,
    /// wherever they lie (the start's bounded search may not reach them).
    pub fn gitlinks(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self.gitlinks.iter().cloned().collect();
        out.sort();
        out
    }

    /// What the repositories' configs name, relative to the top: the files
    /// they include and the hooks directories (with husky's folder beside).
    pub fn configured(&self) -> Vec<PathBuf> {
        let hooks = self.hooks.iter().map(|(h, _)| h.clone());
        let mut out: Vec<PathBuf> = self.included.iter().cloned().chain(hooks).collect();
        out.sort();
        out.dedup();
        out
    }

    /// Whether and why the host runs code from `rel` (relative to the top):
    /// its components walked down from the top as a walk would (`walk`), a
    /// folder's answer for git's test remembered for the next path.
    pub fn classify(&self, rel: &Path) -> Option<Verdict> {
        let parts: Vec<&str> = rel
            .components()
            .map(|c| match c {
                Component::Normal(n) => n.to_str(),
                _ => None,
            })
            .collect::<Option<_>>()?;
        let mut folder = self.top();
        for (i, name) in parts.iter().enumerate() {
            // A component with more below it is a folder, whether or not
            // the path is there (review's deleted paths are asked too).
            let last = i + 1 == parts.len();
            let is_dir = !last || self.tree.kind(&folder.rel().join(name)) == Some(PathKind::Dir);
            if let Some(v) = self.entry_with(&folder, name, is_dir, &|d| self.is_repository(d)) {
                return Some(v);
            }
            if !last {
                folder = self.enter(&folder, name);
            }
        }
        None
    }

    /// `is_git_dir`, remembered.
    fn is_repository(&self, dir: &Path) -> bool {
        if let Some(&known) = self.repos.borrow().get(dir) {
            return known;
        }
        let is = is_git_dir(self.tree, dir);
        self.repos.borrow_mut().insert(dir.to_path_buf(), is);
        is
    }

    /// Reads a config file and what it includes, recording the includes and
    /// the hooks directory.
    fn read_config(&mut self, file: &Path, worktree: &Path, depth: usize, seen: &mut HashSet<PathBuf>) {
        if depth > INCLUDE_DEPTH || !seen.insert(file.to_path_buf()) {
            return;
        }
        let Some(raw) = self.tree.read(file, CONFIG_LIMIT) else {
            return;
        };
        let entries = gitconfig::parse(&String::from_utf8_lossy(&raw));
        let base = file.parent().unwrap_or(Path::new(""));
        for e in entries.iter().filter(|e| e.is_include()) {
            let Some(target) = e.value.as_deref().and_then(|v| self.place(v, base)) else {
                continue;
            };
            self.included.insert(target.clone());
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
fn start_up_len(rest: &[&str]) -> Option<usize> {
    match rest {
        ["pyvenv.cfg", ..] => Some(1),
        ["bin" | "Scripts", _, ..] => Some(2),
        [lib, python, "site-packages", name, ..]
            if lib.starts_with("lib") && python.starts_with("python") && is_start_up_module(name) =>
        {
            Some(4)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
pub mod walk;
