//! Compiled seccomp programs, cached: libseccomp turns the agent profile
//! (hundreds of names, three ABIs) into BPF on every start, about a fifth of a
//! `sandbox -- true`. The runtime compiles each distinct profile once, keeps
//! the program in a root-owned directory, and hands it to libcontainer before
//! the container processes are cloned (they inherit it), so the init loads it
//! with one seccomp(2) call. crun caches its filters the same way.
//!
//! Trust: a cached program decides what a container may call, so the cache is
//! used only when the directory, every directory above it, and the file are
//! owned by root and writable by nobody else; anything else (or any read
//! error) means compiling, as before. Each file holds the whole key (cache
//! format, libseccomp version, architecture, profile as JSON) ahead of the
//! program and is used only when that key is byte-for-byte this run's, so
//! the file name (a hash) can never select another profile's program.
//! Rootless runs read root's cache and write nothing.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use claude_shim_bundle::seccomp::socketcall;
use libcontainer::oci_spec::runtime::LinuxSeccomp;

pub const CACHE_DIR: &str = "/var/cache/claude-shim/seccomp";

/// Programs larger than this are not the kernel's (BPF_MAXINSNS is 4096 records of 8 bytes).
const MAX_FILE: u64 = 1 << 20;

/// Makes a compiled program for `seccomp` available to libcontainer in this
/// process and its forks: from the cache when it holds a trusted one, else
/// compiled now (and stored, as root). Without a program libcontainer
/// compiles the profile itself, which is only allowed when the profile needs
/// no socketcall guard (claude_shim_bundle::seccomp::socketcall): that guard
/// exists only in the program made here, so then failing is refusing.
pub fn prepare(seccomp: &LinuxSeccomp) -> Result<()> {
    let guard = socketcall::needs_guard(seccomp);
    if libcontainer::seccomp::is_notify(seccomp) {
        if guard {
            bail!("load the seccomp profile: it has notify rules and filters socket's arguments on i386, where socketcall would bypass them; claude-shim cannot guard such a profile");
        }
        return Ok(());
    }
    match lookup_or_compile(seccomp, Path::new(CACHE_DIR), guard) {
        Ok(bpf) => libcontainer::seccomp::provide_precompiled(seccomp, bpf),
        Err(e) if guard => return Err(e.context("compile the seccomp profile with its socketcall guard")),
        Err(e) => tracing::debug!("seccomp program cache: {e:#}; libcontainer compiles the profile"),
    }
    Ok(())
}

/// Everything the program depends on, as the file's header.
pub fn key(seccomp: &LinuxSeccomp, guard: bool) -> Result<Vec<u8>> {
    let profile = serde_json::to_vec(seccomp).context("serialize the seccomp profile")?;
    let mut key = format!(
        "claude-shim seccomp program v2\nlibseccomp {}\narch {}\noptimize 2\nsocketcall guard {guard}\n",
        crate::runtime::guards::libseccomp_version(),
        std::env::consts::ARCH
    )
    .into_bytes();
    key.extend_from_slice(&profile);
    Ok(key)
}

fn file_name(key: &[u8]) -> String {
    use std::hash::Hasher;
    let mut h = fnv::FnvHasher::default();
    h.write(key);
    format!("{:016x}.bpf", h.finish())
}

fn lookup_or_compile(seccomp: &LinuxSeccomp, dir: &Path, guard: bool) -> Result<Vec<u8>> {
    let key = key(seccomp, guard)?;
    let path = dir.join(file_name(&key));
    let trusted = match trusted_dir(dir) {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!("seccomp program cache {} not used: {e:#}", dir.display());
            false
        }
    };
    if trusted {
        match read_entry(&path, &key) {
            Ok(Some(bpf)) => return Ok(bpf),
            Ok(None) => {}
            Err(e) => tracing::debug!("seccomp program cache entry {}: {e:#}", path.display()),
        }
    }
    let mut bpf =
        libcontainer::seccomp::export_bpf(seccomp).map_err(|e| anyhow!("compile the seccomp profile: {e}"))?;
    if guard {
        bpf.splice(0..0, socketcall::bpf_prefix());
    }
    if nix::unistd::geteuid().is_root() {
        let stored = (|| {
            if !trusted {
                create_dir(dir)?;
            }
            write_entry(dir, &path, &key, &bpf)
        })();
        if let Err(e) = stored {
            tracing::debug!("store seccomp program in {}: {e:#}", dir.display());
        }
    }
    Ok(bpf)
}

/// Root-owned, not group- or world-writable, not a symlink: the directory and
/// every directory above it.
pub fn trusted_dir(dir: &Path) -> Result<()> {
    for d in dir.ancestors() {
        let m = fs::symlink_metadata(d).with_context(|| format!("inspect {}", d.display()))?;
        if !m.file_type().is_dir() {
            bail!("use {}: it is not a directory", d.display());
        }
        if m.uid() != 0 || m.mode() & 0o022 != 0 {
            bail!(
                "trust {}: owned by uid {} with mode {:o} (root and not group/world-writable required)",
                d.display(),
                m.uid(),
                m.mode() & 0o7777
            );
        }
    }
    Ok(())
}

fn create_dir(dir: &Path) -> Result<()> {
    let mut to_make: Vec<&Path> = dir.ancestors().take_while(|d| !d.exists()).collect();
    to_make.reverse();
    for d in to_make {
        match fs::DirBuilder::new().mode(0o755).create(d) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).with_context(|| format!("create {}", d.display())),
        }
    }
    trusted_dir(dir)
}

/// The program stored for exactly `key`, if any.
pub fn read_entry(path: &Path, key: &[u8]) -> Result<Option<Vec<u8>>> {
    let file = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("open {}", path.display())),
    };
    let m = file.metadata().with_context(|| format!("inspect {}", path.display()))?;
    if !m.file_type().is_file() || m.uid() != 0 || m.mode() & 0o022 != 0 || m.len() > MAX_FILE {
        bail!(
            "trust {}: not a root-owned regular file writable only by root",
            path.display()
        );
    }
    let mut data = Vec::with_capacity(m.len() as usize);
    std::io::Read::read_to_end(&mut &file, &mut data).with_context(|| format!("read {}", path.display()))?;
    Ok(parse_entry(&data, key).map(<[u8]>::to_vec))
}

/// `<key length, u64 LE><key><program>`; the program when the key matches.
pub fn parse_entry<'a>(data: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let len = u64::from_le_bytes(data.get(..8)?.try_into().ok()?) as usize;
    let stored = data.get(8..8usize.checked_add(len)?)?;
    let bpf = &data[8 + len..];
    (stored == key && !bpf.is_empty() && bpf.len().is_multiple_of(8)).then_some(bpf)
}

fn entry(key: &[u8], bpf: &[u8]) -> Vec<u8> {
    let mut data = Vec::with_capacity(8 + key.len() + bpf.len());
    data.extend_from_slice(&(key.len() as u64).to_le_bytes());
    data.extend_from_slice(key);
    data.extend_from_slice(bpf);
    data
}

fn write_entry(dir: &Path, path: &Path, key: &[u8], bpf: &[u8]) -> Result<()> {
    let tmp = dir.join(format!(".{}.tmp", std::process::id()));
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)
        .with_context(|| format!("create {}", tmp.display()))?;
    let written = f
        .write_all(&entry(key, bpf))
        .and_then(|()| f.set_permissions(fs::Permissions::from_mode(0o644)));
    if let Err(e) = written.and_then(|()| fs::rename(&tmp, path)) {
        let _ = fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("write {}", path.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_serves_only_its_own_key() {
        let bpf = [6u8, 0, 0, 0, 0, 0, 0xff, 0x7f];
        let data = entry(b"key one", &bpf);
        assert_eq!(parse_entry(&data, b"key one"), Some(&bpf[..]));
        assert_eq!(parse_entry(&data, b"key two"), None);
        assert_eq!(parse_entry(&data, b"key on"), None);
        assert_eq!(parse_entry(&data[..data.len() - 1], b"key one"), None);
        assert_eq!(parse_entry(&[], b"key one"), None);
        let mut huge = data.clone();
        huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(parse_entry(&huge, b"key one"), None);
    }

    #[test]
    fn a_world_writable_directory_is_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("c");
        fs::create_dir(&d).unwrap();
        fs::set_permissions(&d, fs::Permissions::from_mode(0o777)).unwrap();
        let err = format!("{:#}", trusted_dir(&d).unwrap_err());
        assert!(err.contains(&format!("trust {}:", d.display())), "{err}");
        assert!(err.contains("mode 777"), "{err}");
    }

    #[test]
    fn root_owned_system_directories_are_trusted() {
        if !nix::unistd::geteuid().is_root() || fs::metadata("/usr/lib").map(|m| m.uid()).ok() != Some(0) {
            return;
        }
        trusted_dir(Path::new("/usr/lib")).unwrap();
    }
}
