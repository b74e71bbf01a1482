//! The Debian package (`hack/install --deb DIR`, issue 26): built from the
//! test binary, installed with `dpkg -i`, it puts claude-shim on PATH with its
//! man pages, and its postinst registers the runtime with the machine's
//! engines as hack/install does; `dpkg -r` takes the registration out, so
//! every engine file is as before. A guard purges the package even when an
//! assertion fails, since other test files run after.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use claude_shim_e2e::engine_files::{assert_doctor_sees_registrations, assert_man_page, changed, snapshot};
use claude_shim_e2e::engines::text;
use claude_shim_e2e::{require_root, shim_path, workspace};

const PACKAGE: &str = "claude-shim";
const BIN: &str = "/usr/bin/claude-shim";

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn installed() -> bool {
    let out = run("dpkg-query", &["-W", "-f", "${Status}", PACKAGE]);
    text(&out.stdout).contains("install ok installed")
}

/// Purges the package on drop unless the test removed it.
struct Package {
    removed: bool,
}

impl Drop for Package {
    fn drop(&mut self) {
        if !self.removed {
            let out = run("dpkg", &["--purge", PACKAGE]);
            eprintln!(
                "dpkg --purge (after a failure): {}{}",
                text(&out.stdout),
                text(&out.stderr)
            );
        }
    }
}

#[test]
fn dpkg_installs_registers_and_removes_without_a_trace() {
    require_root();
    assert!(!installed(), "the package {PACKAGE} is installed before the test");
    assert!(!Path::new(BIN).exists(), "{BIN} exists before the test");
    let dir = tempfile::Builder::new().prefix("claude-shim-deb-").tempdir().unwrap();
    let out = Command::new(workspace().join("hack/install"))
        .arg("--deb")
        .arg(dir.path())
        .env("CLAUDE_SHIM", shim_path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "hack/install --deb: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let version = text(&run(&shim_path().to_string_lossy(), &["--version"]).stdout);
    let version = version.split_whitespace().nth(2).unwrap_or_default().to_owned();
    let deb = dir.path().join(format!("claude-shim_{version}_amd64.deb"));
    assert!(
        deb.is_file(),
        "no {} (version from claude-shim --version)",
        deb.display()
    );

    let before = snapshot();
    let mut package = Package { removed: false };
    let out = run("dpkg", &["-i", deb.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "dpkg -i: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(installed(), "dpkg-query does not show {PACKAGE} installed");

    // The packaged binary's doctor sees the registrations the postinst made.
    let doctor = assert_doctor_sees_registrations(BIN);
    assert_eq!(
        doctor.status.code(),
        Some(0),
        "claude-shim doctor:\n{}{}",
        text(&doctor.stdout),
        text(&doctor.stderr)
    );

    assert_man_page(None);
    let bash = Command::new("bash")
        .arg("-c")
        .arg(
            "source /usr/share/bash-completion/completions/claude-shim; COMP_WORDS=(claude-shim sa); \
             COMP_CWORD=1; COMP_LINE='claude-shim sa'; COMP_POINT=14; \
             _claude__shim claude-shim sa claude-shim; printf '%s\\n' \"${COMPREPLY[@]}\"",
        )
        .output()
        .unwrap();
    assert_eq!(
        text(&bash.stdout),
        "sandbox\n",
        "bash completion: {}",
        text(&bash.stderr)
    );

    let out = run("dpkg", &["-r", PACKAGE]);
    package.removed = true;
    assert!(
        out.status.success(),
        "dpkg -r: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let changed = changed(&before, &snapshot());
    assert!(
        changed.is_empty(),
        "dpkg -r left these different from before: {changed:?}"
    );
    assert!(!Path::new(BIN).exists(), "dpkg -r left {BIN}");
    assert!(
        !Path::new("/var/lib/claude-shim/deb").exists(),
        "dpkg -r left the registration state"
    );
    let out = run("dpkg", &["--purge", PACKAGE]);
    assert!(out.status.success(), "dpkg --purge: {}", text(&out.stderr));
}
