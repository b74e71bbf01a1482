//! Writing a compiled policy as a bundle directory (config.json and the
//! rootfs skeleton) that claude-shim and runc can run. The bundle is built
//! in a sibling temporary directory and renamed into place, so a failed
//! write leaves nothing behind and a reader never sees half a bundle.

use std::fs;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use crate::compile::{Compiled, SkeletonEntry};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Replace a non-empty `out` (otherwise refused).
    pub overwrite: bool,
    /// The bundle lives for one run and is removed after it (`sandbox`):
    /// config.json is not fsync'ed, which on a disk-backed state directory
    /// costs milliseconds per start for a file no crash recovery reads.
    pub transient: bool,
}

/// A bundle that could not be written, in one line.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("write bundle {0}: it exists and is not empty (remove it or ask to overwrite it)")]
    NotEmpty(PathBuf),
    #[error("write bundle {0}: it exists and is not a directory")]
    NotADirectory(PathBuf),
    #[error("write bundle {path}: {op} {target}: {source}")]
    Io {
        path: PathBuf,
        op: &'static str,
        target: PathBuf,
        source: std::io::Error,
    },
    #[error("write bundle {0}: a skeleton path leaves the rootfs")]
    BadSkeleton(PathBuf),
}

fn io(path: &Path, op: &'static str, target: &Path) -> impl FnOnce(std::io::Error) -> WriteError {
    let (path, target) = (path.to_path_buf(), target.to_path_buf());
    move |source| WriteError::Io {
        path,
        op,
        target,
        source,
    }
}

fn is_inside(rel: &Path) -> bool {
    rel.is_relative() && rel.components().all(|c| matches!(c, std::path::Component::Normal(_)))
}

fn fill(out: &Path, dir: &Path, compiled: &Compiled, opts: WriteOptions) -> Result<(), WriteError> {
    let config = serde_json::to_vec_pretty(&compiled.spec).expect("a spec serializes");
    let path = dir.join("config.json");
    let mut f = fs::File::create(&path).map_err(io(out, "create", &path))?;
    f.write_all(&config)
        .and_then(|_| f.write_all(b"\n"))
        .and_then(|_| if opts.transient { Ok(()) } else { f.sync_all() })
        .map_err(io(out, "write", &path))?;
    let rootfs = dir.join("rootfs");
    fs::create_dir(&rootfs).map_err(io(out, "create", &rootfs))?;
    fill_skeleton(out, &rootfs, &compiled.skeleton)
}

/// Creates the skeleton's directories, files and symlinks under `rootfs`
/// (which exists); `out` names the bundle in errors.
pub fn fill_skeleton(out: &Path, rootfs: &Path, skeleton: &[SkeletonEntry]) -> Result<(), WriteError> {
    for entry in skeleton {
        match entry {
            SkeletonEntry::Dir(rel) | SkeletonEntry::File(rel) | SkeletonEntry::Symlink { path: rel, .. }
                if !is_inside(rel) =>
            {
                return Err(WriteError::BadSkeleton(rel.clone()));
            }
            SkeletonEntry::Dir(rel) => {
                let p = rootfs.join(rel);
                fs::create_dir_all(&p).map_err(io(out, "create", &p))?;
            }
            SkeletonEntry::File(rel) => {
                let p = rootfs.join(rel);
                fs::File::create(&p).map_err(io(out, "create", &p))?;
            }
            SkeletonEntry::Symlink { path: rel, target } => {
                let p = rootfs.join(rel);
                std::os::unix::fs::symlink(target, &p).map_err(io(out, "create", &p))?;
            }
        }
    }
    Ok(())
}

/// Writes `compiled` as the bundle `out`. `out` may exist if it is an empty
/// directory (or with `overwrite`, any directory: it is replaced whole).
pub fn write_bundle(out: &Path, compiled: &Compiled, opts: WriteOptions) -> Result<(), WriteError> {
    let existing = match fs::symlink_metadata(out) {
        Ok(m) if m.is_dir() => {
            let empty = fs::read_dir(out).map_err(io(out, "list", out))?.next().is_none();
            if !empty && !opts.overwrite {
                return Err(WriteError::NotEmpty(out.to_path_buf()));
            }
            true
        }
        Ok(_) => return Err(WriteError::NotADirectory(out.to_path_buf())),
        Err(e) if e.kind() == ErrorKind::NotFound => false,
        Err(e) => return Err(io(out, "inspect", out)(e)),
    };
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "bundle".to_owned());
    let tmp = parent.join(format!(".{name}.new-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir(&tmp).map_err(io(out, "create", &tmp))?;
    if let Err(e) = fill(out, &tmp, compiled, opts) {
        let _ = fs::remove_dir_all(&tmp);
        return Err(e);
    }
    let old = parent.join(format!(".{name}.old-{}", std::process::id()));
    if existing {
        if let Err(e) = fs::rename(out, &old) {
            let _ = fs::remove_dir_all(&tmp);
            return Err(io(out, "move aside", out)(e));
        }
    }
    if let Err(e) = fs::rename(&tmp, out) {
        if existing {
            let _ = fs::rename(&old, out);
        }
        let _ = fs::remove_dir_all(&tmp);
        return Err(io(out, "rename", &tmp)(e));
    }
    if existing {
        fs::remove_dir_all(&old).map_err(io(out, "remove", &old))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_spec::runtime::Spec;

    fn compiled() -> Compiled {
        Compiled {
            spec: Spec::default(),
            skeleton: vec![
                SkeletonEntry::Dir("usr".into()),
                SkeletonEntry::Symlink {
                    path: "bin".into(),
                    target: "usr/bin".into(),
                },
                SkeletonEntry::File("vmlinuz".into()),
            ],
            placeholders: vec![],
            host_run: None,
            opt_outs: vec![],
        }
    }

    #[test]
    fn writes_config_and_skeleton() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("b");
        write_bundle(&out, &compiled(), WriteOptions::default()).unwrap();
        let spec = Spec::load(out.join("config.json")).unwrap();
        assert_eq!(spec, Spec::default());
        assert!(out.join("rootfs/usr").is_dir());
        assert_eq!(fs::read_link(out.join("rootfs/bin")).unwrap(), PathBuf::from("usr/bin"));
        assert!(out.join("rootfs/vmlinuz").is_file());
        let leftovers: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers, vec![std::ffi::OsString::from("b")]);
    }

    #[test]
    fn an_empty_out_dir_is_used() {
        let dir = tempfile::tempdir().unwrap();
        write_bundle(dir.path(), &compiled(), WriteOptions::default()).unwrap();
        assert!(dir.path().join("config.json").is_file());
    }

    #[test]
    fn a_non_empty_out_dir_is_refused_unless_asked() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("b");
        fs::create_dir(&out).unwrap();
        fs::write(out.join("keep"), "x").unwrap();
        let err = write_bundle(&out, &compiled(), WriteOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("not empty") && err.contains(&out.display().to_string()),
            "{err}"
        );
        assert!(out.join("keep").exists());
        write_bundle(
            &out,
            &compiled(),
            WriteOptions {
                overwrite: true,
                transient: false,
            },
        )
        .unwrap();
        assert!(!out.join("keep").exists());
        assert!(out.join("config.json").exists());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_bad_skeleton_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("b");
        let mut c = compiled();
        c.skeleton.push(SkeletonEntry::Dir("../escape".into()));
        assert!(matches!(
            write_bundle(&out, &c, WriteOptions::default()),
            Err(WriteError::BadSkeleton(_))
        ));
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_file_out_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("f");
        fs::write(&out, "x").unwrap();
        assert!(matches!(
            write_bundle(&out, &compiled(), WriteOptions::default()),
            Err(WriteError::NotADirectory(_))
        ));
    }
}
