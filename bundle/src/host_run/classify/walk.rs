//! The classifier for a walk of the whole tree (the exit search's, a
//! tracker's rescan): what `classify` works out for the folders above a
//! path is carried down in a `Folder`, so that each path costs a hash
//! lookup and each folder entered at most a few lstats (a `HEAD`, a
//! `pyvenv.cfg`), never a look at every folder above it again.
//!
//! The contract, for a walk from `Classifier::top()`: for each name in a
//! folder, `entry` says whether it is host-run (the verdict `classify` gives
//! its path); a folder with a verdict is one entry as a whole and need not
//! be entered to classify what lies in it; one without is entered with
//! `enter`. A repository found on the way (a verdict of class `Repository`
//! on a folder) may name files anywhere in its config: `add_repository`
//! takes them in, and `configured()` then lists them, to be looked at
//! whether or not the walk had passed them.

use std::path::{Path, PathBuf};

use super::{start_up_len, Classifier, Verdict, RUNS_NODE_BIN, RUNS_REPOSITORY, RUNS_VENV};
use crate::compile::PathKind;
use crate::host_run::list::{Class, Depth};
use crate::host_run::shape::is_git_dir;
use crate::host_run::table::find_parts;

/// A folder a walk is in, with what the folders above it make of the
/// paths in it.
#[derive(Debug, Clone, Default)]
pub struct Folder {
    rel: PathBuf,
    /// How many components `rel` has.
    depth: usize,
    /// The folder's own name, and its parent's (the top has neither).
    name: Option<String>,
    parent: Option<String>,
    /// The virtualenvs this folder lies in, each as the components of the
    /// path from its top down to here (only while a start-up file can still
    /// lie below: `bin/`, `lib*/python*/site-packages/`).
    venvs: Vec<Vec<String>>,
}

impl Folder {
    /// The folder, relative to the top.
    pub fn rel(&self) -> &Path {
        &self.rel
    }
}

/// Whether a path inside a virtualenv, `rest` (from its top), could still
/// lead to a start-up file (`venv_start_up`'s shapes).
fn may_lead_to_start_up(rest: &[String]) -> bool {
    match rest {
        [] => true,
        [bin] => bin == "bin" || bin == "Scripts" || bin.starts_with("lib"),
        [lib, py] => lib.starts_with("lib") && py.starts_with("python"),
        [lib, py, sp] => lib.starts_with("lib") && py.starts_with("python") && sp == "site-packages",
        _ => false,
    }
}

impl Classifier<'_> {
    /// The top of the tree, where a walk starts.
    pub fn top(&self) -> Folder {
        Folder::default()
    }

    /// What `classify(folder/name)` says, for a folder the walk entered
    /// (none above it had a verdict). `is_dir` is what the walk read (its
    /// `d_type` or lstat): only a folder is asked git's test for a
    /// repository, which costs an lstat of its `HEAD`.
    pub fn entry(&self, folder: &Folder, name: &str, is_dir: bool) -> Option<Verdict> {
        self.entry_with(folder, name, is_dir, &|d| is_git_dir(self.tree, d))
    }

    /// `entry`, git's test for a repository given (`classify` remembers
    /// its answers).
    pub(super) fn entry_with(
        &self,
        folder: &Folder,
        name: &str,
        is_dir: bool,
        is_repository: &dyn Fn(&Path) -> bool,
    ) -> Option<Verdict> {
        let rel = folder.rel.join(name);
        let verdict = |class, runs| {
            Some(Verdict {
                class,
                entry: rel.clone(),
                runs,
            })
        };
        if self.gitlinks.contains(&rel) {
            return verdict(Class::Repository, super::RUNS_GITLINK);
        }
        let named = match folder.name.as_deref() {
            Some(parent) => find_parts(&[parent, name]),
            None => find_parts(&[name]),
        };
        // The two-component lookup stands for a path at depth 2: a name the
        // tool reads only at the top must really be there.
        let named = named.filter(|h| h.depth == Depth::Any || h.name.split('/').count() == folder.depth + 1);
        if let Some(h) = named {
            return verdict(h.class, h.runs);
        }
        if self.included.contains(&rel) {
            return verdict(Class::GitConfigured, super::RUNS_INCLUDED);
        }
        if let Some((_, runs)) = self.hooks.iter().find(|(h, _)| *h == rel) {
            return verdict(Class::GitConfigured, runs);
        }
        if is_dir && is_repository(&rel) {
            return verdict(Class::Repository, RUNS_REPOSITORY);
        }
        if folder.name.as_deref() == Some(".bin") && folder.parent.as_deref() == Some("node_modules") {
            return verdict(Class::Environment, RUNS_NODE_BIN);
        }
        for rest in &folder.venvs {
            let mut path: Vec<&str> = rest.iter().map(String::as_str).collect();
            path.push(name);
            if start_up_len(&path).is_some() {
                return verdict(Class::Environment, RUNS_VENV);
            }
        }
        None
    }

    /// The folder `name` in `folder`, to walk into (`entry` gave it no
    /// verdict): an lstat of its `pyvenv.cfg` says whether a virtualenv
    /// starts there.
    pub fn enter(&self, folder: &Folder, name: &str) -> Folder {
        let rel = folder.rel.join(name);
        let mut venvs: Vec<Vec<String>> = folder
            .venvs
            .iter()
            .map(|rest| {
                let mut r = rest.clone();
                r.push(name.to_owned());
                r
            })
            .filter(|r| may_lead_to_start_up(r))
            .collect();
        if self.tree.kind(&rel.join("pyvenv.cfg")) == Some(PathKind::File) {
            venvs.push(Vec::new());
        }
        Folder {
            depth: folder.depth + 1,
            name: Some(name.to_owned()),
            parent: folder.name.clone(),
            venvs,
            rel,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host_run::fake::Fake;
    use crate::host_run::tree::Tree;

    /// Every path of `t`, walked from the top with `entry` and `enter`.
    fn walk(c: &Classifier, t: &Fake) -> Vec<(PathBuf, Option<Verdict>)> {
        let mut out = Vec::new();
        let mut todo = vec![c.top()];
        while let Some(folder) = todo.pop() {
            for name in t.list(folder.rel()).unwrap() {
                let rel = folder.rel().join(&name);
                let kind = t.kind(&rel).unwrap();
                let v = c.entry(&folder, &name, kind == PathKind::Dir);
                if v.is_none() && kind == PathKind::Dir {
                    todo.push(c.enter(&folder, &name));
                }
                out.push((rel, v));
            }
        }
        out
    }

    /// The walk gives, for every path it looks at, what `classify` gives for
    /// it; and it looks at every path but those inside an entry.
    #[test]
    fn a_walk_agrees_with_classify_path_by_path() {
        let t = Fake::default()
            .repo(".git")
            .file(
                ".git/config",
                "[core]\nhooksPath = tools/hooks\n[include]\npath = ../team.inc\n",
            )
            .file("team.inc", "")
            .file("tools/hooks/pre-commit", "")
            .file("tools/build.sh", "")
            .repo("vendor/x.git")
            .file("vendor/x.git/config", "")
            .file("notes/HEAD", "")
            .file(".venv/pyvenv.cfg", "")
            .file(".venv/bin/python", "")
            .file(".venv/lib/python3.11/site-packages/a.pth", "")
            .file(".venv/lib/python3.11/site-packages/pkg/m.py", "")
            .file(".venv/lib/python3.11/other/m.pth", "")
            .file("web/node_modules/.bin/eslint", "")
            .file("web/node_modules/eslint/bin/x", "")
            .file("a/.config/mise.toml", "")
            .file("a/.config/mise/config.toml", "")
            .file("a/b/.config/lefthook.yml", "")
            .file("a/mise/config.toml", "")
            .file("a/.bashrc", "")
            .file(".bashrc", "")
            .file("src/main.rs", "")
            .file("deep/1/2/3/4/5/6/7/8/9/.claude/settings.json", "");
        let c = Classifier::new(&t);
        let got = walk(&c, &t);
        let mut inside = Vec::new();
        for (rel, v) in &got {
            assert_eq!(v, &c.classify(rel), "{}", rel.display());
            if v.is_some() {
                inside.push(rel.clone());
            }
        }
        inside.sort();
        let inside: Vec<String> = inside.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(
            inside,
            [
                ".bashrc",
                ".git",
                ".venv/bin/python",
                ".venv/lib/python3.11/site-packages/a.pth",
                ".venv/pyvenv.cfg",
                "a/.config/mise",
                "a/.config/mise.toml",
                "a/b/.config/lefthook.yml",
                "a/mise/config.toml",
                "deep/1/2/3/4/5/6/7/8/9/.claude",
                "team.inc",
                "tools/hooks",
                "vendor/x.git",
                "web/node_modules/.bin/eslint",
            ]
        );
        // Everything outside an entry was looked at.
        let looked: Vec<&PathBuf> = got.iter().map(|(p, _)| p).collect();
        for p in [
            "src/main.rs",
            "notes/HEAD",
            ".venv/lib/python3.11/other/m.pth",
            "a/.bashrc",
        ] {
            assert!(looked.contains(&&PathBuf::from(p)), "{p}");
        }
    }
}
