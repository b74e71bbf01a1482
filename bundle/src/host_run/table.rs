//! The one list of names a host tool runs code from without being asked to
//! run the project (`HOST_RUN`), grouped by tool, each group citing where
//! the tool's own documentation or source says it reads them. The policy's
//! built-in protected paths, the start's search and the compiler's
//! protection derive from it; `classify` adds what is known by shape rather
//! than by name.
//!
//! Decided and left out, each for a reason the threat model repeats: `.env`
//! (direnv reads it only with `load_dotenv`, off by default; it is hidden
//! from the sandbox and never written by a tool run unasked); `.nvmrc`,
//! `.node-version`, `.ruby-version`, `.sdkmanrc`, `go.mod`'s `toolchain`
//! (they name a version the manager installs from its registry, not a
//! program in the project); `package.json` scripts, `Makefile`s, `.npmrc`,
//! `.pnpmfile.cjs` and the like (they run when the user runs the project or
//! installs its dependencies, which is running the agent's work).

use std::collections::HashMap;
use std::sync::OnceLock;

use super::list::Class::{Agent, Editor, HookManager, Repository, Shell, ToolManager, Toolchain};
use super::list::Depth::{Any, Root};
use super::list::Missing::{EmptyDir, EmptyFileInHome, Nothing};
use super::list::Shape::{Dir, File, Git};
use super::list::{glob, Class, Depth, HostRun, Missing, Shape};

const fn e(
    name: &'static str,
    shape: Shape,
    depth: Depth,
    missing: Missing,
    class: Class,
    runs: &'static str,
) -> HostRun {
    HostRun {
        name,
        shape,
        depth,
        missing,
        class,
        runs,
    }
}

const GIT: &str = "git: its config's core.fsmonitor, hooks, aliases, filters and credential helpers";
const CLAUDE: &str = "Claude Code: settings hooks, commands and agents";
const MCP: &str = "Claude Code: the MCP servers it starts";
const HG: &str = "Mercurial: hooks in .hg/hgrc";
const JJ: &str = "Jujutsu: the repository's config (aliases, fix tools, pager)";
const MISE: &str = "mise: hooks, env sources and tool paths, run on cd and by mise env";
const TOOL_VERSIONS: &str = "mise and asdf: the tools (path: versions included) every command of the project runs";
const DIRENV: &str = "direnv: the shell code it evaluates on cd";
const PRE_COMMIT: &str = "pre-commit: the hooks it runs on git commit";
const LEFTHOOK: &str = "lefthook: the commands and scripts it runs on git commit";
const HUSKY: &str = "husky: the scripts its hooks run on git commit";
const RUSTUP: &str = "rustup: the toolchain (a path = included) cargo and rustc run from";
const PYTHON_VERSION: &str = "pyenv and uv: the interpreter the project's python runs";
const YARN: &str = "yarn: yarnPath, the script every yarn command runs";
const VSCODE: &str = "VS Code: tasks run on folder open, terminal and tool settings";
const IDEA: &str = "JetBrains IDEs: run configurations and startup tasks";
const ZED: &str = "Zed: tasks and language-server binaries it starts on open";
const HELIX: &str = "Helix: the language servers it starts on open";
const NVIM: &str = "Neovim (exrc): the file it sources on start in that folder";
const EMACS: &str = "Emacs: directory-local variables and eval forms";
const DEVCONTAINER: &str = "Dev Containers: initializeCommand, run on the host";
const CURSOR: &str = "Cursor: the MCP servers and rules of the project";
const GEMINI: &str = "Gemini CLI: the project's settings, hooks and MCP servers";
const CODEX: &str = "Codex: the project's config, its MCP servers and commands";
const GITCONFIG: &str = "git: global config of a home, or included by the repository's";
const GITMODULES: &str = "git: the submodules it clones and checks out";

/// The list. Each entry's `runs` says which tool runs what.
pub const HOST_RUN: &[HostRun] = &[
    // git, on every status and commit of the user or an editor: the config's
    // core.fsmonitor and hooks, aliases, filters, diff and merge drivers,
    // credential helpers, and the hooks directory. Handled by its own pass
    // (the directory a mount point, its config, hooks, info, commondir and
    // worktrees read-only); a working directory without one gets an empty
    // read-only `.git`, which git ignores as it looks further up. A
    // repository by any other name is `classify`'s (git's own test).
    e(".git", Git, Any, EmptyDir, Repository, GIT),
    // Mercurial: hooks in .hg/hgrc. No placeholder: hg takes an empty .hg
    // for a broken repository instead of looking further up.
    e(".hg", Dir, Any, Nothing, Repository, HG),
    // Jujutsu: `.jj/repo/config.toml` is the repository's config (jj docs,
    // "Configuration": repo-level config).
    e(".jj", Dir, Any, Nothing, Repository, JJ),
    // git: the user's global config when the project is the home, or one a
    // repository's config includes (include.path = ../.gitconfig).
    e(".gitconfig", File, Root, Nothing, Repository, GITCONFIG),
    // git: submodule URLs and paths it clones and checks out.
    e(".gitmodules", File, Root, Nothing, Repository, GITMODULES),
    // Claude Code: settings.json hooks and status line, commands, agents and
    // skills, on its next start in that folder.
    e(".claude", Dir, Any, EmptyDir, Agent, CLAUDE),
    // Claude Code: the MCP servers it starts (commands) in that folder.
    e(".mcp.json", File, Any, Nothing, Agent, MCP),
    // Other agents' project settings, read on start in that folder: Cursor's
    // `.cursor/mcp.json`, Gemini CLI's `.gemini/settings.json` (hooks,
    // mcpServers), Codex's `.codex/config.toml` (each tool's docs, "MCP").
    e(".cursor", Dir, Any, Nothing, Agent, CURSOR),
    e(".gemini", Dir, Any, Nothing, Agent, GEMINI),
    e(".codex", Dir, Any, Nothing, Agent, CODEX),
    // VS Code (and forks): tasks with runOn folderOpen, terminal profiles,
    // settings naming interpreters and linters to run; a workspace file
    // holds the same settings and tasks.
    e(".vscode", Dir, Any, EmptyDir, Editor, VSCODE),
    e("*.code-workspace", File, Any, Nothing, Editor, VSCODE),
    // JetBrains IDEs: run configurations, startup tasks, external tools.
    e(".idea", Dir, Any, EmptyDir, Editor, IDEA),
    // Zed: `.zed/settings.json` (lsp binaries) and `.zed/tasks.json` (Zed
    // docs, "Configuring Zed": project settings).
    e(".zed", Dir, Any, Nothing, Editor, ZED),
    // Helix: `.helix/languages.toml` and `config.toml` of the workspace
    // (Helix docs, "Languages": workspace configuration).
    e(".helix", Dir, Any, Nothing, Editor, HELIX),
    // Neovim with 'exrc' (`:help exrc`): `.nvim.lua`, `.nvimrc`, `.exrc`.
    e(".nvim.lua", File, Any, Nothing, Editor, NVIM),
    e(".nvimrc", File, Any, Nothing, Editor, NVIM),
    e(".exrc", File, Any, Nothing, Editor, NVIM),
    // Emacs: `.dir-locals.el` and `.dir-locals-2.el` (Emacs manual,
    // "Directory Variables"; `eval:` forms run once marked safe).
    e(".dir-locals.el", File, Any, Nothing, Editor, EMACS),
    e(".dir-locals-2.el", File, Any, Nothing, Editor, EMACS),
    // Dev Containers: `initializeCommand` runs on the host before the
    // container is made (containers.dev, "devcontainer.json reference").
    e(".devcontainer", Dir, Any, Nothing, Editor, DEVCONTAINER),
    e(".devcontainer.json", File, Any, Nothing, Editor, DEVCONTAINER),
    // direnv: shell code evaluated on every `cd` into the folder.
    e(".envrc", File, Any, Nothing, ToolManager, DIRENV),
    // mise: every name of mise's LOCAL_CONFIG_FILENAMES and the MISE_ENV
    // patterns (mise src/config/mod.rs), read in each folder up from the
    // working directory: `mise.toml`, `.mise.toml`, `mise.<env>.toml`,
    // `mise.local.toml`, the `.rtx` names, `mise/config.toml`,
    // `.mise/config.toml` and `.mise/conf.d/`, `.config/mise.toml` and
    // `.config/mise.<env>.toml` (`env_config_patterns`; the names in any
    // folder cover them), `.config/mise/`
    // (config.toml, mise.toml, conf.d/*.toml), and `.miserc.toml` (its
    // early settings).
    e("mise.toml", File, Any, Nothing, ToolManager, MISE),
    e("mise.*.toml", File, Any, Nothing, ToolManager, MISE),
    e(".mise.toml", File, Any, Nothing, ToolManager, MISE),
    e(".mise.*.toml", File, Any, Nothing, ToolManager, MISE),
    e(".rtx.toml", File, Any, Nothing, ToolManager, MISE),
    e(".rtx.*.toml", File, Any, Nothing, ToolManager, MISE),
    e(".miserc.toml", File, Any, Nothing, ToolManager, MISE),
    e(".mise", Dir, Any, Nothing, ToolManager, MISE),
    e("mise/config.toml", File, Any, Nothing, ToolManager, MISE),
    e("mise/config.*.toml", File, Any, Nothing, ToolManager, MISE),
    e(".config/mise", Dir, Any, Nothing, ToolManager, MISE),
    // mise and asdf: `.tool-versions` selects the tools, and a `path:`
    // version runs a folder of the project as the tool (mise docs, "Tool
    // versions"; asdf docs, ".tool-versions").
    e(".tool-versions", File, Any, Nothing, Toolchain, TOOL_VERSIONS),
    // rustup: the toolchain file, found up from the working directory; its
    // `path` names a toolchain directory whose cargo runs (rustup book,
    // "Overrides", "The toolchain file").
    e("rust-toolchain", File, Any, Nothing, Toolchain, RUSTUP),
    e("rust-toolchain.toml", File, Any, Nothing, Toolchain, RUSTUP),
    // pyenv (a version name that is a path ran the shims it named,
    // CVE-2022-35861) and uv (a request may name an interpreter's path, uv
    // docs, "Python versions").
    e(".python-version", File, Any, Nothing, Toolchain, PYTHON_VERSION),
    // yarn: `yarnPath` in `.yarnrc.yml` (berry) and `yarn-path` in
    // `.yarnrc` (1.x) name the script every yarn command hands over to.
    e(".yarnrc.yml", File, Any, Nothing, Toolchain, YARN),
    e(".yarnrc", File, Any, Nothing, Toolchain, YARN),
    // pre-commit: its config at the repository's top (pre-commit
    // constants.py, CONFIG_FILE) names the hooks, `repo: local` commands
    // included; `.yml` taken too, which nothing but a rename separates.
    e(".pre-commit-config.yaml", File, Any, Nothing, HookManager, PRE_COMMIT),
    e(".pre-commit-config.yml", File, Any, Nothing, HookManager, PRE_COMMIT),
    // lefthook: every main and -local config name, with or without the dot,
    // in .yml/.yaml/.toml/.json/.jsonc and under .config/ (lefthook docs,
    // "Config file name"), and the script folders (`source_dir`,
    // `source_dir_local`).
    e("lefthook.*", File, Any, Nothing, HookManager, LEFTHOOK),
    e(".lefthook.*", File, Any, Nothing, HookManager, LEFTHOOK),
    e("lefthook-local.*", File, Any, Nothing, HookManager, LEFTHOOK),
    e(".lefthook-local.*", File, Any, Nothing, HookManager, LEFTHOOK),
    e(".lefthook", Dir, Any, Nothing, HookManager, LEFTHOOK),
    e(".lefthook-local", Dir, Any, Nothing, HookManager, LEFTHOOK),
    // husky (v9): `.husky/` holds the scripts its hooks run (`.husky/_` is
    // core.hooksPath; husky docs, "How it works").
    e(".husky", Dir, Any, Nothing, HookManager, HUSKY),
    // Shells: start-up files, run by the next terminal when the project is
    // the home. In another project they run only if sourced, and a new one
    // is found at exit.
    e(
        ".bashrc",
        File,
        Root,
        EmptyFileInHome,
        Shell,
        "bash: start-up file of a home",
    ),
    e(
        ".bash_profile",
        File,
        Root,
        EmptyFileInHome,
        Shell,
        "bash: start-up file of a home",
    ),
    e(
        ".bash_login",
        File,
        Root,
        EmptyFileInHome,
        Shell,
        "bash: start-up file of a home",
    ),
    e(
        ".profile",
        File,
        Root,
        EmptyFileInHome,
        Shell,
        "sh: start-up file of a home",
    ),
    e(
        ".zshrc",
        File,
        Root,
        EmptyFileInHome,
        Shell,
        "zsh: start-up file of a home",
    ),
    e(
        ".zprofile",
        File,
        Root,
        EmptyFileInHome,
        Shell,
        "zsh: start-up file of a home",
    ),
    e(
        ".zshenv",
        File,
        Root,
        EmptyFileInHome,
        Shell,
        "zsh: start-up file of a home",
    ),
];

/// What git runs code from or follows inside a repository's `.git`: a new
/// one in a repository that was there at start is for the quarantine.
pub const GIT_INNER: &[&str] = &["config", "config.worktree", "commondir", "hooks"];

/// The entry `rel` is (a path relative to the working directory: `.claude`,
/// `sub/.config/mise`, `mise.dev.toml`), if any. A single name stands for
/// an entry in any folder.
pub fn find(rel: &str) -> Option<&'static HostRun> {
    let parts: Vec<&str> = rel.split('/').filter(|c| !c.is_empty()).collect();
    find_parts(&parts)
}

/// `find` for a path already split into its components: a lookup of its
/// last component, then the few glob names, so that a walk classifying
/// every path of a big tree pays a hash per path, not a scan of the list.
pub(super) fn find_parts(parts: &[&str]) -> Option<&'static HostRun> {
    /// The list's indices by literal leaf, and those of the glob names.
    type ByLeaf = (HashMap<&'static str, Vec<usize>>, Vec<usize>);
    static BY_LEAF: OnceLock<ByLeaf> = OnceLock::new();
    let (literal, globs) = BY_LEAF.get_or_init(|| {
        let mut literal: HashMap<&'static str, Vec<usize>> = HashMap::new();
        let mut globs = Vec::new();
        for (i, h) in HOST_RUN.iter().enumerate() {
            if h.leaf().contains('*') {
                globs.push(i);
            } else {
                literal.entry(h.leaf()).or_default().push(i);
            }
        }
        (literal, globs)
    });
    let leaf = parts.last()?;
    let named = literal.get(leaf).map(Vec::as_slice).unwrap_or_default();
    // The list's order decides between two that match.
    named
        .iter()
        .chain(globs)
        .filter(|&&i| HOST_RUN[i].is_at(parts))
        .min()
        .map(|&i| &HOST_RUN[i])
}

/// Whether a file or directory named `name` found below the working
/// directory may be an entry looked for at any depth (for a two-component
/// entry, the folder above decides: `find`).
pub fn is_nested_name(name: &str) -> bool {
    HOST_RUN.iter().any(|h| h.depth == Depth::Any && glob(h.leaf(), name))
}

/// What names the start's search looks for, as a key for an index of it
/// kept from one run to the next: a binary with another list never takes
/// an index made for this one.
pub fn search_key() -> String {
    let leaves: Vec<&str> = HOST_RUN.iter().map(|h| h.leaf()).collect();
    format!("env-files+host-run {} HEAD,pyvenv.cfg", leaves.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_short_paths_and_unique() {
        for (i, h) in HOST_RUN.iter().enumerate() {
            let parts: Vec<&str> = h.name.split('/').collect();
            assert!(parts.len() <= 2 && parts.iter().all(|p| !p.is_empty()), "{}", h.name);
            // Globs only in the last component, and never for an entry a
            // placeholder stands in for or one only at the top (the
            // protected pass takes those by their literal path).
            assert!(parts[..parts.len() - 1].iter().all(|p| !p.contains('*')), "{}", h.name);
            if h.name.contains('*') {
                assert_eq!((h.depth, h.missing), (Depth::Any, Missing::Nothing), "{}", h.name);
            }
            assert!(!h.runs.is_empty());
            assert!(!HOST_RUN[..i].iter().any(|o| o.name == h.name), "{} twice", h.name);
            // A placeholder file is never made outside a home, and never for
            // a directory.
            if h.missing == Missing::EmptyFileInHome {
                assert_eq!(h.shape, Shape::File, "{}", h.name);
            }
            if h.missing == Missing::EmptyDir {
                assert_ne!(h.shape, Shape::File, "{}", h.name);
            }
        }
        assert!(is_nested_name(".git") && is_nested_name(".claude") && is_nested_name(".envrc"));
    }

    #[test]
    fn find_by_path_glob_and_folder() {
        let name = |rel: &str| find(rel).map(|h| h.name);
        assert_eq!(name("sub/.claude"), Some(".claude"));
        assert_eq!(name("mise.dev.local.toml"), Some("mise.*.toml"));
        assert_eq!(name("a/.config/mise"), Some(".config/mise"));
        assert_eq!(name("a/.config/mise.toml"), Some("mise.toml"));
        assert_eq!(name(".config/mise.ci.local.toml"), Some("mise.*.toml"));
        assert_eq!(name("a/mise.toml"), Some("mise.toml"));
        assert_eq!(name("a/.git"), Some(".git"));
        assert_eq!(name("a/mise/config.toml"), Some("mise/config.toml"));
        assert_eq!(name("lefthook-local.yml"), Some("lefthook-local.*"));
        // Not the folder the tool reads it in, or not at the top.
        assert_eq!(name("mise"), None);
        assert_eq!(name("src/config.toml"), None);
        assert_eq!(name("sub/.bashrc"), None);
        assert_eq!(name(".bashrc"), Some(".bashrc"));
        assert!(is_nested_name("mise") && is_nested_name("mise.ci.toml") && !is_nested_name("src"));
    }
}
