use std::path::PathBuf;

use super::values::*;
use super::*;

fn parse(text: &str) -> Result<Policy, PolicyError> {
    Policy::from_toml_str(text, "specs/policies/x.toml")
}

/// The error of a policy made of `version = 1` and `body`, checked to be one line.
fn error(body: &str) -> String {
    let text = format!("version = 1\n{body}\n");
    let e = parse(&text).expect_err(body).to_string();
    assert!(!e.contains('\n'), "not one line: {e:?}");
    assert!(e.starts_with("use policy specs/policies/x.toml: "), "{e}");
    e
}

fn assert_error(body: &str, want: &str) {
    let e = error(body);
    assert!(e.contains(want), "for {body:?}\n  got:  {e}\n  want: {want}");
}

#[test]
fn shipped_policies_parse() {
    let agent = Policy::embedded_default();
    assert_eq!(agent.name(), "agent");
    assert_eq!(agent.network.mode, NetworkMode::Allowlist);
    assert!(agent.network.allow.iter().any(|h| h.0 == "api.anthropic.com"));
    assert!(agent.opt_outs().is_empty(), "{:?}", agent.opt_outs());
    assert_eq!(agent.claude.server_tools, [ServerTool::WebSearch]);
    let offline = Policy::embedded_offline();
    assert_eq!(offline.name(), "offline");
    assert_eq!(offline.network.mode, NetworkMode::None);
    assert!(offline.filesystem.writable.is_empty());
    assert!(offline.resources.memory.unwrap().0 < agent.resources.memory.unwrap().0);
    assert!(offline.resources.pids.unwrap().0 < agent.resources.pids.unwrap().0);
    assert!(offline.opt_outs().is_empty());
    assert!(offline.claude.server_tools.is_empty());
}

#[test]
fn the_shipped_files_on_disk_are_the_embedded_ones() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../specs/policies/");
    assert_eq!(std::fs::read_to_string(format!("{dir}agent.toml")).unwrap(), AGENT_TOML);
    assert_eq!(
        std::fs::read_to_string(format!("{dir}offline.toml")).unwrap(),
        OFFLINE_TOML
    );
}

#[test]
fn a_minimal_policy_takes_the_strict_defaults() {
    let p = parse("version = 1").unwrap();
    assert_eq!(p.name(), "custom");
    assert_eq!(p.filesystem.root, RootSource::Host);
    assert_eq!(p.filesystem.workdir, Access::Rw);
    assert!(p.filesystem.writable.is_empty());
    assert!(p.filesystem.hide_env_files);
    assert_eq!(p.filesystem.protected_paths().len(), builtin_protected().len());
    assert_eq!(p.filesystem.hidden_paths().len(), BUILTIN_HIDDEN.len());
    assert!(p.environment.allow.is_empty());
    assert_eq!(p.identity.user_namespace, UserNamespace::Auto);
    assert!(p.identity.capabilities.is_empty());
    assert!(p.identity.no_new_privileges);
    assert_eq!(p.seccomp.profile, ProfileRef::Agent);
    assert!(p.seccomp.allow.is_empty());
    assert_eq!(p.network.mode, NetworkMode::None);
    assert!(!p.resources.best_effort);
    assert!(p.claude.server_tools.is_empty());
    assert!(p.opt_outs().is_empty());
}

#[test]
fn version_is_required_and_must_be_1() {
    let e = parse("name = \"x\"").unwrap_err().to_string();
    assert_eq!(
        e,
        "use policy specs/policies/x.toml: version: missing (write version = 1)"
    );
    let e = parse("version = 2").unwrap_err().to_string();
    assert_eq!(
        e,
        "use policy specs/policies/x.toml: version: unsupported version 2; this build reads version 1"
    );
    let e = parse("version = \"1\"").unwrap_err().to_string();
    assert!(
        e.starts_with("use policy specs/policies/x.toml: version: invalid type"),
        "{e}"
    );
}

#[test]
fn unknown_fields_are_named_with_their_path() {
    assert_error("colour = 1", "x.toml: colour: unknown field (expected one of");
    assert_error("[filesystem]\nwritabel = []", "filesystem.writabel: unknown field");
    assert_error("[network]\nmode = \"none\"\nproxy = 1", "network.proxy: unknown field");
    assert_error("[seccomp]\nprofiles = \"agent\"", "seccomp.profiles: unknown field");
    assert_error("[sandbox]\nx = 1", "sandbox: unknown field");
}

#[test]
fn wrong_types_are_named_with_their_path() {
    assert_error("[filesystem]\nwritable = \"/x\"", "filesystem.writable: invalid type");
    assert_error(
        "[filesystem]\nhide_env_files = \"yes\"",
        "filesystem.hide_env_files: invalid type",
    );
    assert_error("[resources]\npids = \"many\"", "resources.pids: invalid type");
    assert_error(
        "[filesystem]\nwritable = [\"/a\", 3]",
        "filesystem.writable[1]: invalid type",
    );
    assert_error(
        "[identity]\nuser_namespace = \"sometimes\"",
        "identity.user_namespace: unknown variant `sometimes`",
    );
    assert_error("[network]\nmode = \"open\"", "network.mode: unknown variant `open`");
    assert_error("[filesystem]\nworkdir = \"rwx\"", "filesystem.workdir: unknown variant");
}

#[test]
fn bad_values_are_named_with_their_path() {
    assert_error(
        "[seccomp]\nallow = [\"ptrace\", \"mountt\"]",
        "seccomp.allow[1]: unknown syscall \"mountt\"",
    );
    assert_error(
        "[network]\nmode = \"allowlist\"\nallow = [\"github.com\", \"*.com\"]",
        "network.allow[1]: \"*.com\": a wildcard over a whole top-level domain is too broad",
    );
    assert_error(
        "[network]\nmode = \"allowlist\"\ndeny = [\"a.*.b\"]",
        "network.deny[0]:",
    );
    assert_error(
        "[network]\nmode = \"allowlist\"\nallow = [\"x.org:70000\"]",
        "network.allow[0]: \"x.org:70000\": port",
    );
    assert_error(
        "[network]\nmode = \"public\"\nallow_cidrs = [\"10.0.0.1/8\"]",
        "network.allow_cidrs[0]:",
    );
    assert_error(
        "[filesystem]\nwritable = [\"data\"]",
        "filesystem.writable[0]: \"data\" is relative",
    );
    assert_error("[filesystem]\nreadonly = [\"/a/../b\"]", "filesystem.readonly[0]:");
    assert_error(
        "[filesystem]\nroot = \"rootfs\"",
        "filesystem.root: \"rootfs\" is relative",
    );
    assert_error(
        "[filesystem]\nmasked = [\"run/x\"]",
        "filesystem.masked[0]: \"run/x\" is relative",
    );
    assert_error(
        "[filesystem]\nprotected = [\"/etc/passwd\"]",
        "filesystem.protected[0]:",
    );
    assert_error("[filesystem]\nhidden = [\"?~/.x\"]", "filesystem.hidden[0]:");
    assert_error("[seccomp]\nprofile = \"./p.json\"", "seccomp.profile:");
    assert_error(
        "[identity]\ncapabilities = [\"CAP_SYS_ADMIN\", \"CAP_FLY\"]",
        "identity.capabilities[1]: unknown capability",
    );
    assert_error("[resources]\nmemory = \"4 parsecs\"", "resources.memory:");
    assert_error(
        "[resources]\nmemory = 1024",
        "resources.memory: 1024 bytes is below 16MiB",
    );
    assert_error("[resources]\ncpus = 0", "resources.cpus:");
    assert_error("[resources]\npids = -1", "resources.pids: -1 must be positive");
    assert_error(
        "[resources]\nrlimits = { files = 10 }",
        "resources.rlimits.files: unknown rlimit",
    );
    assert_error("[environment]\nallow = [\"A-B\"]", "environment.allow[0]:");
    assert_error("[environment]\nset = { \"1X\" = \"y\" }", "environment.set");
    assert_error("name = \"has space\"", "name:");
}

#[test]
fn unknown_server_tools_are_named() {
    assert_error(
        "[claude]\nserver_tools = [\"web_search\", \"web_browse\"]",
        "claude.server_tools[1]: unknown server tool \"web_browse\" (known: web_search, web_fetch, code_execution, mcp, files, tool_search)",
    );
    assert_error("[claude]\nallow = []", "claude");
}

#[test]
fn cross_field_errors_are_named() {
    assert_error(
        "[network]\nallow = [\"github.com\"]",
        "network.allow: has no effect with mode = \"none\"",
    );
    assert_error(
        "[network]\nmode = \"allowlist\"\nallow_cidrs = [\"10.0.0.5/32:443\"]",
        "network.allow_cidrs: is only used with mode = \"public\"",
    );
    assert_error(
        "[network]\nmode = \"public\"\nallow = [\"github.com\"]",
        "network.allow: host names are filtered only",
    );
    assert_error(
        "[network]\npublish = [\"8080:3000\", \"8080\"]",
        "network.publish[1]: host port 8080 is published twice",
    );
    assert_error("[network]\npublish = [\"0\"]", "network.publish[0]:");
    assert_error(
        "[filesystem]\nunprotected = [\"src/\"]",
        "filesystem.unprotected[0]: src/ is not a built-in protected path",
    );
    assert_error(
        "[filesystem]\nunhidden = [\"~/.bashrc\"]",
        "filesystem.unhidden[0]: ~/.bashrc is not a built-in hidden path",
    );
    assert_error(
        "[filesystem]\nwritable = [\"~/.ssh\"]",
        "filesystem.writable[0]: ~/.ssh is a hidden path",
    );
    assert_error(
        "[filesystem]\nwritable = [\"~/.aws/cli\"]",
        "filesystem.writable[0]: ~/.aws/cli is a hidden path or lies under one",
    );
    assert_error(
        "[filesystem]\nwritable = [\"/proc/sys\"]",
        "filesystem.writable[0]: /proc/sys: /proc comes from the kernel",
    );
    assert_error(
        "[filesystem]\nwritable = [\"/\"]",
        "filesystem.writable[0]: \"/\" cannot be bound",
    );
    assert_error(
        "[filesystem]\nwritable = [\"/a\"]\nreadonly = [\"/a\"]",
        "filesystem.readonly[0]: /a is already listed in filesystem.writable[0]",
    );
    assert_error(
        "[filesystem]\nmasked = [\"/sys/kernel\"]",
        "filesystem.masked[0]: /sys/kernel cannot be masked",
    );
    assert_error(
        "[environment]\npass_secrets = [\"EDITOR\"]",
        "environment.pass_secrets[0]: EDITOR is not a secret name",
    );
    assert_error(
        "[environment]\nset = { IS_SANDBOX = \"0\" }",
        "environment.set.IS_SANDBOX: IS_SANDBOX is always 1",
    );
    assert_error(
        "[environment]\nset = { HTTPS_PROXY = \"http://evil\" }\n[network]\nmode = \"allowlist\"",
        "environment.set.HTTPS_PROXY: the proxy variables are set",
    );
    assert_error(
        "[environment]\nset = { EDITOR = \"vi\\u0000x\" }",
        "environment.set.EDITOR: the value holds a NUL byte",
    );
    assert_error(
        "[filesystem]\nwritable = [\"/a\\u0000b\"]",
        "filesystem.writable[0]: \"/a\\0b\" holds a NUL byte",
    );
    assert_error(
        "[seccomp]\nallow = [\"ptrace\", \"ptrace\"]",
        "seccomp.allow[1]: \"ptrace\" is listed twice",
    );
}

#[test]
fn syntax_errors_give_the_line() {
    let e = parse("version = 1\n[filesystem\nroot = \"host\"\n").unwrap_err();
    assert!(matches!(e, PolicyError::Syntax { line: 2, .. }), "{e:?}");
    let s = e.to_string();
    assert!(
        s.starts_with("use policy specs/policies/x.toml: line 2: ") && !s.contains('\n'),
        "{s}"
    );
    let e = parse("version = 1\nversion = 1\n").unwrap_err().to_string();
    assert!(e.contains("line 2") && !e.contains('\n'), "{e}");
}

#[test]
fn lists_extend_the_built_ins_and_removals_are_opt_outs() {
    let p = parse(
        "version = 1\n[filesystem]\nprotected = [\"Makefile\", \".claude/\"]\nunprotected = [\".vscode/\"]\n\
         hidden = [\"~/.config/secret\"]\nunhidden = [\"~/.kube\"]\nmasked = [\"/var/lib/secrets\"]\n",
    )
    .unwrap();
    let prot: Vec<String> = p.filesystem.protected_paths().iter().map(|w| w.to_string()).collect();
    assert!(prot.contains(&"Makefile".to_owned()));
    assert!(!prot.contains(&".vscode/".to_owned()));
    assert_eq!(prot.iter().filter(|p| *p == ".claude/").count(), 1);
    let hidden: Vec<String> = p.filesystem.hidden_paths().iter().map(|h| h.to_string()).collect();
    assert!(hidden.contains(&"~/.config/secret".to_owned()));
    assert!(!hidden.contains(&"~/.kube".to_owned()));
    assert!(p.filesystem.masked_paths().contains(&PathBuf::from("/var/lib/secrets")));
    assert_eq!(
        p.opt_outs(),
        vec!["filesystem.unprotected: .vscode/", "filesystem.unhidden: ~/.kube"]
    );
}

#[test]
fn every_loosening_is_an_opt_out() {
    let p = parse(
        r#"version = 1
[filesystem]
writable = ["?~/.cache"]
hide_env_files = false
[environment]
pass_secrets = ["GH_TOKEN"]
[identity]
capabilities = ["CAP_NET_RAW"]
no_new_privileges = false
[resources]
best_effort = true
[seccomp]
profile = "/etc/claude-shim/loose.json"
allow = ["ptrace"]
[network]
mode = "public"
allow_cidrs = ["10.0.0.5/32:443"]
[claude]
server_tools = ["web_search", "web_fetch", "mcp"]
"#,
    )
    .unwrap();
    assert_eq!(
        p.opt_outs(),
        vec![
            "filesystem.writable: ~/.cache",
            "filesystem.hide_env_files = false",
            "environment.pass_secrets: GH_TOKEN",
            "identity.capabilities: CAP_NET_RAW",
            "identity.no_new_privileges = false",
            "resources.best_effort = true",
            "seccomp.profile: /etc/claude-shim/loose.json (not the built-in agent profile)",
            "seccomp.allow: ptrace",
            "network.mode = public",
            "network.allow_cidrs: 10.0.0.5/32:443",
            "claude.server_tools: web_fetch",
            "claude.server_tools: mcp",
        ]
    );
}

/// Thousands of paths are checked by lookups, not by scanning every other
/// entry (8,000 took 6.3 s before the error): the answers are the same.
#[test]
fn long_path_lists_are_checked_entry_by_entry() {
    let n = 8000;
    let list = |prefix: &str| {
        (0..n)
            .map(|i| format!("\"{prefix}/d{i}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    // All distinct, none hidden: accepted.
    let ok = format!(
        "version = 1\n[filesystem]\nwritable = [{}]\nreadonly = [{}]\nhidden = [{}]\n",
        list("/w"),
        list("/r"),
        list("/h")
    );
    let p = parse(&ok).unwrap();
    assert_eq!(p.filesystem.writable.len(), n);
    // The last bind repeats the first: named with both places.
    let dup = format!(
        "[filesystem]\nwritable = [{}]\nreadonly = [{}, \"/w/d0\"]",
        list("/w"),
        list("/r")
    );
    assert_error(
        &dup,
        &format!("filesystem.readonly[{n}]: /w/d0 is already listed in filesystem.writable[0]"),
    );
    // The last bind lies under the last of 8,000 hidden paths.
    let hidden = format!(
        "[filesystem]\nhidden = [{}]\nwritable = [{}, \"/h/d{}/x/y\"]",
        list("/h"),
        list("/w"),
        n - 1
    );
    assert_error(
        &hidden,
        &format!(
            "filesystem.writable[{n}]: /h/d{}/x/y is a hidden path or lies under one (/h/d{})",
            n - 1,
            n - 1
        ),
    );
    // A repeated socket, and a repeated syscall, among thousands.
    let sockets = (0..n)
        .map(|i| format!("\"/s/{i}.sock\""))
        .collect::<Vec<_>>()
        .join(", ");
    assert_error(
        &format!("[filesystem]\nunix_sockets = [{sockets}, \"/s/7.sock\"]"),
        &format!("filesystem.unix_sockets[{n}]: /s/7.sock is listed twice"),
    );
}
