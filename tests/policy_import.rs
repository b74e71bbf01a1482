//! `claude-shim policy import` end to end: a project's and a user's Claude
//! Code settings (found by themselves, in Claude Code's order) become a
//! policy that the real binary compiles and runs; what the settings hide is
//! hidden inside, what they deny writing is read-only, and the settings it
//! cannot express are named. The translation itself is unit-tested on the
//! fixtures in tests/fixtures/import (shim/src/claude/import/tests.rs).

use std::path::Path;
use std::process::Stdio;

use claude_shim_e2e::*;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn imported_settings_compile_and_confine() {
    let env = Env::new();
    let dir = tempfile::Builder::new()
        .prefix("claude-shim-import-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let (home, proj) = (dir.path().join("home"), dir.path().join("proj"));
    let fixture = workspace().join("tests/fixtures/import/settings.json");
    write(
        &proj.join(".claude/settings.json"),
        &std::fs::read_to_string(fixture).unwrap(),
    );
    write(
        &home.join(".claude/settings.json"),
        r#"{"permissions": {"deny": ["Read(~/notes/**)"]}, "sandbox": {"filesystem": {"denyRead": ["/tmp-free/nothing"]}}, "theme": "dark"}"#,
    );
    write(&home.join(".config/secret-tool/token"), "SECRET-TOKEN\n");
    write(&home.join("notes/plan.txt"), "NOTE-TEXT\n");
    write(&proj.join("private/key"), "PRIVATE-KEY\n");
    write(&proj.join("config/prod.yml"), "prod: true\n");
    write(&proj.join(".github/workflows/ci.yml"), "on: push\n");

    let mut import = env.command(&["policy", "import"]);
    import
        .current_dir(&proj)
        .env("HOME", &home)
        .env_remove("CLAUDE_CONFIG_DIR");
    let out = output_of(import, dir.path());
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "policy import failed: {stderr}");
    // Both files, project before user; what has no equivalent is named.
    let proj_at = stdout.find(".claude/settings.json (project settings)").expect(&stdout);
    let user_at = stdout.find(".claude/settings.json (user settings)").expect(&stdout);
    assert!(proj_at < user_at, "{stdout}");
    for needle in [
        "sandbox.sandboxMode: unknown key",
        "excludedCommands",
        "theme: Claude Code's own settings",
    ] {
        assert!(stderr.contains(needle), "{needle:?} not on stderr: {stderr}");
        assert!(
            stdout.contains(needle),
            "{needle:?} not in the policy's comments: {stdout}"
        );
    }
    let policy = dir.path().join("imported.toml");
    std::fs::write(&policy, &stdout).unwrap();

    // The compiler takes it: a bundle, with the imported lists in it.
    let bundle = dir.path().join("bundle");
    let mut b = env.command(&[
        "bundle",
        "--policy",
        policy.to_str().unwrap(),
        "--workdir",
        proj.to_str().unwrap(),
        "--out",
        bundle.to_str().unwrap(),
    ]);
    b.env("HOME", &home);
    let out = output_of(b, dir.path());
    assert!(out.status.success(), "bundle: {}", text(&out.stderr));
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bundle.join("config.json")).unwrap()).unwrap();
    let ann = &config["annotations"];
    assert_eq!(ann["run.claude-shim.policy"], "imported");
    let net: serde_json::Value = serde_json::from_str(ann["run.claude-shim.network.policy"].as_str().unwrap()).unwrap();
    assert_eq!(
        net["allow"],
        serde_json::json!(["*.npmjs.org", "docs.rs", "github.com", "pypi.org:443"])
    );
    assert_eq!(net["deny"], serde_json::json!(["evil.example", "gist.github.com"]));

    // And runs it: hidden reads as empty, denied writes fail, the rest of the project is writable.
    let script = r#"
echo "token=$(cat "$HOME/.config/secret-tool/token" 2>/dev/null | wc -c)"
echo "note=$(cat "$HOME/notes/plan.txt" 2>/dev/null | wc -c)"
echo "key=$(cat private/key 2>/dev/null | wc -c)"
if ( echo x > config/prod.yml ) 2>/dev/null; then echo prod=writable; else echo prod=refused; fi
if ( echo x > .github/workflows/ci.yml ) 2>/dev/null; then echo ci=writable; else echo ci=refused; fi
if ( echo x > src.txt ) 2>/dev/null; then echo src=writable; else echo src=refused; fi
"#;
    let mut run = env.command(&[
        "sandbox",
        "--policy",
        policy.to_str().unwrap(),
        "--workdir",
        proj.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        script,
    ]);
    run.env("HOME", &home).stdin(Stdio::null());
    let out = output_of(run, dir.path());
    let got = text(&out.stdout);
    assert!(out.status.success(), "sandbox: {got}{}", text(&out.stderr));
    for line in [
        "token=0",
        "note=0",
        "key=0",
        "prod=refused",
        "ci=refused",
        "src=writable",
    ] {
        assert!(got.lines().any(|l| l == line), "{line:?} not in:\n{got}");
    }
    assert_eq!(
        std::fs::read_to_string(proj.join("config/prod.yml")).unwrap(),
        "prod: true\n"
    );
}

#[test]
fn import_names_what_it_cannot_read() {
    let env = Env::new();
    let dir = tempfile::tempdir().unwrap();
    let srt = dir.path().join("srt.json");
    std::fs::write(
        &srt,
        r#"{"network": {"allowedDomains": ["github.com"]}, "filesystem": {}, "proxyMode": 1}"#,
    )
    .unwrap();
    let out = env.run(&["policy", "import", srt.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("proxyMode: unknown key"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("allow = [\"github.com\"]"),
        "{}",
        text(&out.stdout)
    );

    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{ not json").unwrap();
    let out = env.run(&["policy", "import", bad.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("bad.json") && err.lines().count() == 1, "{err}");
    assert!(out.stdout.is_empty());
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
