use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use oci_spec::runtime::{LinuxNamespaceType, Mount};

use super::*;
use crate::policy::Policy;
use crate::seccomp::{self, Decision};

/// A host made of a map of paths; what the binary's std::fs view would say.
#[derive(Default, Clone)]
struct FakeHost {
    paths: BTreeMap<PathBuf, PathKind>,
    files: BTreeMap<PathBuf, Vec<u8>>,
}

impl FakeHost {
    fn with(mut self, path: &str, kind: PathKind) -> Self {
        let p = PathBuf::from(path);
        let mut parent = p.parent();
        while let Some(d) = parent {
            self.paths.entry(d.to_path_buf()).or_insert(PathKind::Dir);
            parent = d.parent();
        }
        self.paths.insert(p, kind);
        self
    }
    fn dir(self, path: &str) -> Self {
        self.with(path, PathKind::Dir)
    }
    fn file(self, path: &str) -> Self {
        self.with(path, PathKind::File)
    }
    fn link(self, path: &str, target: &str) -> Self {
        self.with(path, PathKind::Symlink(target.into()))
    }
    fn content(mut self, path: &str, text: &str) -> Self {
        self = self.file(path);
        self.files.insert(path.into(), text.as_bytes().to_vec());
        self
    }

    /// A Debian-like host with a user, a repository and some secrets.
    fn typical() -> Self {
        Self::default()
            .dir("/usr/bin")
            .link("/bin", "usr/bin")
            .link("/lib", "usr/lib")
            .dir("/etc")
            .dir("/opt")
            .dir("/var/tmp")
            .dir("/var/lib")
            .dir("/proc")
            .dir("/sys")
            .dir("/dev")
            .dir("/tmp")
            .dir("/run/user/1000")
            .dir("/lost+found")
            .dir("/root")
            .file("/vmlinuz.old")
            .with("/weird.sock", PathKind::Other)
            .dir("/home/u/.ssh")
            .file("/home/u/.netrc")
            .dir("/home/u/.cache")
            .dir("/home/u/proj/.git/hooks")
            .file("/home/u/proj/.git/config")
            .file("/home/u/proj/.env")
            .file("/home/u/proj/web/.env.local")
            .file("/home/u/proj/.bashrc")
    }
}

impl HostView for FakeHost {
    fn kind(&self, path: &Path) -> Option<PathKind> {
        self.paths.get(path).cloned()
    }
    fn read_dir(&self, path: &Path) -> std::io::Result<Vec<(OsString, PathKind)>> {
        Ok(self
            .paths
            .iter()
            .filter(|(p, _)| p.parent() == Some(path) && p.as_path() != path)
            .map(|(p, k)| (p.file_name().unwrap().to_owned(), k.clone()))
            .collect())
    }
    fn find(
        &self,
        root: &Path,
        matches: &dyn Fn(&str) -> bool,
        max_depth: usize,
        max_entries: usize,
    ) -> std::io::Result<Vec<PathBuf>> {
        Ok(self
            .paths
            .iter()
            .filter(|(p, k)| {
                **k == PathKind::File
                    && p.starts_with(root)
                    && p.strip_prefix(root).unwrap().components().count() <= max_depth
                    && matches(p.file_name().unwrap().to_str().unwrap())
            })
            .map(|(p, _)| p.clone())
            .take(max_entries)
            .collect())
    }
    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        self.files
            .get(path)
            .cloned()
            .ok_or_else(|| std::io::Error::from_raw_os_error(2))
    }
}

fn inv() -> Invocation {
    Invocation {
        workdir: "/home/u/proj".into(),
        home: "/home/u".into(),
        uid: 1000,
        gid: 1000,
        unprivileged: true,
        env: vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("HOME".into(), "/home/u".into()),
            ("TERM".into(), "xterm-256color".into()),
            ("LC_ALL".into(), "C.UTF-8".into()),
            ("EDITOR".into(), "vi".into()),
            ("GH_TOKEN".into(), "ghp_secret".into()),
            ("ANTHROPIC_API_KEY".into(), "sk-ant".into()),
            ("SSH_AUTH_SOCK".into(), "/tmp/ssh-x/agent.1".into()),
            ("AWS_SECRET_ACCESS_KEY".into(), "aws".into()),
            ("RANDOM_THING".into(), "x".into()),
        ],
        args: vec!["claude".into(), "--help".into()],
        terminal: false,
        rootfs: None,
    }
}

fn policy(text: &str) -> Policy {
    Policy::from_toml_str(&format!("version = 1\n{text}"), "test.toml").unwrap()
}

fn run(p: &Policy, host: &FakeHost, inv: &Invocation) -> Compiled {
    compile(p, host, inv).unwrap_or_else(|e| panic!("{e}"))
}

fn agent() -> Compiled {
    run(&Policy::embedded_default(), &FakeHost::typical(), &inv())
}

fn mount_at<'a>(c: &'a Compiled, dest: &str) -> Vec<&'a Mount> {
    c.spec
        .mounts()
        .as_ref()
        .unwrap()
        .iter()
        .filter(|m| m.destination() == Path::new(dest))
        .collect()
}

fn only_mount<'a>(c: &'a Compiled, dest: &str) -> &'a Mount {
    let m = mount_at(c, dest);
    assert_eq!(m.len(), 1, "mounts at {dest}: {m:?}");
    m[0]
}

fn opts(m: &Mount) -> Vec<&str> {
    m.options().iter().flatten().map(String::as_str).collect()
}

fn env_of(c: &Compiled) -> BTreeMap<String, String> {
    c.spec
        .process()
        .as_ref()
        .unwrap()
        .env()
        .iter()
        .flatten()
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

fn annotation<'a>(c: &'a Compiled, key: &str) -> Option<&'a str> {
    c.spec.annotations().as_ref().unwrap().get(key).map(String::as_str)
}

fn error(p: &Policy, host: &FakeHost, inv: &Invocation) -> String {
    let e = compile(p, host, inv).unwrap_err().to_string();
    assert!(!e.contains('\n'), "{e}");
    e
}

#[test]
fn both_shipped_policies_compile_as_root_and_unprivileged() {
    for p in [Policy::embedded_default(), Policy::embedded_offline()] {
        for unprivileged in [true, false] {
            let i = Invocation { unprivileged, ..inv() };
            let c = run(&p, &FakeHost::typical(), &i);
            // What runc reads back is what was compiled.
            let json = serde_json::to_string(&c.spec).unwrap();
            let back: oci_spec::runtime::Spec = serde_json::from_str(&json).unwrap();
            assert_eq!(back, c.spec);
            assert!(c.opt_outs.is_empty());
        }
    }
}

#[test]
fn host_root_is_a_read_only_skeleton_with_read_only_binds() {
    let c = agent();
    let root = c.spec.root().as_ref().unwrap();
    assert_eq!(root.path(), Path::new("rootfs"));
    assert_eq!(root.readonly(), Some(true));
    for name in [
        "usr",
        "etc",
        "opt",
        "var",
        "home",
        "root",
        "proc",
        "sys",
        "dev",
        "tmp",
        "run",
        "lost+found",
    ] {
        assert!(c.skeleton.contains(&SkeletonEntry::Dir(name.into())), "{name}");
    }
    assert!(c.skeleton.contains(&SkeletonEntry::Symlink {
        path: "bin".into(),
        target: "usr/bin".into()
    }));
    assert!(c.skeleton.contains(&SkeletonEntry::File("vmlinuz.old".into())));
    assert!(!c
        .skeleton
        .iter()
        .any(|e| matches!(e, SkeletonEntry::File(p) if p == Path::new("weird.sock"))));
    for dir in ["/usr", "/etc", "/opt", "/var", "/home", "/root", "/vmlinuz.old"] {
        let m = only_mount(&c, dir);
        assert_eq!(m.typ().as_deref(), Some("bind"));
        assert_eq!(m.source().as_deref(), Some(Path::new(dir)));
        assert_eq!(opts(m), ["rbind", "ro", "rro", "nosuid", "nodev"], "{dir}");
    }
    for not_bound in ["/bin", "/lost+found", "/weird.sock"] {
        assert!(mount_at(&c, not_bound).is_empty(), "{not_bound}");
    }
}

#[test]
fn kernel_filesystems_dev_and_private_tmp() {
    let c = agent();
    let proc = only_mount(&c, "/proc");
    assert_eq!(
        (proc.typ().as_deref(), opts(proc)),
        (Some("proc"), vec!["nosuid", "noexec", "nodev"])
    );
    let sys = only_mount(&c, "/sys");
    assert_eq!(sys.typ().as_deref(), Some("sysfs"));
    assert!(opts(sys).contains(&"ro"));
    assert_eq!(only_mount(&c, "/dev").typ().as_deref(), Some("tmpfs"));
    let pts = only_mount(&c, "/dev/pts");
    assert!(opts(pts).contains(&"newinstance") && opts(pts).contains(&"ptmxmode=0666"));
    assert!(!opts(pts).contains(&"gid=5"), "gid 5 is unmapped in the user namespace");
    assert_eq!(only_mount(&c, "/dev/shm").typ().as_deref(), Some("tmpfs"));
    assert_eq!(only_mount(&c, "/dev/mqueue").typ().as_deref(), Some("mqueue"));
    for t in ["/tmp", "/var/tmp", "/run"] {
        assert_eq!(only_mount(&c, t).typ().as_deref(), Some("tmpfs"), "{t}");
    }
    let root = run(
        &Policy::embedded_default(),
        &FakeHost::typical(),
        &Invocation {
            unprivileged: false,
            ..inv()
        },
    );
    assert!(opts(only_mount(&root, "/dev/pts")).contains(&"gid=5"));
    // No /var/tmp on the host: no mount point to mount on.
    let mut host = FakeHost::typical();
    host.paths.remove(Path::new("/var/tmp"));
    assert!(mount_at(&run(&Policy::embedded_default(), &host, &inv()), "/var/tmp").is_empty());
}

#[test]
fn masked_and_read_only_proc_and_sys_paths() {
    let c = agent();
    let l = c.spec.linux().as_ref().unwrap();
    let masked = l.masked_paths().as_ref().unwrap();
    for p in [
        "/proc/kcore",
        "/proc/keys",
        "/proc/timer_list",
        "/proc/sched_debug",
        "/proc/scsi",
        "/proc/acpi",
        "/sys/firmware",
        "/sys/devices/virtual/powercap",
        "/proc/latency_stats",
        "/proc/timer_stats",
        "/proc/asound",
    ] {
        assert!(masked.contains(&p.to_owned()), "{p}");
    }
    let ro = l.readonly_paths().as_ref().unwrap();
    for p in ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"] {
        assert!(ro.contains(&p.to_owned()), "{p}");
    }
}

#[test]
fn workdir_is_writable_and_ro_on_request() {
    let c = agent();
    let m = only_mount(&c, "/home/u/proj");
    assert_eq!(m.source().as_deref(), Some(Path::new("/home/u/proj")));
    assert_eq!(opts(m), ["rbind", "nosuid", "nodev"]);
    assert_eq!(c.spec.process().as_ref().unwrap().cwd(), Path::new("/home/u/proj"));
    let c = run(&policy("[filesystem]\nworkdir = \"ro\""), &FakeHost::typical(), &inv());
    assert!(opts(only_mount(&c, "/home/u/proj")).contains(&"ro"));
}

#[test]
fn protected_paths_are_read_only_and_missing_ones_get_placeholders() {
    let c = agent();
    for p in [
        "/home/u/proj/.git/hooks",
        "/home/u/proj/.git/config",
        "/home/u/proj/.bashrc",
    ] {
        let m = only_mount(&c, p);
        assert_eq!(m.source().as_deref(), Some(Path::new(p)));
        assert!(opts(m).contains(&"ro"), "{p}");
    }
    assert!(c.placeholders.contains(&Placeholder {
        path: "/home/u/proj/.claude".into(),
        dir: true
    }));
    assert!(c.placeholders.contains(&Placeholder {
        path: "/home/u/proj/.mcp.json".into(),
        dir: false
    }));
    assert!(c.placeholders.contains(&Placeholder {
        path: "/home/u/proj/.vscode".into(),
        dir: true
    }));
    assert!(!c
        .placeholders
        .iter()
        .any(|p| p.path.ends_with(".git/hooks") || p.path.ends_with(".bashrc")));
    for p in &c.placeholders {
        assert!(opts(only_mount(&c, p.path.to_str().unwrap())).contains(&"ro"));
    }
    // A worktree's .git is a file: nothing can be created under it.
    let host = FakeHost::typical().file("/home/w/.git").dir("/home/w");
    let c = run(
        &Policy::embedded_default(),
        &host,
        &Invocation {
            workdir: "/home/w".into(),
            ..inv()
        },
    );
    assert!(!c.placeholders.iter().any(|p| p.path.starts_with("/home/w/.git")));
    // Extra protected paths and unprotected built-ins.
    let p = policy("[filesystem]\nprotected = [\"Makefile\"]\nunprotected = [\".bashrc\"]");
    let c = run(&p, &FakeHost::typical().file("/home/u/proj/Makefile"), &inv());
    assert!(opts(only_mount(&c, "/home/u/proj/Makefile")).contains(&"ro"));
    assert!(mount_at(&c, "/home/u/proj/.bashrc").is_empty());
    assert_eq!(c.opt_outs, ["filesystem.unprotected: .bashrc"]);
}

#[test]
fn secrets_are_hidden_and_env_files_read_empty() {
    let c = agent();
    let ssh = only_mount(&c, "/home/u/.ssh");
    assert_eq!(ssh.typ().as_deref(), Some("tmpfs"));
    assert!(opts(ssh).contains(&"ro"));
    for f in ["/home/u/.netrc", "/home/u/proj/.env", "/home/u/proj/web/.env.local"] {
        let m = only_mount(&c, f);
        assert_eq!(m.source().as_deref(), Some(Path::new("/dev/null")), "{f}");
        assert_eq!(opts(m), ["bind", "ro"]);
    }
    assert!(mount_at(&c, "/home/u/.aws").is_empty(), "absent secrets need no mount");
    let c = run(
        &policy("[filesystem]\nhide_env_files = false"),
        &FakeHost::typical(),
        &inv(),
    );
    assert!(mount_at(&c, "/home/u/proj/.env").is_empty());
    assert_eq!(c.opt_outs, ["filesystem.hide_env_files = false"]);
    // A symlinked secret is hidden by what it points to.
    let host = FakeHost::typical().link("/home/u/.aws", "/data/aws").dir("/data/aws");
    assert_eq!(
        only_mount(&run(&Policy::embedded_default(), &host, &inv()), "/data/aws")
            .typ()
            .as_deref(),
        Some("tmpfs")
    );
}

#[test]
fn path_rules_hold_through_symlinks() {
    // issue 11: a writable entry that is a symlink to / bound the host's root writable.
    let host = FakeHost::typical()
        .link("/home/u/rootlink", "/")
        .link("/home/u/proclink", "../../proc/sys")
        .link("/home/u/loop", "/home/u/loop")
        .link("/home/u/sshlink", ".ssh")
        .link("/home/u/cachelink", "/home/u/.cache");
    let cases = [
        (
            "writable = [\"~/rootlink\"]",
            "filesystem.writable[0]: /home/u/rootlink (through a symlink: it resolves to /) cannot be bound",
        ),
        (
            "readonly = [\"/home/u/proclink\"]",
            "filesystem.readonly[0]: /home/u/proclink (through a symlink: it resolves to /proc/sys) cannot be bound",
        ),
        (
            "writable = [\"~/loop/x\"]",
            "filesystem.writable[0]: resolve /home/u/loop/x: too many levels of symbolic links",
        ),
        (
            "writable = [\"~/sshlink\"]",
            "filesystem.writable[0]: /home/u/.ssh lies under the hidden path /home/u/.ssh",
        ),
        (
            "masked = [\"/home/u/rootlink\"]",
            "filesystem.masked: /home/u/rootlink (through a symlink: it resolves to /) cannot be masked",
        ),
        (
            "hidden = [\"~/proclink\"]",
            "filesystem.hidden: /home/u/proclink (through a symlink: it resolves to /proc/sys) cannot be hidden",
        ),
    ];
    for (body, want) in cases {
        let e = error(&policy(&format!("[filesystem]\n{body}")), &host, &inv());
        assert_eq!(e, format!("policy test.toml: {want}"), "{body}");
    }
    // A link to an ordinary directory binds what it points to.
    let c = run(&policy("[filesystem]\nwritable = [\"~/cachelink\"]"), &host, &inv());
    assert_eq!(opts(only_mount(&c, "/home/u/.cache")), ["rbind", "nosuid", "nodev"]);
}

#[test]
fn placeholders_stay_inside_the_working_directory() {
    // .git is a symlink out of the working directory: .git/hooks is protected
    // where it points, and no placeholder is made there.
    let host = FakeHost::typical()
        .link("/home/u/proj2/.git", "/home/u/elsewhere")
        .dir("/home/u/elsewhere")
        .dir("/home/u/proj2");
    let mut i = inv();
    i.workdir = "/home/u/proj2".into();
    let c = run(&Policy::embedded_default(), &host, &i);
    assert!(
        c.placeholders.iter().all(|p| p.path.starts_with("/home/u/proj2/")),
        "{:?}",
        c.placeholders
    );
    assert!(!c.placeholders.iter().any(|p| p.path.starts_with("/home/u/elsewhere")));
}

#[test]
fn too_many_env_files_is_refused() {
    let mut host = FakeHost::typical();
    for i in 0..mounts::ENV_FILE_LIMIT {
        host = host.file(&format!("/home/u/proj/d{i}/.env"));
    }
    let e = error(&Policy::embedded_default(), &host, &inv());
    assert!(
        e.starts_with("policy embedded:agent.toml: filesystem.hide_env_files: /home/u/proj holds 1000"),
        "{e}"
    );
}

#[test]
fn masked_paths_cover_host_paths_not_already_private() {
    let host = FakeHost::typical().dir("/var/lib/secrets").file("/etc/token");
    let c = run(
        &policy("[filesystem]\nmasked = [\"/var/lib/secrets\", \"/etc/token\", \"/nonexistent\"]"),
        &host,
        &inv(),
    );
    let m = only_mount(&c, "/var/lib/secrets");
    assert_eq!(m.typ().as_deref(), Some("tmpfs"));
    assert!(opts(m).contains(&"ro"));
    assert_eq!(
        only_mount(&c, "/etc/token").source().as_deref(),
        Some(Path::new("/dev/null"))
    );
    assert!(mount_at(&c, "/nonexistent").is_empty());
    // /run/user is under the private /run already.
    assert!(mount_at(&c, "/run/user").is_empty());
}

#[test]
fn mounts_are_ordered_parents_first() {
    let p = policy("[filesystem]\nwritable = [\"~/.cache\"]\nreadonly = [\"/home/u/proj/vendor\"]");
    let host = FakeHost::typical().dir("/home/u/proj/vendor");
    let c = run(&p, &host, &inv());
    let dests: Vec<&Path> = c
        .spec
        .mounts()
        .as_ref()
        .unwrap()
        .iter()
        .map(|m| m.destination().as_path())
        .collect();
    for (i, d) in dests.iter().enumerate() {
        for later in &dests[i + 1..] {
            assert!(
                !(d.starts_with(later) && d != later),
                "{} is mounted before its parent {}",
                d.display(),
                later.display()
            );
        }
    }
    let pos = |d: &str| dests.iter().position(|x| *x == Path::new(d)).unwrap();
    assert!(pos("/home") < pos("/home/u/proj"));
    assert!(pos("/home/u/proj") < pos("/home/u/proj/vendor"));
    assert!(pos("/home/u/proj") < pos("/home/u/proj/.git/hooks"));
    assert!(pos("/dev") < pos("/dev/pts"));
    assert!(opts(only_mount(&c, "/home/u/proj/vendor")).contains(&"ro"));
    assert_eq!(opts(only_mount(&c, "/home/u/.cache")), ["rbind", "nosuid", "nodev"]);
    assert_eq!(c.opt_outs, ["filesystem.writable: ~/.cache"]);
}

#[test]
fn extra_binds_missing_required_optional_and_conflicting() {
    let host = FakeHost::typical();
    let e = error(&policy("[filesystem]\nwritable = [\"/data\"]"), &host, &inv());
    assert_eq!(
        e,
        "policy test.toml: filesystem.writable[0]: /data does not exist (a leading \"?\" skips a missing path)"
    );
    let c = run(&policy("[filesystem]\nwritable = [\"?/data\"]"), &host, &inv());
    assert!(mount_at(&c, "/data").is_empty());
    // The working directory itself is bound once.
    let c = run(&policy("[filesystem]\nwritable = [\"~/proj\"]"), &host, &inv());
    assert_eq!(mount_at(&c, "/home/u/proj").len(), 1);
    // A bind under a hidden path written absolutely is caught after expansion.
    let e = error(
        &policy("[filesystem]\nreadonly = [\"/home/u/.ssh/keys\"]"),
        &host.clone().dir("/home/u/.ssh/keys"),
        &inv(),
    );
    assert!(
        e.contains("filesystem.readonly[0]: /home/u/.ssh/keys lies under the hidden path /home/u/.ssh"),
        "{e}"
    );
}

#[test]
fn bad_invocations_are_refused() {
    let p = Policy::embedded_default();
    let host = FakeHost::typical();
    let cases: Vec<(Invocation, &str)> = vec![
        (
            Invocation {
                workdir: "proj".into(),
                ..inv()
            },
            "working directory proj is not absolute",
        ),
        (
            Invocation {
                workdir: "/nope".into(),
                ..inv()
            },
            "use working directory /nope: it does not exist",
        ),
        (
            Invocation {
                workdir: "/".into(),
                ..inv()
            },
            "use / as the working directory",
        ),
        (
            Invocation {
                workdir: "/proc/1".into(),
                ..inv()
            },
            "kernel filesystem",
        ),
        (
            Invocation {
                workdir: "/bin".into(),
                ..inv()
            },
            "it is a symlink",
        ),
        (
            Invocation {
                workdir: "/vmlinuz.old".into(),
                ..inv()
            },
            "it is not a directory",
        ),
        (
            Invocation {
                workdir: "/home/u/.ssh".into(),
                ..inv()
            },
            "lies under the hidden path /home/u/.ssh",
        ),
        (Invocation { args: vec![], ..inv() }, "no command to run"),
        (
            Invocation {
                rootfs: Some("/nope".into()),
                ..inv()
            },
            "use rootfs /nope (--rootfs): it is not a directory",
        ),
    ];
    for (i, want) in cases {
        let e = error(&p, &host, &i);
        assert!(e.contains(want), "got {e}, want {want}");
    }
}

#[test]
fn namespaces_and_user_namespace_choice() {
    let types = |c: &Compiled| -> Vec<LinuxNamespaceType> {
        c.spec
            .linux()
            .as_ref()
            .unwrap()
            .namespaces()
            .iter()
            .flatten()
            .map(|n| n.typ())
            .collect()
    };
    use LinuxNamespaceType::*;
    let c = agent();
    assert_eq!(types(&c), [Pid, Network, Ipc, Uts, Mount, Cgroup, User]);
    assert!(c
        .spec
        .linux()
        .as_ref()
        .unwrap()
        .namespaces()
        .iter()
        .flatten()
        .all(|n| n.path().is_none()));
    let l = c.spec.linux().as_ref().unwrap();
    let uid = &l.uid_mappings().as_ref().unwrap()[0];
    assert_eq!((uid.container_id(), uid.host_id(), uid.size()), (0, 1000, 1));
    let gid = &l.gid_mappings().as_ref().unwrap()[0];
    assert_eq!((gid.container_id(), gid.host_id(), gid.size()), (0, 1000, 1));
    assert_eq!(c.spec.hostname().as_deref(), Some("sandbox"));

    let root = Invocation {
        unprivileged: false,
        uid: 0,
        gid: 0,
        ..inv()
    };
    let c = run(&Policy::embedded_default(), &FakeHost::typical(), &root);
    assert_eq!(types(&c), [Pid, Network, Ipc, Uts, Mount, Cgroup]);
    assert!(c.spec.linux().as_ref().unwrap().uid_mappings().is_none());
    let c = run(
        &policy("[identity]\nuser_namespace = \"always\""),
        &FakeHost::typical(),
        &root,
    );
    assert!(types(&c).contains(&User));
    let c = run(
        &policy("[identity]\nuser_namespace = \"never\""),
        &FakeHost::typical(),
        &root,
    );
    assert!(!types(&c).contains(&User));
    let e = error(
        &policy("[identity]\nuser_namespace = \"never\""),
        &FakeHost::typical(),
        &inv(),
    );
    assert!(
        e.starts_with("policy test.toml: identity.user_namespace: \"never\" is refused when running unprivileged"),
        "{e}"
    );
}

#[test]
fn process_identity_capabilities_and_no_new_privileges() {
    let c = agent();
    let p = c.spec.process().as_ref().unwrap();
    assert_eq!(
        (p.user().uid(), p.user().gid()),
        (0, 0),
        "the caller is root in its user namespace"
    );
    assert_eq!(
        p.args().as_deref(),
        Some(&["claude".to_owned(), "--help".to_owned()][..])
    );
    assert_eq!(p.terminal(), Some(false));
    assert_eq!(p.no_new_privileges(), Some(true));
    assert!(p.rlimits().is_none());
    let caps = p.capabilities().as_ref().unwrap();
    for set in [
        caps.bounding(),
        caps.effective(),
        caps.inheritable(),
        caps.permitted(),
        caps.ambient(),
    ] {
        assert_eq!(set.as_ref().map(|s| s.len()), Some(0));
    }
    let json = serde_json::to_value(&c.spec).unwrap();
    assert_eq!(json["process"]["capabilities"]["bounding"], serde_json::json!([]));
    assert_eq!(json["process"]["capabilities"]["ambient"], serde_json::json!([]));

    let c = run(
        &policy("[identity]\ncapabilities = [\"CAP_NET_BIND_SERVICE\"]\nno_new_privileges = false"),
        &FakeHost::typical(),
        &Invocation {
            terminal: true,
            ..inv()
        },
    );
    let p = c.spec.process().as_ref().unwrap();
    assert_eq!(p.terminal(), Some(true));
    assert_eq!(
        p.no_new_privileges(),
        None,
        "false is left out (libcontainer reads presence as true)"
    );
    let caps = p.capabilities().as_ref().unwrap();
    for set in [
        caps.bounding(),
        caps.effective(),
        caps.inheritable(),
        caps.permitted(),
        caps.ambient(),
    ] {
        assert!(set
            .as_ref()
            .unwrap()
            .contains(&oci_spec::runtime::Capability::NetBindService));
    }
    assert_eq!(
        c.opt_outs,
        [
            "identity.capabilities: CAP_NET_BIND_SERVICE",
            "identity.no_new_privileges = false"
        ]
    );
}

#[test]
fn environment_is_cleared_allow_listed_and_secrets_never_pass() {
    let env = env_of(&agent());
    for (k, v) in [
        ("PATH", "/usr/bin:/bin"),
        ("HOME", "/home/u"),
        ("TERM", "xterm-256color"),
        ("LC_ALL", "C.UTF-8"),
        ("EDITOR", "vi"),
        ("IS_SANDBOX", "1"),
    ] {
        assert_eq!(env.get(k).map(String::as_str), Some(v), "{k}");
    }
    for k in [
        "GH_TOKEN",
        "ANTHROPIC_API_KEY",
        "SSH_AUTH_SOCK",
        "AWS_SECRET_ACCESS_KEY",
        "RANDOM_THING",
    ] {
        assert!(!env.contains_key(k), "{k} passed");
    }
    // Allowlist mode points clients at the proxy in the sandbox's namespace.
    assert_eq!(env["HTTPS_PROXY"], "http://127.0.0.1:3128");
    assert_eq!(env["http_proxy"], "http://127.0.0.1:3128");
    assert_eq!(env["ALL_PROXY"], "socks5h://127.0.0.1:1080");
    assert_eq!(env["no_proxy"], "localhost,127.0.0.1,::1");

    let offline = env_of(&run(&Policy::embedded_offline(), &FakeHost::typical(), &inv()));
    assert!(!offline.keys().any(|k| k.to_ascii_lowercase().contains("proxy")));
    assert!(!offline.contains_key("EDITOR"));

    // Even an allow-everything pattern loses to the secret rule; pass_secrets is by exact name.
    let p = policy(
        "[environment]\nallow = [\"*\"]\npass_secrets = [\"GH_TOKEN\"]\nset = { FOO = \"bar\", TERM = \"dumb\" }",
    );
    let env = env_of(&run(&p, &FakeHost::typical(), &inv()));
    assert_eq!(env["GH_TOKEN"], "ghp_secret");
    assert_eq!(env["RANDOM_THING"], "x");
    assert_eq!(env["FOO"], "bar");
    assert_eq!(env["TERM"], "dumb");
    assert!(!env.contains_key("ANTHROPIC_API_KEY") && !env.contains_key("SSH_AUTH_SOCK"));

    // Nothing from the caller: the fixed minimum still gives a PATH and a HOME.
    let env = env_of(&run(
        &Policy::embedded_offline(),
        &FakeHost::typical(),
        &Invocation { env: vec![], ..inv() },
    ));
    assert_eq!(env["PATH"], process::DEFAULT_PATH);
    assert_eq!(env["HOME"], "/home/u");
    assert_eq!(env.len(), 3, "{env:?}");
}

#[test]
fn resources_and_best_effort() {
    let c = agent();
    let r = c.spec.linux().as_ref().unwrap().resources().as_ref().unwrap();
    assert_eq!(r.memory().as_ref().unwrap().limit(), Some(4 << 30));
    assert_eq!(r.pids().as_ref().unwrap().limit(), 4096);
    let cpu = r.cpu().as_ref().unwrap();
    assert_eq!((cpu.quota(), cpu.period()), (Some(200_000), Some(100_000)));
    assert!(r.devices().is_none());
    assert_eq!(annotation(&c, annotations::BEST_EFFORT_RESOURCES), None);
    assert!(c.spec.linux().as_ref().unwrap().cgroups_path().is_none());

    let c = run(
        &policy("[resources]\nmemory = \"512MiB\"\nbest_effort = true"),
        &FakeHost::typical(),
        &inv(),
    );
    let r = c.spec.linux().as_ref().unwrap().resources().as_ref().unwrap();
    assert_eq!(r.memory().as_ref().unwrap().limit(), Some(512 << 20));
    assert!(r.pids().is_none() && r.cpu().is_none());
    assert_eq!(annotation(&c, annotations::BEST_EFFORT_RESOURCES), Some("true"));
    assert_eq!(c.opt_outs, ["resources.best_effort = true"]);

    let c = run(&policy(""), &FakeHost::typical(), &inv());
    assert!(c.spec.linux().as_ref().unwrap().resources().is_none());

    let c = run(&Policy::embedded_offline(), &FakeHost::typical(), &inv());
    let rl = c.spec.process().as_ref().unwrap().rlimits().clone().unwrap();
    let rl: Vec<(String, u64, u64)> = rl.iter().map(|r| (r.typ().to_string(), r.soft(), r.hard())).collect();
    assert_eq!(
        rl,
        [
            ("RLIMIT_CORE".to_owned(), 0, 0),
            ("RLIMIT_NOFILE".to_owned(), 4096, 4096)
        ]
    );
}

#[test]
fn seccomp_is_the_agent_profile_plus_explicit_allows() {
    let c = agent();
    assert_eq!(
        c.spec.linux().as_ref().unwrap().seccomp().as_ref(),
        Some(&seccomp::agent_profile())
    );
    let c = run(&policy("[seccomp]\nallow = [\"ptrace\"]"), &FakeHost::typical(), &inv());
    let s = c.spec.linux().as_ref().unwrap().seccomp().clone().unwrap();
    assert_eq!(seccomp::decide(&s, "ptrace", [0; 6]), Decision::Allow);
    assert_eq!(seccomp::decide(&s, "mount", [0; 6]), Decision::Errno(1));
    assert_eq!(c.opt_outs, ["seccomp.allow: ptrace"]);

    let host = FakeHost::typical()
        .content("/etc/p.json", r#"{"defaultAction": "SCMP_ACT_LOG"}"#)
        .content("/etc/bad.json", "{");
    let c = run(&policy("[seccomp]\nprofile = \"/etc/p.json\""), &host, &inv());
    let s = c.spec.linux().as_ref().unwrap().seccomp().clone().unwrap();
    assert_eq!(s.default_action(), oci_spec::runtime::LinuxSeccompAction::ScmpActLog);
    assert_eq!(
        c.opt_outs,
        ["seccomp.profile: /etc/p.json (not the built-in agent profile)"]
    );
    let e = error(&policy("[seccomp]\nprofile = \"/etc/bad.json\""), &host, &inv());
    assert!(
        e.starts_with("policy test.toml: seccomp.profile: /etc/bad.json is not an OCI LinuxSeccomp JSON"),
        "{e}"
    );
    let e = error(&policy("[seccomp]\nprofile = \"/etc/none.json\""), &host, &inv());
    assert!(
        e.starts_with("policy test.toml: seccomp.profile: read /etc/none.json:"),
        "{e}"
    );
}

#[test]
fn network_annotations_follow_the_contract() {
    let c = agent();
    assert_eq!(annotation(&c, annotations::POLICY), Some("agent"));
    assert_eq!(annotation(&c, annotations::NETWORK), Some("allowlist"));
    let v: serde_json::Value = serde_json::from_str(annotation(&c, annotations::NETWORK_POLICY).unwrap()).unwrap();
    assert_eq!(v["allow"][0], "api.anthropic.com");
    assert_eq!(v["deny"], serde_json::json!([]));
    assert_eq!(v["allow_cidrs"], serde_json::json!([]));
    assert_eq!(v.as_object().unwrap().len(), 3);
    assert_eq!(annotation(&c, annotations::OPT_OUTS), Some("[]"));

    let c = run(&Policy::embedded_offline(), &FakeHost::typical(), &inv());
    assert_eq!(annotation(&c, annotations::NETWORK), Some("none"));
    assert_eq!(
        annotation(&c, annotations::NETWORK_POLICY),
        Some(r#"{"allow":[],"deny":[],"allow_cidrs":[]}"#)
    );

    let p = policy("[network]\nmode = \"allowlist\"\nallow = [\"GitHub.com:443\"]\ndeny = [\"gist.github.com\"]");
    let c = run(&p, &FakeHost::typical(), &inv());
    assert_eq!(
        annotation(&c, annotations::NETWORK_POLICY),
        Some(r#"{"allow":["github.com:443"],"deny":["gist.github.com"],"allow_cidrs":[]}"#)
    );
    let p = policy("[network]\nmode = \"public\"\nallow_cidrs = [\"10.0.0.5/32:443\"]");
    let c = run(&p, &FakeHost::typical(), &inv());
    assert_eq!(annotation(&c, annotations::NETWORK), Some("public"));
    assert_eq!(
        annotation(&c, annotations::NETWORK_POLICY),
        Some(r#"{"allow":[],"deny":[],"allow_cidrs":["10.0.0.5/32:443"]}"#)
    );
    assert!(!env_of(&c).contains_key("HTTPS_PROXY"));
    let opt: Vec<String> = serde_json::from_str(annotation(&c, annotations::OPT_OUTS).unwrap()).unwrap();
    assert_eq!(opt, ["network.mode = public", "network.allow_cidrs: 10.0.0.5/32:443"]);
}

#[test]
fn a_rootfs_replaces_the_host_root() {
    let host = FakeHost::typical().dir("/srv/rootfs/var/tmp").dir("/srv/rootfs/etc");
    let i = Invocation {
        rootfs: Some("/srv/rootfs".into()),
        ..inv()
    };
    let c = run(&Policy::embedded_default(), &host, &i);
    let root = c.spec.root().as_ref().unwrap();
    assert_eq!(
        (root.path().as_path(), root.readonly()),
        (Path::new("/srv/rootfs"), Some(true))
    );
    assert!(c.skeleton.is_empty());
    assert!(mount_at(&c, "/usr").is_empty() && mount_at(&c, "/home").is_empty());
    assert_eq!(only_mount(&c, "/var/tmp").typ().as_deref(), Some("tmpfs"));
    assert!(opts(only_mount(&c, "/home/u/proj")).contains(&"rbind"));
    assert!(opts(only_mount(&c, "/home/u/proj/.git/hooks")).contains(&"ro"));
    assert_eq!(
        only_mount(&c, "/home/u/proj/.env").source().as_deref(),
        Some(Path::new("/dev/null"))
    );
    // The host's home is not in the rootfs: its secrets need no hiding there.
    assert!(mount_at(&c, "/home/u/.ssh").is_empty());
    // The same through the policy.
    let p = policy("[filesystem]\nroot = \"/srv/rootfs\"");
    assert_eq!(
        run(&p, &host, &inv()).spec.root().as_ref().unwrap().path(),
        Path::new("/srv/rootfs")
    );
    let e = error(&policy("[filesystem]\nroot = \"/srv/none\""), &host, &inv());
    assert!(
        e.contains("use rootfs /srv/none (filesystem.root): it is not a directory"),
        "{e}"
    );
}

#[test]
fn config_json_has_no_leftovers_of_the_sample_spec() {
    let json = serde_json::to_value(&agent().spec).unwrap();
    let linux = json["linux"].as_object().unwrap();
    for absent in ["cgroupsPath", "devices", "sysctl"] {
        assert!(!linux.contains_key(absent), "linux.{absent}");
    }
    let process = json["process"].as_object().unwrap();
    for absent in ["rlimits", "apparmorProfile", "consoleSize"] {
        assert!(!process.contains_key(absent), "process.{absent}");
    }
    assert_eq!(json["hostname"], "sandbox");
}
