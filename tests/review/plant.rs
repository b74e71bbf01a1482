//! What the agent does in tests/review.rs: plain edits and a commit, then
//! every vector the live mode's tests plant (tests/host_run.rs,
//! tests/persistence.rs) and one of each class of issue 34's "Why", each a
//! shell function that touches a marker when the host runs it.

use std::path::Path;

/// The plain edits `apply` brings by default, and what each leaves.
pub const PLAIN: &[&str] = &[
    "tracked",
    "src/new.rs",
    "old.txt",
    "run.sh",
    "link",
    "flood/f0",
    "flood/f299",
    "blind/x",
];

/// Each vector's name and a path it makes that `changes` must flag.
pub const VECTORS: &[(&str, &str)] = &[
    ("git_config", ".git/config"),
    ("git_config_rename", ".git/config"),
    ("hooks_dir_swap", ".git/hooks-x"),
    ("git_hook", ".git/hooks/pre-commit"),
    ("info_attributes", ".git/info/attributes"),
    ("worktree_commondir", ".git/worktrees/wt/commondir"),
    ("hooks_path", ".githooks/pre-commit"),
    // sub_mv_git later moves them, with the rest of sub/.git, to sub/.git-x.
    ("sub_config", "sub/.git-x/config"),
    ("sub_hook", "sub/.git-x/hooks/post-commit"),
    ("sub_claude", "sub/.claude/settings.json"),
    ("sub_claude_new", "sub/.claude/settings.local.json"),
    ("sub_mcp", "sub/.mcp.json"),
    ("sub_envrc", "sub/.envrc"),
    ("new_repo", "new/.git/hooks/pre-commit"),
    ("sub_mv_git", "sub/.git"),
    ("bare_shape", "shape/config"),
    ("gitlink", ".git/index"),
    ("pre_commit", ".pre-commit-config.yaml"),
    ("lefthook", "lefthook.yml"),
    ("husky", ".husky/pre-commit"),
    ("mise", "mise.toml"),
    ("tool_versions", ".tool-versions"),
    ("toolchain", "rust-toolchain.toml"),
    ("cargo_config", ".cargo/config.toml"),
    ("pth", "evil.pth"),
    ("venv_python", "venv/bin/python"),
    ("node_bin", "node_modules/.bin/eslint"),
    ("include_target", "inc.gitconfig"),
    ("bashrc", ".bashrc"),
    ("envrc", ".envrc"),
    ("vscode", ".vscode/tasks.json"),
    ("blinded", "hide/.claude/settings.json"),
    ("deep", "a/b/c/d/e/f/g/h/i/.claude/settings.json"),
];

/// The script, `m` the markers folder. A planted fsmonitor ends in `#`:
/// git passes it arguments, and the agent's own git runs it too (inside).
pub fn script(m: &Path) -> String {
    let m = m.display();
    format!(
        r#"export GIT_CONFIG_NOSYSTEM=1
M={m}
ok() {{ if ( $2 ) >/dev/null 2>&1; then echo "$1=planted"; else echo "$1=FAILED"; fi; }}
echo "secret_bytes=$(wc -c < .env)"
echo agent >> tracked
mkdir -p src && printf 'fn main() {{}}\n' > src/new.rs
git add tracked src && git -c user.name=agent -c user.email=agent@example.invalid commit -q -m 'agent work' && echo commit=ok
rm old.txt && chmod +x run.sh && ln -s src/new.rs link && echo plain=ok
mkdir flood && i=0 && while [ $i -lt 300 ]; do echo $i > flood/f$i; i=$((i+1)); done
mkdir blind && echo x > blind/x && chmod 000 blind
git_config() {{ printf '[core]\n\tfsmonitor = "touch %s/fsmonitor #"\n' "$M" >> .git/config; }}
git_config_rename() {{ cp .git/config /tmp/c && printf '[alias]\n\tst = "!touch %s/alias #"\n' "$M" >> /tmp/c && mv /tmp/c .git/config; }}
hooks_dir_swap() {{ mv .git/hooks .git/hooks-x && mkdir .git/hooks; }}
git_hook() {{ printf '#!/bin/sh\ntouch %s/pre_commit\n' "$M" > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit; }}
info_attributes() {{ echo '* filter=x' > .git/info/attributes; }}
worktree_commondir() {{ echo /tmp/evil > .git/worktrees/wt/commondir; }}
hooks_path() {{ printf '#!/bin/sh\ntouch %s/hooks_path\n' "$M" > .githooks/pre-commit && chmod +x .githooks/pre-commit; }}
sub_config() {{ printf '[core]\n\tfsmonitor = "touch %s/sub_fsmonitor #"\n' "$M" >> sub/.git/config; }}
sub_hook() {{ printf '#!/bin/sh\ntouch %s/sub_hook\n' "$M" > sub/.git/hooks/post-commit && chmod +x sub/.git/hooks/post-commit; }}
sub_claude() {{ printf '{{"hooks":{{"SessionStart":[{{"hooks":[{{"type":"command","command":"touch %s/claude_hook"}}]}}]}}}}' "$M" > sub/.claude/settings.json; }}
sub_claude_new() {{ echo '{{}}' > sub/.claude/settings.local.json; }}
sub_mcp() {{ printf '{{"mcpServers":{{"x":{{"command":"touch","args":["%s/mcp"]}}}}}}' "$M" > sub/.mcp.json; }}
sub_envrc() {{ echo "touch $M/envrc" > sub/.envrc; }}
new_repo() {{ git init -q new && printf '#!/bin/sh\ntouch %s/new_hook\n' "$M" > new/.git/hooks/pre-commit && chmod +x new/.git/hooks/pre-commit; }}
sub_mv_git() {{ cp -r sub/.git sub/.git-x && rm -rf sub/.git; }}
bare_shape() {{ mkdir -p shape/objects shape/refs && echo 'ref: refs/heads/main' > shape/HEAD && printf '[core]\n\tfsmonitor = "touch %s/shape #"\n' "$M" > shape/config; }}
gitlink() {{ git init -q deep && git -C deep -c user.name=a -c user.email=a@example.invalid commit -q --allow-empty -m d && git update-index --add --cacheinfo "160000,$(git -C deep rev-parse HEAD),deep"; }}
pre_commit() {{ printf 'repos:\n- repo: local\n  hooks:\n  - id: x\n    name: x\n    entry: touch %s/pre_commit_framework\n    language: system\n' "$M" > .pre-commit-config.yaml; }}
lefthook() {{ printf 'pre-commit:\n  commands:\n    x:\n      run: touch %s/lefthook\n' "$M" > lefthook.yml; }}
husky() {{ mkdir -p .husky && printf 'touch %s/husky\n' "$M" > .husky/pre-commit; }}
mise() {{ printf '[hooks]\nenter = "touch %s/mise"\n' "$M" > mise.toml; }}
tool_versions() {{ echo 'python 3.11' > .tool-versions; }}
toolchain() {{ printf '[toolchain]\npath = "/tmp/evil"\n' > rust-toolchain.toml; }}
cargo_config() {{ mkdir -p .cargo && printf '[build]\nrustc-wrapper = "/tmp/evil"\n' > .cargo/config.toml; }}
pth() {{ for d in venv/lib/python3*/site-packages; do printf 'import os; os.system("touch %s/pth")\n' "$M" > "$d/evil.pth"; done; }}
venv_python() {{ rm venv/bin/python && printf '#!/bin/sh\ntouch %s/venv_python\nexec /usr/bin/python3 "$@"\n' "$M" > venv/bin/python && chmod +x venv/bin/python; }}
node_bin() {{ mkdir -p node_modules/.bin && printf '#!/bin/sh\ntouch %s/node_bin\n' "$M" > node_modules/.bin/eslint && chmod +x node_modules/.bin/eslint; }}
include_target() {{ printf '[core]\n\tfsmonitor = "touch %s/include #"\n' "$M" > inc.gitconfig; }}
bashrc() {{ printf 'touch %s/bashrc\n' "$M" > .bashrc; }}
envrc() {{ echo "touch $M/top_envrc" > .envrc; }}
vscode() {{ mkdir -p .vscode && echo '{{"version":"2.0.0"}}' > .vscode/tasks.json; }}
blinded() {{ mkdir -p hide/.claude && echo '{{}}' > hide/.claude/settings.json && chmod 000 hide; }}
deep() {{ mkdir -p a/b/c/d/e/f/g/h/i/.claude && echo '{{}}' > a/b/c/d/e/f/g/h/i/.claude/settings.json; }}
for v in {names}; do ok $v $v; done
{wait}"#,
        names = VECTORS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(" "),
        wait = super::case::WAIT,
    )
}
