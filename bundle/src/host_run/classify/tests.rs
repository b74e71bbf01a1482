//! The classifier on a fake tree: each class by its shape, not its name.

use super::*;
use crate::host_run::fake::Fake;

fn class(t: &Fake, rel: &str) -> Option<(Class, String)> {
    classify(Path::new(rel), t).map(|v| (v.class, v.entry.display().to_string()))
}

fn is(t: &Fake, rel: &str, want: Class, entry: &str) {
    assert_eq!(class(t, rel), Some((want, entry.to_owned())), "{rel}");
}

#[test]
fn a_repository_by_git_s_test_whatever_its_name() {
    let t = Fake::default()
        .repo("vendor/x.git")
        .repo("deep/a/b/c/d/e/f/g/h/i/j/bare")
        .file("notrepo/HEAD", "x")
        .dir("notrepo/objects")
        .repo(".git/worktrees/w")
        .file("linked/HEAD", "ref: refs/heads/x\n")
        .file("linked/commondir", "../..\n");
    is(&t, "vendor/x.git/config", Class::Repository, "vendor/x.git");
    is(&t, "vendor/x.git/hooks/pre-commit", Class::Repository, "vendor/x.git");
    is(&t, "vendor/x.git", Class::Repository, "vendor/x.git");
    is(
        &t,
        "deep/a/b/c/d/e/f/g/h/i/j/bare/config",
        Class::Repository,
        "deep/a/b/c/d/e/f/g/h/i/j/bare",
    );
    // A worktree's repository: HEAD and a commondir, no objects of its own.
    is(&t, "linked/config.worktree", Class::Repository, "linked");
    // Missing refs/: not a repository for git.
    assert_eq!(class(&t, "notrepo/config"), None);
    // Anything under a `.git`, whatever is there.
    is(&t, ".git/worktrees/w/config", Class::Repository, ".git");
    is(&t, "a/.git", Class::Repository, "a/.git");
    is(&t, "a/.git/anything/at/all", Class::Repository, "a/.git");
    assert_eq!(class(&t, "vendor/x.gitx"), None);
    assert_eq!(class(&t, "src/main.rs"), None);
}

#[test]
fn what_the_top_repository_s_config_names() {
    let config = "[core]\n\thooksPath = tools/hooks\n[include]\n\tpath = ../shared.gitconfig\n\
                  [includeIf \"gitdir:~/w/\"]\n\tpath = /p/abs.inc\n[include]\n\tpath = ../../outside\n\
                  [include]\n\tpath = ~/home.inc\n";
    let t = Fake::default()
        .repo(".git")
        .file(".git/config", config)
        // Included by the included file, which did not exist at start: it
        // counts as soon as the file naming it does.
        .file("shared.gitconfig", "[include]\npath = more/chained.inc\n");
    let root = PathBuf::from("/p");
    struct At<'a>(&'a Fake, &'a Path);
    impl Tree for At<'_> {
        fn kind(&self, rel: &Path) -> Option<PathKind> {
            self.0.kind(rel)
        }
        fn read(&self, rel: &Path, limit: usize) -> Option<Vec<u8>> {
            self.0.read(rel, limit)
        }
        fn root(&self) -> Option<&Path> {
            Some(self.1)
        }
        fn list(&self, rel: &Path) -> Option<Vec<String>> {
            self.0.list(rel)
        }
    }
    let at = At(&t, &root);
    let c = Classifier::new(&at);
    let got = |rel: &str| {
        c.classify(Path::new(rel))
            .map(|v| (v.class, v.entry.display().to_string()))
    };
    for (rel, entry) in [
        ("shared.gitconfig", "shared.gitconfig"),
        ("more/chained.inc", "more/chained.inc"),
        ("abs.inc", "abs.inc"),
        ("tools/hooks", "tools/hooks"),
        ("tools/hooks/pre-commit", "tools/hooks"),
    ] {
        assert_eq!(got(rel), Some((Class::GitConfigured, entry.to_owned())), "{rel}");
    }
    // Outside the tree or in the home: not the project's.
    assert_eq!(got("outside"), None);
    assert_eq!(got("home.inc"), None);
    assert_eq!(got("tools/other.sh"), None);
    assert_eq!(c.included().count(), 3);
}

#[test]
fn husky_s_scripts_beside_its_hooks_and_a_gitdir_file_s_repository() {
    let t = Fake::default()
        .file(".git", "gitdir: repo.git\n")
        .repo("repo.git")
        .file("repo.git/config", "[core]\nhooksPath = tools/husky/_\n");
    // husky's layout in another folder than its own name: the folder beside
    // the hooks path by the rule, `.husky` anywhere by its name.
    is(&t, "tools/husky/pre-commit", Class::GitConfigured, "tools/husky");
    is(&t, "tools/husky/_/h", Class::GitConfigured, "tools/husky");
    is(&t, "web/.husky/pre-commit", Class::HookManager, "web/.husky");
    assert_eq!(class(&t, "tools/other.sh"), None);
    is(&t, ".git", Class::Repository, ".git");
    is(&t, "repo.git/config", Class::Repository, "repo.git");
}

/// A gitlink in the top index: a plain `git status` at the top recurses
/// into its repository (here absorbed into `.git/modules`, as `git
/// submodule` leaves it) and runs that repository's config, which may
/// include a file of the tree.
#[test]
fn the_top_index_s_gitlinks_and_what_their_configs_name() {
    let index = crate::host_run::index::tests::index_of(&[
        (0o100644, "README"),
        (0o160000, "node_modules/x/deep/sub"),
        (0o160000, "gone"),
    ]);
    let t = Fake::default()
        .repo(".git")
        .bytes(".git/index", &index)
        .repo(".git/modules/sub")
        .file(".git/modules/sub/config", "[include]\npath = ../../../lib/sub.inc\n")
        .file("node_modules/x/deep/sub/.git", "gitdir: ../../../../.git/modules/sub\n");
    let c = Classifier::new(&t);
    let got = |rel: &str| c.classify(Path::new(rel)).map(|v| (v.class, v.entry, v.runs));
    let (class, entry, runs) = got("node_modules/x/deep/sub/.git").unwrap();
    assert_eq!(
        (class, entry),
        (Class::Repository, "node_modules/x/deep/sub/.git".into())
    );
    assert!(runs.contains("gitlink"), "{runs}");
    assert_eq!(got("lib/sub.inc").map(|v| v.0), Some(Class::GitConfigured));
    // A gitlink not checked out: its `.git`, when one appears, is host-run.
    assert_eq!(got("gone/.git/config").map(|v| v.1), Some("gone/.git".into()));
    assert_eq!(got("node_modules/x/deep/sub/index.js"), None);
}

#[test]
fn the_named_entries_at_their_depth() {
    let t = Fake::default();
    is(&t, "sub/.claude/settings.json", Class::Agent, "sub/.claude");
    is(&t, "a/b/.envrc", Class::ToolManager, "a/b/.envrc");
    is(&t, ".bashrc", Class::Shell, ".bashrc");
    is(
        &t,
        ".pre-commit-config.yaml",
        Class::HookManager,
        ".pre-commit-config.yaml",
    );
    is(
        &t,
        "a/.config/lefthook.yml",
        Class::HookManager,
        "a/.config/lefthook.yml",
    );
    is(&t, "lefthook-local.toml", Class::HookManager, "lefthook-local.toml");
    is(&t, ".lefthook/pre-commit/x.sh", Class::HookManager, ".lefthook");
    is(&t, ".config/mise/conf.d/a.toml", Class::ToolManager, ".config/mise");
    is(&t, "w/mise/config.ci.toml", Class::ToolManager, "w/mise/config.ci.toml");
    is(&t, "w/mise.ci.local.toml", Class::ToolManager, "w/mise.ci.local.toml");
    is(
        &t,
        "crate/rust-toolchain.toml",
        Class::Toolchain,
        "crate/rust-toolchain.toml",
    );
    is(&t, ".tool-versions", Class::Toolchain, ".tool-versions");
    is(&t, "x.code-workspace", Class::Editor, "x.code-workspace");
    // The same names in a folder the tool does not read them from.
    assert_eq!(class(&t, "src/config.toml"), None);
    assert_eq!(class(&t, "docs/mise.md"), None);
    // A home's start-up file only at the top.
    assert_eq!(class(&t, "sub/.bashrc"), None);
}

#[test]
fn environments_inside_the_project() {
    let t = Fake::default()
        .file(".venv/pyvenv.cfg", "home = /usr/bin\n")
        .dir(".venv/lib/python3.11/site-packages/pkg")
        .link(".venv/bin/python", "/usr/bin/python3")
        .dir("node_modules/.bin");
    let sp = ".venv/lib/python3.11/site-packages";
    is(&t, ".venv/pyvenv.cfg", Class::Environment, ".venv/pyvenv.cfg");
    is(&t, ".venv/bin/python", Class::Environment, ".venv/bin/python");
    is(
        &t,
        &format!("{sp}/evil.pth"),
        Class::Environment,
        &format!("{sp}/evil.pth"),
    );
    is(
        &t,
        &format!("{sp}/sitecustomize.py"),
        Class::Environment,
        &format!("{sp}/sitecustomize.py"),
    );
    is(
        &t,
        "node_modules/.bin/eslint",
        Class::Environment,
        "node_modules/.bin/eslint",
    );
    is(
        &t,
        "a/node_modules/.bin/x/y",
        Class::Environment,
        "a/node_modules/.bin/x",
    );
    // A package's own modules are the project's code, run when it is.
    assert_eq!(class(&t, &format!("{sp}/pkg/__init__.py")), None);
    assert_eq!(class(&t, "node_modules/pkg/index.js"), None);
    // No pyvenv.cfg: not a virtualenv.
    assert_eq!(class(&t, "env/bin/python"), None);
}

#[test]
fn odd_paths_are_not_classified() {
    let t = Fake::default();
    assert_eq!(class(&t, ""), None);
    assert_eq!(class(&t, "/abs/.git"), None);
    assert_eq!(class(&t, "../.git"), None);
}
