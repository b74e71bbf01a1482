//! Which changes of a review run the host would run unasked, so that
//! `apply` brings them only when the user names them: what the bundle
//! crate's classifier says of the path (`host_run::classify`: the live
//! mode's list, anything in a repository, which it recognises by git's own
//! test whatever its name, what a repository's config includes and its
//! hooks path, husky's scripts, a virtualenv's start-up files and `bin/`,
//! `node_modules/.bin`), asked of the project as the host has it and as
//! the sandbox left it; and beyond its list (EXTRA) the hook and tool
//! managers' configuration and scripts and the toolchain files this mode
//! flags until the list carries them, and `.pth` files wherever they lie.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use claude_shim_bundle::host_run::Classifier;

/// Names a host tool reads code or commands from, at any depth, beyond
/// `host_run`'s list; each with the tool and what it runs.
const EXTRA: &[(&str, &str)] = &[
    // pre-commit.com: the config names the hooks `git commit` runs.
    (".pre-commit-config.yaml", "pre-commit: the hooks git commit runs"),
    (".pre-commit-hooks.yaml", "pre-commit: hooks a repository offers"),
    // lefthook's documentation: lefthook.yml and .lefthook.yml (and their
    // yaml, toml and json forms), the -local variants, scripts in .lefthook/.
    ("lefthook.yml", "lefthook: the commands git hooks run"),
    ("lefthook.yaml", "lefthook: the commands git hooks run"),
    ("lefthook.toml", "lefthook: the commands git hooks run"),
    ("lefthook.json", "lefthook: the commands git hooks run"),
    (".lefthook.yml", "lefthook: the commands git hooks run"),
    (".lefthook.yaml", "lefthook: the commands git hooks run"),
    (".lefthook.toml", "lefthook: the commands git hooks run"),
    (".lefthook.json", "lefthook: the commands git hooks run"),
    ("lefthook-local.yml", "lefthook: the commands git hooks run"),
    ("lefthook-local.yaml", "lefthook: the commands git hooks run"),
    (".lefthook-local.yml", "lefthook: the commands git hooks run"),
    (".lefthook-local.yaml", "lefthook: the commands git hooks run"),
    (".lefthook", "lefthook: scripts git hooks run"),
    (".lefthook-local", "lefthook: scripts git hooks run"),
    // husky (v9): .husky/ holds the hook scripts git runs.
    (".husky", "husky: the scripts git hooks run"),
    // mise (its configuration documentation): .mise/, .config/mise/,
    // mise/config.toml, .tool-versions; hooks and env commands run on cd.
    (".mise", "mise: hooks and env commands run on cd"),
    (
        ".tool-versions",
        "mise and asdf: the tools and versions run in the folder",
    ),
    // rustup: a toolchain file may name a `path` to a toolchain to run.
    ("rust-toolchain", "rustup: the toolchain cargo and rustc run"),
    ("rust-toolchain.toml", "rustup: the toolchain cargo and rustc run"),
    // cargo: config.toml's rustc-wrapper, runner and aliases, run by any
    // cargo command (an editor's `cargo check` too).
    (".cargo", "cargo: rustc-wrapper, runners and aliases it runs"),
    // vim and neovim with 'exrc': run on start in the folder.
    (".exrc", "vim: commands run on start with exrc"),
    (".nvimrc", "neovim: commands run on start with exrc"),
    (".nvim.lua", "neovim: code run on start with exrc"),
    // npm, yarn and pnpm: a config naming a shell or node options, a
    // yarnPath run as yarn, install hooks.
    (".npmrc", "npm: script-shell and node-options it runs with"),
    (".yarnrc", "yarn: yarn-path, the program run as yarn"),
    (".yarnrc.yml", "yarn: yarnPath, the program run as yarn"),
    (".pnpmfile.cjs", "pnpm: hooks run on install"),
    // git: attributes select filters and diff drivers.
    (".gitattributes", "git: attributes that select filters and diff drivers"),
    // Editors: Zed's tasks and settings, dev containers' commands.
    (".zed", "Zed: tasks and settings"),
    (
        ".devcontainer",
        "dev containers: commands run when the folder is opened in one",
    ),
    // Python: run by every interpreter start that finds them.
    ("sitecustomize.py", "Python: run at every interpreter start"),
    ("usercustomize.py", "Python: run at every interpreter start"),
    ("pyvenv.cfg", "Python venv: names the interpreter the environment runs"),
];

/// Why the host would run the change at `rel` unasked; None if it would
/// not. `classifiers`: the project as the host has it, and as the sandbox
/// left it.
pub fn flag(rel: &Path, classifiers: &[&Classifier<'_>]) -> Option<String> {
    for c in classifiers {
        if let Some(v) = c.classify(rel) {
            return Some(format!("{} [{}]", v.runs, v.class.as_str()));
        }
    }
    extra(rel)
}

/// What EXTRA and the name patterns beside it say of `rel`.
fn extra(rel: &Path) -> Option<String> {
    let names: Vec<&str> = rel.iter().map(|c| c.to_str().unwrap_or("")).collect();
    for (i, name) in names.iter().enumerate() {
        if let Some((_, runs)) = EXTRA.iter().find(|(n, _)| n == name) {
            return Some((*runs).into());
        }
        if name.ends_with(".toml") && (name.starts_with("mise.") || name.starts_with(".mise.")) {
            return Some("mise: hooks and env commands run on cd".into());
        }
        if *name == "mise" && names.get(i + 1) == Some(&"config.toml") {
            return Some("mise: hooks and env commands run on cd".into());
        }
        if *name == ".config" && matches!(names.get(i + 1), Some(&"mise" | &"mise.toml" | &"lefthook.yml")) {
            return Some("mise and lefthook: configuration read from .config/".into());
        }
    }
    // A .pth file runs wherever an interpreter's site-packages is, and a
    // path names no environment by itself.
    if names.last().is_some_and(|n| n.ends_with(".pth")) {
        return Some("Python: a .pth file's import lines run at every interpreter start".into());
    }
    None
}

/// The folders on the way to each changed path, and each changed folder
/// itself: where a repository whose config names paths may stand.
pub fn folders_of<'a>(changed: impl Iterator<Item = (&'a Path, bool)>) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for (rel, is_dir) in changed {
        let mut p = if is_dir { Some(rel) } else { rel.parent() };
        while let Some(d) = p.filter(|d| !d.as_os_str().is_empty()) {
            if !out.insert(d.to_path_buf()) {
                break;
            }
            p = d.parent();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use claude_shim_bundle::host_run::Tree;
    use claude_shim_bundle::PathKind;

    use super::*;

    /// A tree in memory: folders and files with their content.
    struct Fake(BTreeMap<PathBuf, Option<&'static str>>);

    impl Fake {
        fn new(files: &[(&str, &'static str)], dirs: &[&str]) -> Fake {
            let mut m = BTreeMap::new();
            for (p, content) in files {
                m.insert(PathBuf::from(p), Some(*content));
            }
            for d in dirs {
                m.insert(PathBuf::from(d), None);
            }
            Fake(m)
        }
    }

    impl Tree for Fake {
        fn kind(&self, rel: &Path) -> Option<PathKind> {
            match self.0.get(rel) {
                Some(Some(_)) => Some(PathKind::File),
                Some(None) => Some(PathKind::Dir),
                // A folder on the way to an entry.
                None => self.0.keys().any(|p| p.starts_with(rel)).then_some(PathKind::Dir),
            }
        }

        fn read(&self, rel: &Path, _limit: usize) -> Option<Vec<u8>> {
            self.0.get(rel)?.map(|c| c.as_bytes().to_vec())
        }

        fn list(&self, rel: &Path) -> Option<Vec<String>> {
            let children = self.0.keys().filter(|p| p.parent() == Some(rel));
            Some(
                children
                    .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
                    .collect(),
            )
        }
    }

    fn world() -> Fake {
        Fake::new(
            &[
                (".git/HEAD", "ref: refs/heads/main\n"),
                (
                    ".git/config",
                    "[core]\n\tHooksPath = .githooks\n[include]\n\tpath = ../inc.gitconfig\n",
                ),
                ("vendor/bare.git/HEAD", "x"),
                ("deps/x/HEAD", "x"),
                ("env/pyvenv.cfg", "home = /usr/bin\n"),
            ],
            &[
                ".git",
                ".git/objects",
                ".git/refs",
                "vendor/bare.git/objects",
                "vendor/bare.git/refs",
                "deps/x/objects",
                "deps/x/refs",
            ],
        )
    }

    fn f(rel: &str) -> Option<String> {
        let w = world();
        let c = Classifier::new(&w);
        flag(Path::new(rel), &[&c])
    }

    #[test]
    fn plain_edits_are_not_flagged() {
        for rel in [
            "src/main.rs",
            "README.md",
            "docs/a/b.txt",
            "bin/tool",
            "env2/bin/x",
            "lib/x.py",
        ] {
            assert_eq!(f(rel), None, "{rel}");
        }
    }

    #[test]
    fn every_class_is_flagged() {
        for rel in [
            ".git/config",
            ".git/objects/ab/cdef",
            "sub/.git/hooks/pre-commit",
            ".claude/settings.json",
            "sub/.claude/settings.json",
            "sub/.mcp.json",
            "a/b/.envrc",
            ".vscode/tasks.json",
            ".bashrc",
            ".gitmodules",
            "mise.toml",
            "x/mise.dev.toml",
            ".config/mise/config.toml",
            "mise/config.toml",
            ".pre-commit-config.yaml",
            "lefthook.yml",
            ".husky/pre-commit",
            "rust-toolchain.toml",
            ".cargo/config.toml",
            "lib/python3.11/site-packages/evil.pth",
            "env/bin/python",
            "env/pyvenv.cfg",
            "node_modules/.bin/eslint",
            "vendor/bare.git/hooks/post-checkout",
            "deps/x/config",
            "deps/x",
            ".githooks/pre-commit",
            "inc.gitconfig",
        ] {
            assert!(f(rel).is_some(), "{rel} not flagged");
        }
        // A top-only name is only flagged at the top.
        assert_eq!(f("sub/.bashrc"), None);
        assert!(
            f("deps/x/config").unwrap().contains("[repository]"),
            "{:?}",
            f("deps/x/config")
        );
    }

    #[test]
    fn folders_of_changes_are_listed_once() {
        let got = folders_of(
            [
                (Path::new("a/b/c"), false),
                (Path::new("a/b/d"), false),
                (Path::new("e"), true),
            ]
            .into_iter(),
        );
        let want: BTreeSet<PathBuf> = ["a", "a/b", "e"].iter().map(PathBuf::from).collect();
        assert_eq!(got, want);
    }
}
