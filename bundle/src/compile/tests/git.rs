//! The git pass and the nested host-run entries through whole compiles: a
//! repository as a mount point with its internals read-only, the `.git`
//! placeholder, core.hooksPath and includes, gitdir files and submodules,
//! entries found below the top, and which placeholders are made.

use super::*;

const RW: [&str; 3] = ["rbind", "nosuid", "nodev"];
const RO: [&str; 5] = ["rbind", "ro", "rro", "nosuid", "nodev"];

fn is_bind_of_itself(c: &Compiled, dest: &str) -> Vec<String> {
    let m = only_mount(c, dest);
    assert_eq!(m.source().as_deref(), Some(Path::new(dest)), "{dest}");
    opts(m).into_iter().map(str::to_owned).collect()
}

fn read_only(c: &Compiled, dest: &str) {
    assert_eq!(is_bind_of_itself(c, dest), RO, "{dest}");
}

fn placeholder(c: &Compiled, path: &str) -> Option<bool> {
    c.placeholders.iter().find(|p| p.path == Path::new(path)).map(|p| p.dir)
}

fn at(workdir: &str) -> Invocation {
    Invocation {
        workdir: workdir.into(),
        ..inv()
    }
}

#[test]
fn a_repository_is_a_mount_point_with_its_internals_read_only() {
    let host = FakeHost::typical()
        .dir("/home/u/proj/.git/info")
        .file("/home/u/proj/.git/HEAD")
        .file("/home/u/proj/.git/worktrees/wt/commondir")
        .file("/home/u/proj/.git/modules/lib/HEAD")
        .file("/home/u/proj/.git/modules/lib/config")
        .file("/home/u/proj/.git/modules/libs/deep/HEAD");
    let c = run(&Policy::embedded_default(), &host, &inv());
    // rename(2) and rmdir(2) of a mount point fail with EBUSY.
    assert_eq!(is_bind_of_itself(&c, "/home/u/proj/.git"), RW);
    for p in ["config", "hooks", "info", "worktrees"] {
        read_only(&c, &format!("/home/u/proj/.git/{p}"));
    }
    // No commondir to protect, and none stood in for (git dies on an empty one).
    assert!(mount_at(&c, "/home/u/proj/.git/commondir").is_empty());
    assert!(mount_at(&c, "/home/u/proj/.git/config.worktree").is_empty());
    // Every level of modules/ a mount point, each repository protected.
    for m in ["modules", "modules/lib", "modules/libs", "modules/libs/deep"] {
        assert_eq!(is_bind_of_itself(&c, &format!("/home/u/proj/.git/{m}")), RW, "{m}");
    }
    read_only(&c, "/home/u/proj/.git/modules/lib/config");
    assert_eq!(placeholder(&c, "/home/u/proj/.git/modules/lib/hooks"), Some(true));
    assert_eq!(
        placeholder(&c, "/home/u/proj/.git/modules/libs/deep/config"),
        Some(false)
    );
    // The mount point comes before what is mounted inside it.
    let dests: Vec<&Path> = c
        .spec
        .mounts()
        .iter()
        .flatten()
        .map(|m| m.destination().as_path())
        .collect();
    let pos = |d: &str| dests.iter().position(|x| *x == Path::new(d)).unwrap();
    assert!(pos("/home/u/proj") < pos("/home/u/proj/.git"));
    assert!(pos("/home/u/proj/.git") < pos("/home/u/proj/.git/config"));
    assert!(pos("/home/u/proj/.git/modules/lib") < pos("/home/u/proj/.git/modules/lib/config"));
}

#[test]
fn a_working_directory_without_git_gets_an_empty_read_only_one() {
    let host = FakeHost::typical().dir("/home/u/plain");
    let c = run(&Policy::embedded_default(), &host, &at("/home/u/plain"));
    assert_eq!(placeholder(&c, "/home/u/plain/.git"), Some(true));
    read_only(&c, "/home/u/plain/.git");
    assert_eq!(
        c.placeholders
            .iter()
            .filter(|p| p.path.starts_with("/home/u/plain/.git"))
            .count(),
        1
    );
    // Nothing to stand in for where the sandbox cannot write.
    let c = run(&policy("[filesystem]\nworkdir = \"ro\""), &host, &at("/home/u/plain"));
    assert_eq!(placeholder(&c, "/home/u/plain/.git"), None);
    // The opt-out drops the whole pass.
    let c = run(
        &policy("[filesystem]\nunprotected = [\".git\"]"),
        &host,
        &at("/home/u/plain"),
    );
    assert!(!c.placeholders.iter().any(|p| p.path.starts_with("/home/u/plain/.git")));
    assert_eq!(c.opt_outs, ["filesystem.unprotected: .git"]);
    let c = run(
        &policy("[filesystem]\nunprotected = [\".git/\"]"),
        &FakeHost::typical(),
        &inv(),
    );
    assert!(mount_at(&c, "/home/u/proj/.git").is_empty() && mount_at(&c, "/home/u/proj/.git/config").is_empty());
}

#[test]
fn hooks_path_and_included_files_in_the_project_are_read_only() {
    let config = "[core]\n\tbare = false\n\thooksPath = .githooks\n[include]\n\tpath = ../shared.gitconfig\n\
                  [includeIf \"gitdir:/x/\"]\n\tpath = /etc/gitconfig.d/x\n";
    let host = FakeHost::typical()
        .content("/home/u/proj/.git/config", config)
        .dir("/home/u/proj/.githooks")
        .file("/home/u/proj/shared.gitconfig")
        .file("/etc/gitconfig.d/x");
    let c = run(&Policy::embedded_default(), &host, &inv());
    read_only(&c, "/home/u/proj/.githooks");
    read_only(&c, "/home/u/proj/shared.gitconfig");
    assert!(mount_at(&c, "/etc/gitconfig.d/x").is_empty(), "read-only already");
    // A missing hooks directory gets an empty read-only one (invisible to git).
    let host = FakeHost::typical()
        .content("/home/u/proj/.git/config", "[core]\nhooksPath = \"tools/hooks\"\n")
        .dir("/home/u/proj/tools");
    let c = run(&Policy::embedded_default(), &host, &inv());
    assert_eq!(placeholder(&c, "/home/u/proj/tools/hooks"), Some(true));
    read_only(&c, "/home/u/proj/tools/hooks");
    // Absolute, in the home, or out of the project: nothing to do.
    for hooks in ["/opt/hooks", "~/hooks", "../elsewhere"] {
        let host = FakeHost::typical()
            .content("/home/u/proj/.git/config", &format!("[core]\nhooksPath = {hooks}\n"))
            .dir("/opt/hooks")
            .dir("/home/u/hooks")
            .dir("/home/u/elsewhere");
        let c = run(&Policy::embedded_default(), &host, &inv());
        let extra: Vec<_> = c
            .placeholders
            .iter()
            .filter(|p| !p.path.starts_with("/home/u/proj"))
            .collect();
        assert!(extra.is_empty(), "{hooks}: {extra:?}");
        for d in ["/opt/hooks", "/home/u/hooks", "/home/u/elsewhere"] {
            assert!(mount_at(&c, d).is_empty(), "{hooks}: {d}");
        }
    }
    // A symlinked hooks directory is protected where it points.
    let host = FakeHost::typical()
        .link("/home/u/proj/.git/hooks", "../.githooks")
        .dir("/home/u/proj/.githooks");
    let c = run(&Policy::embedded_default(), &host, &inv());
    read_only(&c, "/home/u/proj/.githooks");
}

#[test]
fn gitdir_files_are_read_only_and_name_repositories_protected_where_writable() {
    // A linked worktree whose repository is out of the working directory.
    let host = FakeHost::typical()
        .dir("/home/u/wt")
        .content("/home/u/wt/.git", "gitdir: /home/u/main/.git/worktrees/wt\n")
        .file("/home/u/main/.git/worktrees/wt/commondir");
    let c = run(&Policy::embedded_default(), &host, &at("/home/u/wt"));
    read_only(&c, "/home/u/wt/.git");
    assert!(
        mount_at(&c, "/home/u/main/.git/worktrees/wt").is_empty(),
        "read-only already"
    );
    assert_eq!(placeholder(&c, "/home/u/wt/.git"), None);
    // A submodule checkout inside the project: its repository under .git/modules.
    let host = FakeHost::typical()
        .content("/home/u/proj/lib/.git", "gitdir: ../.git/modules/lib\n")
        .file("/home/u/proj/.git/modules/lib/HEAD")
        .content(
            "/home/u/proj/.git/modules/lib/config",
            "[core]\n\tworktree = ../../../lib\n\thooksPath = .hooks\n",
        )
        .dir("/home/u/proj/lib/.hooks");
    let c = run(&Policy::embedded_default(), &host, &inv());
    read_only(&c, "/home/u/proj/lib/.git");
    assert_eq!(is_bind_of_itself(&c, "/home/u/proj/.git/modules/lib"), RW);
    read_only(&c, "/home/u/proj/.git/modules/lib/config");
    // hooksPath relative to the submodule's worktree (core.worktree).
    read_only(&c, "/home/u/proj/lib/.hooks");
}

/// The list's newer classes, each by the names its tool reads: at the top
/// and below, globs and two-component names included, and the same names
/// in folders the tools do not read left writable.
#[test]
fn hook_managers_tool_managers_and_toolchains_are_protected() {
    let host = FakeHost::typical()
        .file("/home/u/proj/.pre-commit-config.yaml")
        .file("/home/u/proj/mise.ci.toml")
        .file("/home/u/proj/.config/mise/config.toml")
        .file("/home/u/proj/web/lefthook-local.yml")
        .file("/home/u/proj/web/.husky/pre-commit")
        .file("/home/u/proj/crate/rust-toolchain.toml")
        .file("/home/u/proj/.tool-versions")
        .file("/home/u/proj/tools/mise/config.toml")
        .file("/home/u/proj/src/config.toml")
        .file("/home/u/proj/docs/mise.md");
    let c = run(&Policy::embedded_default(), &host, &inv());
    for p in [
        ".pre-commit-config.yaml",
        "mise.ci.toml",
        ".config/mise",
        "web/lefthook-local.yml",
        "web/.husky",
        "crate/rust-toolchain.toml",
        ".tool-versions",
        "tools/mise/config.toml",
    ] {
        read_only(&c, &format!("/home/u/proj/{p}"));
    }
    for p in ["src/config.toml", "docs/mise.md"] {
        assert!(mount_at(&c, &format!("/home/u/proj/{p}")).is_empty(), "{p}");
    }
    // None stood in for: a new one is for the quarantine at exit.
    assert!(
        !c.placeholders
            .iter()
            .any(|p| p.path.ends_with(".husky") || p.path.ends_with(".lefthook")),
        "{:?}",
        c.placeholders
    );
}

/// By shape, not by name: a repository git takes for one under another
/// name is protected as a `.git`. A virtualenv is the project's (the live
/// mode leaves environments inside the project alone, docs/sandbox.md).
#[test]
fn repositories_by_shape_are_protected_environments_are_the_project_s() {
    let host = FakeHost::typical()
        .file("/home/u/proj/vendor/lib.git/HEAD")
        .dir("/home/u/proj/vendor/lib.git/objects")
        .dir("/home/u/proj/vendor/lib.git/refs")
        .file("/home/u/proj/vendor/lib.git/config")
        .file("/home/u/proj/notes/HEAD")
        .file("/home/u/proj/notes/config")
        .file("/home/u/proj/.venv/pyvenv.cfg")
        .file("/home/u/proj/.venv/bin/activate")
        .file("/home/u/proj/.venv/bin/pytest")
        .file("/home/u/proj/.venv/lib/python3.11/site-packages/x.pth")
        .file("/home/u/proj/.venv/lib/python3.11/site-packages/pkg/__init__.py");
    let c = run(&Policy::embedded_default(), &host, &inv());
    assert_eq!(is_bind_of_itself(&c, "/home/u/proj/vendor/lib.git"), RW);
    read_only(&c, "/home/u/proj/vendor/lib.git/config");
    for p in [
        "notes/config",
        ".venv/pyvenv.cfg",
        ".venv/bin/activate",
        ".venv/lib/python3.11/site-packages/x.pth",
        ".venv/bin/pytest",
        ".venv/lib/python3.11/site-packages/pkg/__init__.py",
    ] {
        assert!(mount_at(&c, &format!("/home/u/proj/{p}")).is_empty(), "{p}");
    }
    let start = c.host_run.as_ref().unwrap();
    assert!(
        start.contains(&PathBuf::from("/home/u/proj/vendor/lib.git/config")),
        "{start:?}"
    );
    assert!(!start.iter().any(|p| p.starts_with("/home/u/proj/notes")), "{start:?}");
}

#[test]
fn entries_below_the_top_are_protected_as_at_the_top() {
    let host = FakeHost::typical()
        .dir("/home/u/proj/sub/.git/hooks")
        .file("/home/u/proj/sub/.git/config")
        .file("/home/u/proj/sub/.claude/settings.json")
        .file("/home/u/proj/sub/.mcp.json")
        .file("/home/u/proj/a/b/c/.envrc")
        .dir("/home/u/proj/shared")
        .link("/home/u/proj/a/.vscode", "../shared")
        .dir("/home/u/proj/node_modules/p/.claude")
        .dir("/home/u/proj/sub/.claude/plugin/.git")
        .file("/home/u/proj/sub/.bashrc")
        .file("/home/u/proj/sub/.gitmodules");
    let c = run(&Policy::embedded_default(), &host, &inv());
    assert_eq!(is_bind_of_itself(&c, "/home/u/proj/sub/.git"), RW);
    read_only(&c, "/home/u/proj/sub/.git/config");
    read_only(&c, "/home/u/proj/sub/.git/hooks");
    for p in ["sub/.claude", "sub/.mcp.json", "a/b/c/.envrc", "shared"] {
        read_only(&c, &format!("/home/u/proj/{p}"));
    }
    // Not searched (node_modules); under a read-only folder already;
    // looked for at the top only.
    for p in [
        "node_modules/p/.claude",
        "sub/.claude/plugin/.git",
        "sub/.bashrc",
        "sub/.gitmodules",
    ] {
        assert!(mount_at(&c, &format!("/home/u/proj/{p}")).is_empty(), "{p}");
    }
    // Nothing is stood in for below the top.
    assert!(
        !c.placeholders
            .iter()
            .any(|p| p.path.starts_with("/home/u/proj/sub") || p.path.starts_with("/home/u/proj/a")),
        "{:?}",
        c.placeholders
    );
    // An opted-out name is not protected below the top either.
    let c = run(&policy("[filesystem]\nunprotected = [\".claude/\"]"), &host, &inv());
    assert!(mount_at(&c, "/home/u/proj/sub/.claude").is_empty());
    assert!(!mount_at(&c, "/home/u/proj/sub/.mcp.json").is_empty());
    // A repository under a read-only bind needs no mount point.
    let host = FakeHost::typical().dir("/home/u/proj/vendor/dep/.git/hooks");
    let c = run(
        &policy("[filesystem]\nreadonly = [\"/home/u/proj/vendor\"]"),
        &host,
        &inv(),
    );
    assert!(mount_at(&c, "/home/u/proj/vendor/dep/.git").is_empty());
}

#[test]
fn placeholders_are_directories_except_for_a_home() {
    let c = agent();
    let mut made: Vec<(String, bool)> = c
        .placeholders
        .iter()
        .map(|p| {
            (
                p.path.strip_prefix("/home/u/proj").unwrap().display().to_string(),
                p.dir,
            )
        })
        .collect();
    made.sort();
    let want: Vec<(String, bool)> = [".claude", ".idea", ".vscode"]
        .iter()
        .map(|n| (n.to_string(), true))
        .collect();
    assert_eq!(made, want);
    // The home as the working directory: its shell start-up files too.
    let host = FakeHost::typical().dir("/home/u/.git");
    let c = run(&Policy::embedded_default(), &host, &at("/home/u"));
    for f in [".bashrc", ".profile", ".zshrc", ".zshenv", ".bash_profile"] {
        assert_eq!(placeholder(&c, &format!("/home/u/{f}")), Some(false), "{f}");
    }
    for f in [".mcp.json", ".envrc", ".gitconfig", ".gitmodules"] {
        assert_eq!(placeholder(&c, &format!("/home/u/{f}")), None, "{f}");
    }
}

#[test]
fn too_many_repositories_are_refused() {
    let mut host = FakeHost::typical();
    for i in 0..300 {
        host = host.dir(&format!("/home/u/proj/r{i}/.git"));
    }
    let e = error(&Policy::embedded_default(), &host, &inv());
    assert!(
        e.starts_with("protect the git repositories under /home/u/proj: there are more than"),
        "{e}"
    );
}
