//! The `--pid-file` an engine reads as soon as `create` or `exec` returns:
//! written whole or not at all (a temporary file renamed into place, as runc
//! does), and only once the process exists. libcontainer 0.7 writes it in
//! place and only warns when that fails, so a reader can see an empty file.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The pid file's absolute path, resolved against the caller's working
/// directory now: libcontainer changes the process's directory while it creates.
pub fn resolve(path: &Path) -> Result<PathBuf> {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .context("read the working directory")?
            .join(path)
    };
    let dir = abs.parent().unwrap_or(Path::new("/"));
    let name = abs
        .file_name()
        .with_context(|| format!("use pid file {}: it names no file", path.display()))?;
    let dir = std::fs::canonicalize(dir).with_context(|| format!("use pid file {}", path.display()))?;
    Ok(dir.join(name))
}

/// Writes `pid` to `path` atomically.
pub fn write(path: &Path, pid: i32) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        write!(f, "{pid}")?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.with_context(|| format!("write pid file {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_whole_and_relative_paths_resolve() {
        let dir = tempfile::tempdir().unwrap();
        let path = resolve(&dir.path().join("x.pid")).unwrap();
        write(&path, 4242).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "4242");
        write(&path, 7).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "7");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary file left"
        );
        assert!(resolve(Path::new("/nonexistent-dir-parity/x.pid")).is_err());
    }
}
