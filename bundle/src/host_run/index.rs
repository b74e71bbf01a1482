//! The gitlinks of a repository's index: the entries of mode 160000, each a
//! folder whose own repository a plain `git status` at the top recurses into
//! (git-status(1), "--ignore-submodules": submodules are checked by
//! default), running that repository's config (`core.fsmonitor`, filters).
//! The format is git's `gitformat-index(5)`: a `DIRC` header, version 2, 3
//! or 4, then the entries in order; only the mode and the path are read.
//! A reader of these few fields is written here rather than taking a git
//! library: the bundle crate stays free of one, and nothing else of the
//! index is needed. What it cannot read ends the list, never a guess.

use std::path::PathBuf;

/// git's mode for a gitlink (`S_IFGITLINK`, object type 1110).
const GITLINK: u32 = 0o160000;
/// The mode's object-type bits.
const TYPE_MASK: u32 = 0o170000;
/// An entry's fixed part before its object name: ctime, mtime, dev, ino,
/// mode, uid, gid and size, 32 bits each.
const STAT_LEN: usize = 40;
/// The flag saying a version 3 or 4 entry has a second flags word.
const EXTENDED: u16 = 0x4000;

/// The gitlink paths of the index `raw` (relative to its worktree's top,
/// as the index stores them), for a repository whose object names are
/// `hash_len` bytes (20 for SHA-1, 32 for SHA-256). Entries past a point
/// that cannot be read are not returned.
pub(super) fn gitlinks(raw: &[u8], hash_len: usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if raw.len() < 12 || &raw[..4] != b"DIRC" {
        return out;
    }
    let version = be32(&raw[4..8]);
    if !(2..=4).contains(&version) {
        return out;
    }
    let count = be32(&raw[8..12]) as usize;
    let mut at: usize = 12;
    let mut previous: Vec<u8> = Vec::new();
    for _ in 0..count {
        let Some(flags_at) = at.checked_add(STAT_LEN + hash_len) else {
            break;
        };
        if raw.len() < flags_at + 2 {
            break;
        }
        let mode = be32(&raw[at + 24..at + 28]);
        let flags = u16::from_be_bytes([raw[flags_at], raw[flags_at + 1]]);
        let mut name_at = flags_at + 2;
        if version >= 3 && flags & EXTENDED != 0 {
            name_at += 2;
        }
        let name = if version == 4 {
            // A prefix-compressed name: how many bytes of the previous name
            // to drop (git's varint), then the rest, NUL-terminated; no
            // padding follows.
            let Some((strip, used)) = varint(raw.get(name_at..).unwrap_or_default()) else {
                break;
            };
            let Some(rest) = raw.get(name_at + used..) else {
                break;
            };
            let Some(end) = rest.iter().position(|&b| b == 0) else {
                break;
            };
            let Some(keep) = previous.len().checked_sub(strip) else {
                break;
            };
            previous.truncate(keep);
            previous.extend_from_slice(&rest[..end]);
            at = name_at + used + end + 1;
            previous.clone()
        } else {
            let Some(rest) = raw.get(name_at..) else {
                break;
            };
            let Some(end) = rest.iter().position(|&b| b == 0) else {
                break;
            };
            // The entry is padded with 1 to 8 NULs to a multiple of 8 bytes
            // from its start (read-cache.c, `ondisk_ce_size`).
            let len = name_at - at + end;
            at += (len + 8) & !7;
            rest[..end].to_vec()
        };
        if mode & TYPE_MASK == GITLINK {
            if let Ok(name) = String::from_utf8(name) {
                out.push(PathBuf::from(name));
            }
        }
    }
    out
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// git's offset varint (varint.c, `decode_varint`): the value and how many
/// bytes it took.
fn varint(b: &[u8]) -> Option<(usize, usize)> {
    let mut it = b.iter().enumerate();
    let (_, &first) = it.next()?;
    let mut val = usize::from(first & 0x7f);
    let mut c = first;
    while c & 0x80 != 0 {
        let (_, &next) = it.next()?;
        c = next;
        val = val
            .checked_add(1)?
            .checked_mul(128)?
            .checked_add(usize::from(c & 0x7f))?;
    }
    let used = it.next().map_or(b.len(), |(i, _)| i);
    Some((val, used))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A version 2 index of `(mode, path)` entries.
    pub(crate) fn index_of(entries: &[(u32, &str)]) -> Vec<u8> {
        let e: Vec<Vec<u8>> = entries.iter().map(|(m, p)| entry(*m, p, 2, 0)).collect();
        index(2, &e)
    }

    /// An index entry as git writes it, version 2 or 3 (padded) or 4
    /// (prefix-compressed, `strip` bytes of the previous name dropped).
    fn entry(mode: u32, name: &str, version: u32, strip: usize) -> Vec<u8> {
        let mut e = vec![0u8; 24];
        e.extend(mode.to_be_bytes());
        e.extend([0u8; 12]);
        e.extend([0xab; 20]);
        e.extend((name.len().min(0xfff) as u16).to_be_bytes());
        if version == 4 {
            let mut v = Vec::new();
            let mut n = strip;
            v.push((n & 0x7f) as u8);
            while n >= 0x80 {
                n = (n >> 7) - 1;
                v.insert(0, 0x80 | (n & 0x7f) as u8);
            }
            e.extend(v);
            e.extend(name.as_bytes());
            e.push(0);
        } else {
            e.extend(name.as_bytes());
            let len = e.len();
            e.resize((len + 8) & !7, 0);
        }
        e
    }

    fn index(version: u32, entries: &[Vec<u8>]) -> Vec<u8> {
        let mut raw = b"DIRC".to_vec();
        raw.extend(version.to_be_bytes());
        raw.extend((entries.len() as u32).to_be_bytes());
        for e in entries {
            raw.extend(e);
        }
        raw.extend([0u8; 20]);
        raw
    }

    #[test]
    fn gitlinks_of_each_version() {
        let v2 = index(
            2,
            &[
                entry(0o100644, "README", 2, 0),
                entry(0o160000, "node_modules/x/deep", 2, 0),
                entry(0o120000, "link", 2, 0),
                entry(0o160000, "vendor/lib", 2, 0),
            ],
        );
        assert_eq!(
            gitlinks(&v2, 20),
            [PathBuf::from("node_modules/x/deep"), PathBuf::from("vendor/lib")]
        );
        // Version 4: `vendor/lib`, `vendor/lib2` (nothing dropped), then
        // `vendor/other` (4 bytes dropped).
        let v4 = index(
            4,
            &[
                entry(0o160000, "vendor/lib", 4, 0),
                entry(0o100644, "2", 4, 0),
                entry(0o160000, "other", 4, 4),
            ],
        );
        assert_eq!(
            gitlinks(&v4, 20),
            [PathBuf::from("vendor/lib"), PathBuf::from("vendor/other")]
        );
        // A name past 127 bytes to drop takes two varint bytes.
        let long = "a".repeat(200);
        let v4 = index(4, &[entry(0o100644, &long, 4, 0), entry(0o160000, "b", 4, 200)]);
        assert_eq!(gitlinks(&v4, 20), [PathBuf::from("b")]);
    }

    #[test]
    fn what_cannot_be_read_ends_the_list() {
        let good = entry(0o160000, "a", 2, 0);
        let mut raw = index(2, &[good.clone(), good]);
        raw.truncate(12 + 70);
        assert_eq!(gitlinks(&raw, 20), [PathBuf::from("a")]);
        assert!(gitlinks(b"DIRC", 20).is_empty());
        assert!(gitlinks(b"NOPE\0\0\0\x02\0\0\0\x01", 20).is_empty());
        let mut v9 = index(2, &[entry(0o160000, "a", 2, 0)]);
        v9[7] = 9;
        assert!(gitlinks(&v9, 20).is_empty());
        // A count far past the data.
        let mut many = index(2, &[entry(0o160000, "a", 2, 0)]);
        many[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(gitlinks(&many, 20), [PathBuf::from("a")]);
    }
}
