//! The empty home and the host's unix sockets, from inside `claude-shim
//! sandbox`, as root and as the unprivileged test user: listeners this test
//! binds under a scratch home, /mnt, /opt, /srv and the project accept a
//! connection outside and refuse it inside; one the policy names connects;
//! a tool in a home directory the policy re-binds runs; a write to the home
//! stays in the sandbox. A sandbox started in the home itself keeps the
//! home's start-up files, XDG config and PATH directories read-only.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use claude_shim_e2e::*;

/// Connects to each path, one `path result` line each: `connected` or the
/// errno's name.
const CONNECT: &str = r#"
import errno, socket, sys
for p in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(p)
        print(p, "connected")
    except OSError as e:
        print(p, errno.errorcode.get(e.errno, e.errno))
"#;

/// Directories this test made in /mnt, /opt and /srv, removed when it ends,
/// and its listeners, open as long as it runs.
struct Scratch {
    dirs: Vec<PathBuf>,
    listeners: Vec<UnixListener>,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        self.listeners.clear();
        for d in &self.dirs {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

impl Scratch {
    fn new(name: &str) -> Self {
        let mut dirs = Vec::new();
        for top in ["/mnt", "/opt", "/srv"] {
            assert!(Path::new(top).is_dir(), "{top} is missing on this machine");
            let d = Path::new(top).join(format!("claude-shim-test-{}", unique_id(name)));
            std::fs::create_dir(&d).unwrap();
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
            dirs.push(d);
        }
        Self {
            dirs,
            listeners: Vec::new(),
        }
    }

    /// The scratch directory under `/mnt` (home, project, policy live there).
    fn mnt(&self) -> &Path {
        &self.dirs[0]
    }

    /// A listener at `path` that anyone may connect to (connect needs write
    /// permission on the socket).
    fn listen(&mut self, path: &Path) -> PathBuf {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let l = UnixListener::bind(path).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
        self.listeners.push(l);
        path.to_path_buf()
    }
}

fn chown_r(path: &Path, owner: Option<(u32, u32)>) {
    if let Some((uid, gid)) = owner {
        let ok = Command::new("chown")
            .args(["-R", &format!("{uid}:{gid}")])
            .arg(path)
            .status()
            .unwrap();
        assert!(ok.success());
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `path result` lines as a map.
fn results(out: &str) -> std::collections::HashMap<String, String> {
    out.lines()
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(p, r)| (p.to_owned(), r.to_owned()))
        .collect()
}

/// `python3 connect.py paths...` on the host as `owner`.
fn connect_on_host(owner: Option<(u32, u32)>, script: &Path, paths: &[PathBuf]) -> String {
    let mut c = command_as(owner, Path::new("/usr/bin/python3"));
    c.arg(script).args(paths);
    let out = c.output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

fn sandbox(env: &Env, home: &Path, workdir: &Path, policy: &Path, script: &str, path_env: &str) -> Output {
    let mut c = env.command(&[
        "sandbox",
        "--policy",
        policy.to_str().unwrap(),
        "--workdir",
        workdir.to_str().unwrap(),
        "--",
        "/bin/sh",
        "-c",
        script,
    ]);
    c.env("HOME", home).env("PATH", path_env);
    output_of(c, env.dir.path())
}

/// The shipped agent policy with `extra` added to its [filesystem] section.
fn agent_policy(dir: &Path, extra: &str) -> PathBuf {
    let text = std::fs::read_to_string(workspace().join("specs/policies/agent.toml")).unwrap();
    let text = text.replacen("unix_sockets = []", extra, 1);
    assert!(text.contains(extra));
    let path = dir.join("policy.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn unreachable_from_inside(owner: Option<(u32, u32)>) {
    let env = match owner {
        None => Env::new(),
        Some((u, g)) => Env::as_user(u, g),
    };
    let mut s = Scratch::new("sockets");
    let (mnt, opt, srv) = (s.dirs[0].clone(), s.dirs[1].clone(), s.dirs[2].clone());
    let home = mnt.join("home");
    let proj = mnt.join("proj");
    for d in [home.join(".local/bin"), proj.clone()] {
        std::fs::create_dir_all(d).unwrap();
    }
    let tool = home.join(".local/bin/claude-shim-test-tool");
    std::fs::write(&tool, "#!/bin/sh\necho tool-ran\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(home.join(".bashrc"), "# the host's\n").unwrap();
    let script = proj.join("connect.py");
    std::fs::write(&script, CONNECT).unwrap();
    let refused = [
        s.listen(&home.join(".docker/run/docker.sock")),
        s.listen(&home.join(".local/bin/agent.sock")),
        s.listen(&mnt.join("daemon.sock")),
        s.listen(&opt.join("app/daemon.sock")),
        s.listen(&srv.join("daemon.sock")),
        s.listen(&proj.join("sub/dev.sock")),
    ];
    let named = s.listen(&srv.join("allowed/ok.sock"));
    let policy = agent_policy(s.mnt(), &format!("unix_sockets = [\"{}\"]", named.display()));
    chown_r(&home, owner);
    chown_r(&proj, owner);

    // Control: each listener accepts this user outside.
    let mut all = refused.to_vec();
    all.push(named.clone());
    let outside = results(&connect_on_host(owner, &script, &all));
    for p in &all {
        assert_eq!(outside[p.to_str().unwrap()], "connected", "{} outside", p.display());
    }

    let inside_script = format!(
        "/usr/bin/python3 {} {}; \"$HOME/.local/bin/claude-shim-test-tool\"; \
         echo planted > \"$HOME/planted\" && echo home=writable; \
         echo home_rc=$(cat \"$HOME/.bashrc\" 2>/dev/null | wc -c)",
        script.display(),
        all.iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let out = sandbox(&env, &home, &proj, &policy, &inside_script, "/usr/bin:/bin");
    let stdout = text(&out.stdout);
    eprintln!("inside ({owner:?}):\n{stdout}");
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {}", text(&out.stderr));
    let inside = results(&stdout);
    for p in &refused {
        let r = inside.get(p.to_str().unwrap()).map(String::as_str);
        assert!(
            matches!(r, Some("ECONNREFUSED") | Some("ENOENT")),
            "{} from inside: {r:?}",
            p.display()
        );
    }
    // Behind the empty home: not there at all. Elsewhere: covered.
    assert_eq!(inside[home.join(".docker/run/docker.sock").to_str().unwrap()], "ENOENT");
    assert_eq!(inside[mnt.join("daemon.sock").to_str().unwrap()], "ECONNREFUSED");
    assert_eq!(inside[named.to_str().unwrap()], "connected", "the policy's socket");
    for want in ["tool-ran", "home=writable", "home_rc=0"] {
        assert!(stdout.lines().any(|l| l == want), "inside lacks {want}:\n{stdout}");
    }
    assert!(!home.join("planted").exists(), "a write to the empty home persists");
    assert!(
        proj.join("sub/dev.sock")
            .symlink_metadata()
            .unwrap()
            .file_type()
            .is_socket(),
        "the project's socket is still a socket"
    );
    drop(s);
}

#[test]
fn host_sockets_are_unreachable_as_root() {
    unreachable_from_inside(None);
}

#[test]
fn host_sockets_are_unreachable_as_an_unprivileged_user() {
    unreachable_from_inside(Some(test_user()));
}

fn home_as_workdir(owner: Option<(u32, u32)>) {
    let env = match owner {
        None => Env::new(),
        Some((u, g)) => Env::as_user(u, g),
    };
    let mut s = Scratch::new("homewd");
    let home = s.mnt().join("home");
    for d in [".config/git", ".local/share", "bin", "code"] {
        std::fs::create_dir_all(home.join(d)).unwrap();
    }
    std::fs::write(home.join(".bashrc"), "# the host's\n").unwrap();
    std::fs::write(home.join(".config/git/config"), "[user]\n").unwrap();
    let script = home.join("connect.py");
    std::fs::write(&script, CONNECT).unwrap();
    let sock = s.listen(&home.join(".docker/run/docker.sock"));
    let policy = agent_policy(s.mnt(), "unix_sockets = []");
    chown_r(&home, owner);
    let before = snapshot(&home);
    let path_env = format!("{}:/usr/bin:/bin", home.join("bin").display());
    let probe = format!(
        r#"w() {{ if ( : > "$1" ) 2>/dev/null; then echo "$2=writable"; else echo "$2=refused"; fi; }}
w "$HOME/.bashrc" bashrc
w "$HOME/.config/git/config" git_config
mkdir -p "$HOME/.config/autostart" 2>/dev/null; w "$HOME/.config/autostart/x.desktop" autostart
w "$HOME/.local/bin/git" local_bin
w "$HOME/.local/share/applications/x.desktop" applications
w "$HOME/bin/git" path_dir
w "$HOME/code/notes.txt" project_file
/usr/bin/python3 {} {}"#,
        script.display(),
        sock.display()
    );
    let out = sandbox(&env, &home, &home, &policy, &probe, &path_env);
    let stdout = text(&out.stdout);
    eprintln!("home as the working directory ({owner:?}):\n{stdout}");
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {}", text(&out.stderr));
    for want in [
        "bashrc=refused",
        "git_config=refused",
        "autostart=refused",
        "local_bin=refused",
        "applications=refused",
        "path_dir=refused",
        "project_file=writable",
    ] {
        assert!(stdout.lines().any(|l| l == want), "lacks {want}:\n{stdout}");
    }
    assert_eq!(results(&stdout)[sock.to_str().unwrap()], "ECONNREFUSED");
    // Only the project file is new; the placeholders are gone again.
    let mut after = snapshot(&home);
    // claude-shim's own state folders (the quarantine's, made at start) are
    // in the user's home, as XDG puts them; empty, as nothing was moved.
    let own = [
        ".local/state",
        ".local/state/claude-shim",
        ".local/state/claude-shim/quarantine",
    ]
    .map(|p| home.join(p));
    after.retain(|p| !p.starts_with(home.join("code/notes.txt")) && !own.contains(p));
    assert_eq!(before, after, "the home changed beyond the project file");
    drop(s);
}

/// Every path under `dir`, sorted (contents of regular files included).
fn snapshot(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let m = p.symlink_metadata().unwrap();
            if m.is_dir() {
                stack.push(p.clone());
            } else if m.is_file() {
                let body = std::fs::read(&p).unwrap();
                out.push(p.join(format!("#{}", String::from_utf8_lossy(&body))));
                continue;
            }
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn the_home_as_the_working_directory_as_root() {
    home_as_workdir(None);
}

#[test]
fn the_home_as_the_working_directory_as_an_unprivileged_user() {
    home_as_workdir(Some(test_user()));
}

/// `verify` has a row per listener of the census (connect refused) and one
/// for the empty home; a runtime that drops the covers fails the rows.
#[test]
fn verify_has_the_socket_and_home_rows() {
    let env = Env::new();
    let mut s = Scratch::new("verify");
    let (mnt, opt) = (s.dirs[0].clone(), s.dirs[1].clone());
    let (home, proj) = (mnt.join("home"), mnt.join("proj"));
    std::fs::create_dir_all(home.join(".local/bin")).unwrap();
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::write(home.join(".bashrc"), "# the host's\n").unwrap();
    let socks = [
        s.listen(&opt.join("daemon.sock")),
        s.listen(&home.join(".docker/run/docker.sock")),
    ];
    let run = |extra: &[&str]| {
        let mut args = vec!["verify", "--reach", "none", "--workdir", proj.to_str().unwrap()];
        args.extend_from_slice(extra);
        let mut c = env.command(&args);
        c.env("HOME", &home);
        let out = output_of(c, env.dir.path());
        (out.status.code(), text(&out.stdout))
    };
    let (code, stdout) = run(&[]);
    assert_eq!(code, Some(0), "{stdout}");
    let row = |name: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no row {name}:\n{stdout}"))
            .to_owned()
    };
    for sock in &socks {
        let r = row(&format!("socket {}", sock.display()));
        assert!(r.contains("PASS"), "{r}");
    }
    assert!(row(&format!("socket {}", socks[0].display())).contains("ECONNREFUSED"));
    let r = row(&format!("empty home {}", home.display()));
    assert!(r.contains("PASS") && r.contains(".local"), "{r}");

    // The same sandbox without the /dev/null over the socket and with the
    // host's home: both rows fail.
    let wrapper = loosened_runc(
        env.dir.path(),
        "uncovering-runc",
        &format!(
            r#"del(.mounts[] | select(.destination == "{}" or .destination == "{}"))"#,
            socks[0].display(),
            home.display()
        ),
    );
    let (code, stdout) = run(&["--runtime", wrapper.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stdout}");
    let failing: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("FAIL") && (l.starts_with("socket ") || l.starts_with("empty home")))
        .collect();
    assert!(
        failing.iter().any(|l| l.contains(socks[0].to_str().unwrap()))
            && failing.iter().any(|l| l.starts_with("empty home")),
        "{stdout}"
    );
    drop(s);
}

/// `claude` installed in the home (the native installer's layout: a link in
/// ~/.local/bin to a version under ~/.local/share/claude) still runs as the
/// whole agent, its installation bound back into the empty home.
fn claude_installed_in_the_home(owner: Option<(u32, u32)>) {
    let env = match owner {
        None => Env::new(),
        Some((u, g)) => Env::as_user(u, g),
    };
    let s = Scratch::new("claudehome");
    let (home, proj) = (s.mnt().join("home"), s.mnt().join("proj"));
    let versions = home.join(".local/share/claude/versions");
    for d in [&versions, &home.join(".local/bin"), &proj] {
        std::fs::create_dir_all(d).unwrap();
    }
    let real = std::fs::canonicalize("/usr/bin/claude").expect("claude is installed by hack/setup");
    let installed = versions.join("9.9.9");
    // A copy, never a hard link: the chown below would give the system's
    // own binary to the test user.
    std::fs::copy(&real, &installed).unwrap();
    std::os::unix::fs::symlink(&installed, home.join(".local/bin/claude")).unwrap();
    chown_r(&home, owner);
    chown_r(&proj, owner);
    let mut c = env.command(&["claude", "--", "--version"]);
    c.env("HOME", &home)
        .env("PATH", format!("{}:/usr/bin:/bin", home.join(".local/bin").display()))
        .env("ANTHROPIC_API_KEY", "sk-ant-test-not-used")
        .current_dir(&proj);
    let out = output_of(c, env.dir.path());
    let stdout = text(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("Claude Code"),
        "claude from the home ({owner:?}): {stdout}\n{}",
        text(&out.stderr)
    );
    drop(s);
}

#[test]
fn claude_installed_in_the_home_runs_as_root() {
    claude_installed_in_the_home(None);
}

#[test]
fn claude_installed_in_the_home_runs_as_an_unprivileged_user() {
    claude_installed_in_the_home(Some(test_user()));
}
