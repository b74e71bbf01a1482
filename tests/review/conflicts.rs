//! Conflicts and hostile layers: a path the user edits on the host during
//! the run is a conflict `apply` names and leaves; two review runs on one
//! project at once each keep their own layer, and once one is applied the
//! other's overlapping path is a conflict. `apply` against a layer holding
//! links to host files, a device node, a FIFO, a set-uid file, names with
//! control bytes and overlay attributes claude-shim never writes: each
//! refused or escaped, nothing outside the project touched.

use std::path::Path;
use std::time::Duration;

use claude_shim_e2e::claude_world::text;
use claude_shim_e2e::mock_api::MockApi;
use claude_shim_e2e::test_user;

use super::case::{finish, outputs, Case, Mode, Who, WAIT};
use super::{json_changes, kept_as, path_of};

fn conflict_of<'a>(changes: &'a [serde_json::Value], p: &str) -> &'a serde_json::Value {
    &changes
        .iter()
        .find(|v| path_of(v) == p)
        .unwrap_or_else(|| panic!("{p}: {changes:?}"))["conflict"]
}

fn parallel_runs_and_host_edits(who: Who) {
    let c = Case::new(who);
    c.sh(
        &c.w.proj,
        "mkdir -p .signal && printf 'a\\n' > a.txt && printf 'shared\\n' > shared.txt && printf 'b\\n' > b.txt",
    );
    let script = |name: &str| {
        let p = c.w.dir.path().join(format!("{name}.sh"));
        std::fs::write(
            &p,
            format!("echo {name} >> a.txt\necho {name} >> shared.txt\necho {name} > only-{name}.txt\n{WAIT}\n"),
        )
        .unwrap();
        p
    };
    let (sa, sb) = (script("A"), script("B"));
    let mock = MockApi::start(&[]);
    std::thread::sleep(Duration::from_millis(100));
    let mut a = c.start(Mode::Sandbox, &sa, &mock);
    let mut b = c.start(Mode::Sandbox, &sb, &mock);
    c.wait_planted(2, &mut [&mut a, &mut b]);
    // The user edits a file both agents change, while they run.
    c.sh(&c.w.proj, "printf 'user\\n' >> a.txt");
    c.release();
    assert!(finish(&mut a, Duration::from_secs(120)).success());
    assert!(finish(&mut b, Duration::from_secs(120)).success());
    let (_, stderr) = outputs(c.w.dir.path());
    let runs: Vec<String> = stderr
        .lines()
        .filter(|l| l.contains(" kept for review as "))
        .map(kept_as)
        .collect();
    assert_eq!(runs.len(), 2, "{stderr}");
    // Which run is which: by the file only it made.
    let owns = |run: &str, name: &str| {
        json_changes(&c, run)
            .iter()
            .any(|v| path_of(v) == format!("only-{name}.txt"))
    };
    let (ra, rb) = if owns(&runs[0], "A") {
        (runs[0].clone(), runs[1].clone())
    } else {
        (runs[1].clone(), runs[0].clone())
    };
    assert!(owns(&rb, "B") && !owns(&rb, "A"), "each run keeps its own layer");
    let ca = json_changes(&c, &ra);
    assert!(
        conflict_of(&ca, "a.txt").is_string(),
        "the host edit is a conflict: {ca:?}"
    );
    assert!(conflict_of(&ca, "shared.txt").is_null());
    let out = c.shim(&["apply", &ra]);
    let err = text(&out.stderr);
    eprintln!("apply A:\n{}{err}", text(&out.stdout));
    assert_eq!(out.status.code(), Some(1), "a conflict fails the apply");
    assert!(
        err.contains("conflict: a.txt: changed on the host since the run began"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(c.w.proj.join("a.txt")).unwrap(),
        "a\nuser\n",
        "the user's edit stays"
    );
    assert_eq!(
        std::fs::read_to_string(c.w.proj.join("shared.txt")).unwrap(),
        "shared\nA\n"
    );
    assert!(c.w.proj.join("only-A.txt").exists());
    // B ran beside A: what A brought is now a conflict for B.
    let cb = json_changes(&c, &rb);
    assert!(conflict_of(&cb, "shared.txt").is_string(), "{cb:?}");
    let out = c.shim(&["apply", &rb]);
    let err = text(&out.stderr);
    eprintln!("apply B:\n{}{err}", text(&out.stdout));
    assert!(err.contains("conflict: shared.txt:"), "{err}");
    assert_eq!(
        std::fs::read_to_string(c.w.proj.join("shared.txt")).unwrap(),
        "shared\nA\n"
    );
    assert_eq!(std::fs::read_to_string(c.w.proj.join("only-B.txt")).unwrap(), "B\n");
    // Applying again brings nothing twice.
    let again = c.shim(&["apply", &ra, "only-A.txt"]);
    assert!(
        text(&again.stdout).contains("already applied: only-A.txt"),
        "{}",
        text(&again.stdout)
    );
    let list = text(&c.shim(&["changes", "--list"]).stdout);
    assert!(list.contains(&ra) && list.contains(&rb), "{list}");
    assert!(c.shim(&["discard", &rb]).status.success());
    assert!(!text(&c.shim(&["changes", "--list"]).stdout).contains(&rb));
}

#[test]
fn parallel_runs_and_host_edits_are_conflicts_as_root() {
    parallel_runs_and_host_edits(Who::Root);
}

#[test]
fn parallel_runs_and_host_edits_are_conflicts_rootless() {
    parallel_runs_and_host_edits(Who::User);
}

/// What the test adds to a layer as root, beyond what a sandbox can make:
/// a device node, and overlay attributes (namespace `ns`) claude-shim's
/// mounts never write.
fn harden(upper: &Path, ns: &str) {
    use std::os::unix::ffi::OsStrExt;
    let dev = std::ffi::CString::new(upper.join("dev0").as_os_str().as_bytes()).unwrap();
    // SAFETY: mknod with a valid path.
    assert_eq!(
        unsafe { libc::mknod(dev.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) },
        0
    );
    std::fs::create_dir(upper.join("redir")).unwrap();
    let set = |p: &Path, name: &str| {
        let path = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
        let name = std::ffi::CString::new(name).unwrap();
        // SAFETY: valid C strings and a one-byte value.
        let r = unsafe { libc::lsetxattr(path.as_ptr(), name.as_ptr(), b"y".as_ptr().cast(), 1, 0) };
        assert_eq!(r, 0, "set {name:?} on {}", p.display());
    };
    set(&upper.join("redir"), &format!("{ns}.overlay.redirect"));
    std::fs::write(upper.join("meta"), "").unwrap();
    set(&upper.join("meta"), &format!("{ns}.overlay.metacopy"));
}

fn hostile_layer(who: Who) {
    let c = Case::new(who);
    let outside = c.w.dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("keep"), "outside\n").unwrap();
    c.sh(&c.w.proj, "git init -q . && mkdir -p .signal sub && echo x > sub/f");
    let m = c.markers.display();
    let script = c.w.dir.path().join("hostile.sh");
    std::fs::write(
        &script,
        format!(
            r#"export GIT_CONFIG_NOSYSTEM=1
ln -s /etc/passwd passwd_link; ln -s ../../outside/keep out_link; ln -s sub/../../x esc; ln -s sub/f fine_link
mkfifo fifo0; echo s > suid && chmod 4755 suid
printf 'ctl\n' > "$(printf 'ctl\033]0;owned\007name')"
mv .git .git-x && git init -q . && git config core.fsmonitor "touch {m}/new_git #"
{WAIT}
"#
        ),
    )
    .unwrap();
    let passwd = std::fs::read("/etc/passwd").unwrap();
    let mock = MockApi::start(&[]);
    std::thread::sleep(Duration::from_millis(100));
    let mut child = c.start(Mode::Sandbox, &script, &mock);
    let runs = c.wait_planted(1, &mut [&mut child]);
    c.release();
    assert!(finish(&mut child, Duration::from_secs(120)).success());
    let run = runs[0].file_name().unwrap().to_str().unwrap().to_owned();
    // As an ordinary user the layer's attributes are user.*, and trusted.*
    // ones are not even readable to claude-shim.
    harden(
        &runs[0].join("upper"),
        if who == Who::Root { "trusted" } else { "user" },
    );
    let changes = json_changes(&c, &run);
    let refused = |p: &str| changes.iter().find(|v| path_of(v) == p).map(|v| v["refused"].clone());
    for p in ["passwd_link", "out_link", "esc", "fifo0", "dev0", "redir", "meta"] {
        assert!(
            refused(p).is_some_and(|r| r.is_string()),
            "{p} is not refused: {changes:?}"
        );
    }
    assert!(refused("fine_link").is_some_and(|r| r.is_null()));
    let ctl = changes.iter().find(|v| path_of(v).starts_with("ctl")).unwrap();
    assert_eq!(path_of(ctl), "ctl\\u{1b}]0;owned\\u{7}name");
    let all = [
        "passwd_link",
        "out_link",
        "esc",
        "fine_link",
        "fifo0",
        "dev0",
        "redir",
        "meta",
        "suid",
    ];
    let mut args = vec!["apply", run.as_str()];
    args.extend(all);
    args.push(path_of(ctl));
    let out = c.shim(&args);
    let (so, se) = (text(&out.stdout), text(&out.stderr));
    eprintln!("apply against a hostile layer:\n{so}{se}");
    assert_eq!(out.status.code(), Some(1), "refusals fail the apply");
    assert!(
        !so.contains('\x1b') && !se.contains('\x1b'),
        "a control byte reached the terminal"
    );
    for p in ["passwd_link", "out_link", "esc", "fifo0", "dev0", "redir", "meta"] {
        assert!(se.contains(&format!("refused: {p}: ")), "{p}: {se}");
        assert!(
            std::fs::symlink_metadata(c.w.proj.join(p)).is_err(),
            "{p} reached the project"
        );
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(c.w.proj.join("suid")).unwrap().permissions().mode();
    assert_eq!(mode & 0o7777, 0o755, "the set-uid bit came along");
    assert_eq!(
        std::fs::read_link(c.w.proj.join("fine_link")).unwrap(),
        Path::new("sub/f")
    );
    assert_eq!(
        std::fs::read(c.w.proj.join("ctl\x1b]0;owned\x07name")).unwrap(),
        b"ctl\n"
    );
    assert_eq!(std::fs::read("/etc/passwd").unwrap(), passwd);
    assert_eq!(std::fs::read_to_string(outside.join("keep")).unwrap(), "outside\n");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1);
    // The repository the agent made in place of the user's is not the host's.
    let st = c.git(&c.w.proj, &["status"]);
    assert!(st.status.success(), "{}", text(&st.stderr));
    assert_eq!(c.markers_left(), Vec::<String>::new());
    eprintln!("{who:?}: links out, a FIFO, a device, a redirect, a metacopy refused; set-uid dropped; names escaped");
}

#[test]
fn a_hostile_layer_is_refused_or_escaped_as_root() {
    hostile_layer(Who::Root);
}

#[test]
fn a_hostile_layer_is_refused_or_escaped_rootless() {
    let _ = test_user();
    hostile_layer(Who::User);
}
