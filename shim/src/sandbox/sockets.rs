//! The host's unix socket census, asked by the policy compiler (through
//! `HostView::unix_sockets`: every one that would show inside is covered)
//! and by `verify` (each must refuse a connection): the paths pathname unix
//! sockets are bound at, from /proc/net/unix of this process's network
//! namespace and of every other one it can see through /proc/PID/ns/net
//! (all of them for root; the caller's own processes otherwise).

use std::collections::{BTreeSet, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use anyhow::{Context, Result};

/// The paths of the host's bound pathname sockets, sorted, each once; as
/// bound (a socket since removed or renamed still shows its old path).
pub fn census() -> Result<Vec<PathBuf>> {
    let mut out = BTreeSet::new();
    // Our own namespace must be read: without it nothing is known.
    let own = std::fs::read("/proc/self/net/unix").context("read /proc/self/net/unix")?;
    parse(&own, &mut out);
    let mut seen = HashSet::new();
    if let Ok(ns) = std::fs::read_link("/proc/self/ns/net") {
        seen.insert(ns);
    }
    // Other namespaces: their sockets may be bound at host paths (a daemon
    // in a namespace of its own, `ip netns exec`). Processes come and go
    // and others' namespaces are not ours to see: what cannot be read is
    // skipped.
    for e in std::fs::read_dir("/proc").context("list /proc")?.flatten() {
        if !e.file_name().as_bytes().iter().all(u8::is_ascii_digit) {
            continue;
        }
        let Ok(ns) = std::fs::read_link(e.path().join("ns/net")) else {
            continue;
        };
        if !seen.insert(ns) {
            continue;
        }
        if let Ok(raw) = std::fs::read(e.path().join("net/unix")) {
            parse(&raw, &mut out);
        }
    }
    Ok(out.into_iter().collect())
}

/// The absolute paths in a /proc/net/unix table: `Num RefCount Protocol
/// Flags Type St Inode Path`, the path (when bound) after the seventh field
/// and one space, as the kernel prints it (spaces kept; abstract names
/// start with '@' and are not files).
fn parse(raw: &[u8], out: &mut BTreeSet<PathBuf>) {
    for line in raw.split(|b| *b == b'\n').skip(1) {
        let mut rest = line;
        for _ in 0..7 {
            let start = rest.iter().position(|b| *b != b' ').unwrap_or(rest.len());
            rest = &rest[start..];
            let end = rest.iter().position(|b| *b == b' ').unwrap_or(rest.len());
            rest = &rest[end..];
        }
        let Some(path) = rest.strip_prefix(b" ") else {
            continue;
        };
        if path.first() == Some(&b'/') {
            out.insert(PathBuf::from(OsStr::from_bytes(path)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_kernels_table() {
        let raw = b"Num       RefCount Protocol Flags    Type St Inode Path\n\
0000000000000000: 00000002 00000000 00010000 0001 01  1234 /run/a.sock\n\
0000000000000000: 00000003 00000000 00000000 0001 03  1235 /run/a.sock\n\
0000000000000000: 00000002 00000000 00000000 0002 01    17 @/tmp/.X11-unix/X0\n\
0000000000000000: 00000002 00000000 00000000 0001 03    18\n\
0000000000000000: 00000002 00000000 00010000 0001 01 99999 /mnt/with space.sock\n\
0000000000000000: 00000002 00000000 00010000 0001 01 99998 relative.sock\n";
        let mut out = BTreeSet::new();
        parse(raw, &mut out);
        let got: Vec<_> = out.into_iter().collect();
        assert_eq!(
            got,
            [PathBuf::from("/mnt/with space.sock"), PathBuf::from("/run/a.sock")]
        );
    }

    #[test]
    fn finds_a_listener_of_this_process() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("census.sock");
        let _l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        assert!(census().unwrap().contains(&path));
    }
}
