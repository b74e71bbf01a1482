//! A minimal driver of the library: compiles a policy for the current
//! directory and user and writes a bundle, with a std::fs `HostView`. It is
//! what the binary's `bundle` verb does, without its flags; used to check a
//! compiled bundle under runc by hand:
//!
//!     cargo run -p claude-shim-bundle --example bundle -- POLICY.toml|agent|offline OUT [ROOTFS] -- CMD...

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use claude_shim_bundle::{compile, write_bundle, HostView, Invocation, PathKind, Policy, WriteOptions};

struct StdHost;

fn kind_of(m: &std::fs::Metadata, path: &Path) -> PathKind {
    let t = m.file_type();
    if t.is_symlink() {
        PathKind::Symlink(std::fs::read_link(path).unwrap_or_default())
    } else if t.is_dir() {
        PathKind::Dir
    } else if t.is_file() {
        PathKind::File
    } else {
        PathKind::Other
    }
}

impl HostView for StdHost {
    fn kind(&self, path: &Path) -> Option<PathKind> {
        std::fs::symlink_metadata(path).ok().map(|m| kind_of(&m, path))
    }

    fn read_dir(&self, path: &Path) -> std::io::Result<Vec<(OsString, PathKind)>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(path)? {
            let e = e?;
            let m = std::fs::symlink_metadata(e.path())?;
            out.push((e.file_name(), kind_of(&m, &e.path())));
        }
        Ok(out)
    }

    fn find(
        &self,
        root: &Path,
        matches: &dyn Fn(&str) -> bool,
        max_depth: usize,
        max_entries: usize,
    ) -> std::io::Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        let mut stack = vec![(root.to_path_buf(), 0usize)];
        while let Some((dir, depth)) = stack.pop() {
            for e in std::fs::read_dir(&dir)? {
                let e = e?;
                let name = e.file_name().to_string_lossy().into_owned();
                let t = e.file_type()?;
                if t.is_dir() && depth + 1 < max_depth && !matches!(name.as_str(), ".git" | "node_modules" | "target") {
                    stack.push((e.path(), depth + 1));
                } else if t.is_file() && matches(&name) {
                    out.push(e.path());
                    if out.len() >= max_entries {
                        return Ok(out);
                    }
                }
            }
        }
        Ok(out)
    }

    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        std::fs::read(path)
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let split = args
        .iter()
        .position(|a| a == "--")
        .expect("usage: POLICY OUT [ROOTFS] -- CMD...");
    let (head, cmd) = (&args[..split], &args[split + 1..]);
    let policy = match head[0].as_str() {
        "agent" => Policy::embedded_default(),
        "offline" => Policy::embedded_offline(),
        path => Policy::from_toml_str(&std::fs::read_to_string(path).expect("read the policy"), path)
            .unwrap_or_else(|e| panic!("{e}")),
    };
    let uid = std::env::var("UID_OVERRIDE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let inv = Invocation {
        workdir: std::env::current_dir().unwrap().canonicalize().unwrap(),
        home: std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| "/root".into()),
        uid,
        gid: uid,
        unprivileged: uid != 0,
        env: std::env::vars().collect(),
        args: cmd.to_vec(),
        terminal: false,
        rootfs: head.get(2).map(PathBuf::from),
    };
    let compiled = compile(&policy, &StdHost, &inv).unwrap_or_else(|e| panic!("{e}"));
    for p in &compiled.placeholders {
        if p.dir {
            std::fs::create_dir_all(&p.path).unwrap();
        } else {
            std::fs::File::create(&p.path).unwrap();
        }
    }
    write_bundle(Path::new(&head[1]), &compiled, WriteOptions { overwrite: true }).unwrap_or_else(|e| panic!("{e}"));
    println!("placeholders: {:?}", compiled.placeholders);
}
