//! What a review run changed, read from its upper layer alone (the cost is
//! what the run wrote, never the project's size) beside the project as it is
//! now, in one walk through directory descriptors that follows no link. The
//! upper layer is the sandbox's writes and read as untrusted input: a
//! whiteout (a character device 0/0) deletes, an opaque folder
//! (`trusted.overlay.opaque` or `user.overlay.opaque` = `y`) hides what the
//! project has there, and what claude-shim's overlays never write (a
//! directory redirect, a metadata-only copy, a whiteout by attribute) is
//! named as foreign and never interpreted. Devices, FIFOs and sockets are
//! listed as what they are.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::fds::{self, Meta, Side, Type};
use crate::hostfs::Dir;

/// How deep a layer may go; deeper is refused rather than half-read.
pub use super::fds::MAX_DEPTH;

/// What the upper layer holds at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upper {
    Dir {
        opaque: bool,
    },
    File,
    Link(PathBuf),
    /// The path is deleted.
    Whiteout,
    /// A device, FIFO or socket the sandbox made ("device", "fifo", "socket").
    Special(&'static str),
    /// What claude-shim's overlays never write; refused, never interpreted.
    Foreign(&'static str),
}

/// What the project holds at a path now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    Missing,
    Dir,
    File,
    Link(PathBuf),
    Special(&'static str),
}

impl Host {
    pub fn name(&self) -> &'static str {
        match self {
            Host::Missing => "nothing",
            Host::Dir => "dir",
            Host::File => "file",
            Host::Link(_) => "link",
            Host::Special(s) => s,
        }
    }
}

/// One path of the upper layer, beside the project's.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Relative to the project.
    pub rel: PathBuf,
    pub upper: Upper,
    /// Of the upper entry (None for what an opaque folder hides).
    pub upper_meta: Option<Meta>,
    pub host: Host,
    pub host_meta: Option<Meta>,
    /// The deepest folder of the project above `rel` that exists, and its ctime.
    pub anchor: PathBuf,
    pub anchor_ctime: i64,
    /// The newest ctime in a folder of the project the layer deletes or
    /// replaces (its own included).
    pub host_tree_ctime: Option<i64>,
    /// Both are files of one length: whether their bytes are the same.
    pub same_content: Option<bool>,
    /// The upper entry is a copy of a lower one (`overlay.origin`): the
    /// project had it when the sandbox first wrote it.
    pub copied_up: bool,
}

/// Every path of the upper layer below `upper`, beside the project at
/// `host`, parents before their children; plus, for each opaque folder, the
/// project's entries it hides (as whiteouts).
/// `closed`: the folders the sandbox closed, opened since, with the modes
/// it left them (`store::Record::closed`), which are what the layer says.
pub fn walk(upper: &Dir, host: &Dir, closed: &BTreeMap<String, u32>) -> anyhow::Result<Vec<Entry>> {
    let ufd = upper.open_fd()?;
    let hfd = host.open_fd()?;
    let root_ctime = fds::fstat(hfd.as_fd())?.ctime_ns;
    let mut out = Vec::new();
    let mut w = Walk { out: &mut out, closed };
    w.dir(
        ufd.as_fd(),
        Some(hfd.as_fd()),
        Path::new(""),
        (Path::new(""), root_ctime),
        0,
    )
    .map_err(|(rel, e)| anyhow::anyhow!("read the layer at {}: {e}", show(&rel)))?;
    Ok(out)
}

/// A path as printed: a sandbox named it.
pub fn show(rel: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    crate::terminal::escaped_name(rel.as_os_str().as_bytes())
}

type Failure = (PathBuf, io::Error);

struct Walk<'a> {
    out: &'a mut Vec<Entry>,
    closed: &'a BTreeMap<String, u32>,
}

fn at<T>(rel: &Path, r: io::Result<T>) -> Result<T, Failure> {
    r.map_err(|e| (rel.to_path_buf(), e))
}

/// What the project holds at `name` below `dir` (None: no folder there).
fn host_at(dir: Option<BorrowedFd<'_>>, name: &OsStr) -> io::Result<(Host, Option<Meta>)> {
    let Some(dir) = dir else {
        return Ok((Host::Missing, None));
    };
    let Some(m) = fds::stat_at(dir, name)? else {
        return Ok((Host::Missing, None));
    };
    let host = match m.file_type {
        Type::Dir => Host::Dir,
        Type::File => Host::File,
        Type::Link => Host::Link(fds::read_link_at(dir, name)?),
        t => Host::Special(t.name()),
    };
    Ok((host, Some(m)))
}

/// What the upper layer holds at `name` below `dir`, attributes read.
fn upper_at(dir: BorrowedFd<'_>, name: &OsStr, m: &Meta) -> io::Result<Upper> {
    Ok(match m.file_type {
        Type::Whiteout => Upper::Whiteout,
        Type::Dir => {
            if fds::overlay_xattr(dir, name, "redirect")?.is_some() {
                Upper::Foreign("a renamed folder (an overlay redirect)")
            } else {
                match fds::overlay_xattr(dir, name, "opaque")?.as_deref() {
                    None => Upper::Dir { opaque: false },
                    Some(b"y") => Upper::Dir { opaque: true },
                    Some(_) => Upper::Foreign("an opaque mark overlayfs writes only in lower layers"),
                }
            }
        }
        Type::File => {
            if fds::overlay_xattr(dir, name, "metacopy")?.is_some() {
                Upper::Foreign("a metadata-only copy (overlay metacopy)")
            } else if fds::overlay_xattr(dir, name, "whiteout")?.is_some() {
                Upper::Foreign("a whiteout by attribute")
            } else {
                Upper::File
            }
        }
        Type::Link => Upper::Link(fds::read_link_at(dir, name)?),
        t => Upper::Special(t.name()),
    })
}

/// The newest ctime under the project's folder `name` below `dir`, itself
/// included. A folder that cannot be read counts as changed.
fn newest_ctime(dir: BorrowedFd<'_>, name: &OsStr, m: &Meta, depth: usize) -> i64 {
    let mut newest = m.ctime_ns;
    if m.file_type != Type::Dir {
        return newest;
    }
    if depth > MAX_DEPTH {
        return i64::MAX;
    }
    let Ok(sub) = fds::open_dir(Side::Project, dir, name) else {
        return i64::MAX;
    };
    let Ok(names) = fds::names(sub.as_fd()) else {
        return i64::MAX;
    };
    for n in names {
        match fds::stat_at(sub.as_fd(), &n) {
            Ok(Some(cm)) => newest = newest.max(newest_ctime(sub.as_fd(), &n, &cm, depth + 1)),
            Ok(None) => {}
            Err(_) => return i64::MAX,
        }
    }
    newest
}

impl Walk<'_> {
    fn dir(
        &mut self,
        ufd: BorrowedFd<'_>,
        hfd: Option<BorrowedFd<'_>>,
        rel: &Path,
        anchor: (&Path, i64),
        depth: usize,
    ) -> Result<(), Failure> {
        if depth > MAX_DEPTH {
            return Err((
                rel.to_path_buf(),
                io::Error::other(format!("it is more than {MAX_DEPTH} folders deep")),
            ));
        }
        for name in at(rel, fds::names(ufd))? {
            let crel = rel.join(&name);
            let Some(mut um) = at(&crel, fds::stat_at(ufd, &name))? else {
                continue;
            };
            if um.file_type == Type::Dir {
                if let Some(&mode) = self.closed.get(&show(&crel)) {
                    um.mode = mode;
                }
            }
            let upper = at(&crel, upper_at(ufd, &name, &um))?;
            let (host, hm) = at(&crel, host_at(hfd, &name))?;
            let replaces_dir =
                matches!(upper, Upper::Whiteout | Upper::Dir { opaque: true }) || !matches!(upper, Upper::Dir { .. });
            let host_tree_ctime = match (&host, hfd, hm) {
                (Host::Dir, Some(h), Some(m)) if replaces_dir => Some(newest_ctime(h, &name, &m, depth)),
                _ => None,
            };
            let same_content = match (&upper, &host, hfd, hm) {
                (Upper::File, Host::File, Some(h), Some(m)) if m.len == um.len => {
                    let compare = || -> io::Result<bool> {
                        let mut a = fds::open_file(Side::Layer, ufd, &name)?;
                        let mut b = fds::open_file(Side::Project, h, &name)?;
                        fds::same_bytes(&mut a, &mut b)
                    };
                    Some(at(&crel, compare())?)
                }
                _ => None,
            };
            let copied_up = at(&crel, fds::overlay_xattr(ufd, &name, "origin"))?.is_some();
            let opaque = matches!(upper, Upper::Dir { opaque: true });
            let is_dir = matches!(upper, Upper::Dir { .. });
            self.out.push(Entry {
                rel: crel.clone(),
                upper,
                upper_meta: Some(um),
                host: host.clone(),
                host_meta: hm,
                host_tree_ctime,
                same_content,
                copied_up,
                anchor: anchor.0.to_path_buf(),
                anchor_ctime: anchor.1,
            });
            if !is_dir {
                continue;
            }
            let sub = at(&crel, fds::open_dir(Side::Layer, ufd, &name))?;
            // The project's folder, when there is one: what the layer's
            // entries below replace, and (opaque) what it hides.
            let hsub: Option<OwnedFd> = match (&host, hfd) {
                (Host::Dir, Some(h)) => Some(at(&crel, fds::open_dir(Side::Project, h, &name))?),
                _ => None,
            };
            let child_anchor = match (&host, hm) {
                (Host::Dir, Some(m)) => (crel.as_path(), m.ctime_ns),
                _ => anchor,
            };
            if opaque {
                if let Some(h) = &hsub {
                    self.hidden(sub.as_fd(), h.as_fd(), &crel, child_anchor, depth + 1)?;
                }
            }
            self.dir(
                sub.as_fd(),
                hsub.as_ref().map(|h| h.as_fd()),
                &crel,
                child_anchor,
                depth + 1,
            )?;
        }
        Ok(())
    }

    /// The project's entries in a folder an opaque upper folder replaces,
    /// that the upper one does not hold: deleted.
    fn hidden(
        &mut self,
        ufd: BorrowedFd<'_>,
        hfd: BorrowedFd<'_>,
        rel: &Path,
        anchor: (&Path, i64),
        depth: usize,
    ) -> Result<(), Failure> {
        for name in at(rel, fds::names(hfd))? {
            let crel = rel.join(&name);
            if at(&crel, fds::stat_at(ufd, &name))?.is_some() {
                continue;
            }
            let (host, hm) = at(&crel, host_at(Some(hfd), &name))?;
            let host_tree_ctime = hm.map(|m| newest_ctime(hfd, &name, &m, depth));
            self.out.push(Entry {
                rel: crel,
                upper: Upper::Whiteout,
                upper_meta: None,
                host,
                host_meta: hm,
                host_tree_ctime,
                same_content: None,
                copied_up: false,
                anchor: anchor.0.to_path_buf(),
                anchor_ctime: anchor.1,
            });
        }
        Ok(())
    }
}

/// The project as the sandbox saw it at the end of the run (the upper
/// layer over the project as it is now), at `rel`: from the upper layer,
/// unless it says nothing there and no whiteout or opaque folder of it
/// hides the project's. For the classifier (`tree`) and the agent's git.
///
/// What it holds there: its type, and a link's target.
pub fn merged_kind(
    upper: BorrowedFd<'_>,
    host: BorrowedFd<'_>,
    rel: &Path,
) -> io::Result<Option<(Type, Option<PathBuf>)>> {
    let Some((_, dir, name)) = merged_parent(upper, host, rel)? else {
        return Ok(None);
    };
    let Some(m) = fds::stat_at(dir.as_fd(), &name)? else {
        return Ok(None);
    };
    let target = match m.file_type {
        Type::Link => Some(fds::read_link_at(dir.as_fd(), &name)?),
        _ => None,
    };
    Ok(Some((m.file_type, target)))
}

/// The regular file at `rel` of the merged view, at most `limit` bytes.
pub fn merged_read(upper: BorrowedFd<'_>, host: BorrowedFd<'_>, rel: &Path, limit: u64) -> io::Result<Option<Vec<u8>>> {
    let Some((side, dir, name)) = merged_parent(upper, host, rel)? else {
        return Ok(None);
    };
    let side = match side {
        Which::Upper => Side::Layer,
        Which::Host => Side::Project,
    };
    match fds::open_file(side, dir.as_fd(), &name) {
        Ok(mut f) => fds::read_bounded(&mut f, limit),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

enum Which {
    Upper,
    Host,
}

/// Which side holds `rel`, a descriptor of its folder there and its name.
fn merged_parent(
    upper: BorrowedFd<'_>,
    host: BorrowedFd<'_>,
    rel: &Path,
) -> io::Result<Option<(Which, OwnedFd, std::ffi::OsString)>> {
    let names: Vec<&OsStr> = rel.iter().collect();
    let Some((last, folders)) = names.split_last() else {
        return Ok(None);
    };
    let mut ucur = Some(upper.try_clone_to_owned()?);
    let mut opaque = false;
    for f in folders {
        let Some(u) = &ucur else { break };
        match fds::stat_at(u.as_fd(), f)? {
            None => ucur = None,
            Some(m) if m.file_type == Type::Dir => {
                opaque |= fds::overlay_xattr(u.as_fd(), f, "opaque")?.is_some();
                ucur = Some(fds::open_dir(Side::Layer, u.as_fd(), f)?);
            }
            // A whiteout, or a file where a folder was: nothing below.
            Some(_) => return Ok(None),
        }
    }
    if let Some(u) = ucur {
        match fds::stat_at(u.as_fd(), last)? {
            Some(m) if m.file_type == Type::Whiteout => return Ok(None),
            Some(_) => return Ok(Some((Which::Upper, u, last.to_os_string()))),
            None if opaque => return Ok(None),
            None => {}
        }
    } else if opaque {
        return Ok(None);
    }
    // The project's side: each folder on the way opened without a link.
    let mut hcur = host.try_clone_to_owned()?;
    for f in folders {
        match fds::stat_at(hcur.as_fd(), f)? {
            Some(m) if m.file_type == Type::Dir => hcur = fds::open_dir(Side::Project, hcur.as_fd(), f)?,
            _ => return Ok(None),
        }
    }
    Ok(Some((Which::Host, hcur, last.to_os_string())))
}
