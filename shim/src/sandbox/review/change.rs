//! What each path of a review run's layer is to the user, from the layer's
//! entries (`layer`) and the run's record, without a system call: added,
//! modified, deleted, a type change or a mode change; whether the host would
//! run it unasked (`flags`, given as `flag`); whether the user changed it
//! on the host since the run began (a conflict, which `apply` names and
//! leaves); whether `apply` refuses it whatever is asked (a device, FIFO or
//! socket, a link out of the project, what overlayfs's own attributes would
//! have to say).

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use super::layer::{show, Entry, Host, Upper};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum What {
    Added,
    Modified,
    Deleted,
    TypeChange,
    ModeChange,
}

impl What {
    /// The column `changes` prints, as `git status --short` does (`T` a
    /// type change, `m` a mode change alone).
    pub fn letter(self) -> char {
        match self {
            What::Added => 'A',
            What::Modified => 'M',
            What::Deleted => 'D',
            What::TypeChange => 'T',
            What::ModeChange => 'm',
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Relative to the project.
    pub rel: PathBuf,
    pub what: What,
    /// What is there after it ("dir", "file", "link", "device"...), or for a
    /// deletion what goes.
    pub kind: &'static str,
    /// What the project holds there now.
    pub was: &'static str,
    /// The permission bits the layer gives it (set-id bits included: `apply`
    /// drops them), and the project's.
    pub mode: Option<u32>,
    pub old_mode: Option<u32>,
    /// A link's target.
    pub target: Option<PathBuf>,
    /// Why the host would run it unasked.
    pub host_run: Option<String>,
    /// Why it is a conflict: the user changed it on the host since the run began.
    pub conflict: Option<String>,
    /// Why `apply` never brings it.
    pub refused: Option<String>,
}

/// What the run's record says of time: when it began (ns since the epoch,
/// less a margin) and the ctimes `apply` left on what it wrote (by the
/// path as `show` prints it), which are the run's own changes, not the user's.
pub struct Since<'a> {
    pub start_ns: i64,
    pub touched: &'a BTreeMap<String, i64>,
    /// The layer records where each copied-up entry came from
    /// (`Entry::copied_up` can be trusted to be false for a new one).
    pub origins: bool,
}

impl Since<'_> {
    fn changed(&self, rel: &Path, ctime: i64) -> bool {
        ctime >= self.start_ns && self.touched.get(&show(rel)) != Some(&ctime)
    }
}

/// Every change the entries make, in the entries' order (parents first).
pub fn changes(entries: &[Entry], since: &Since<'_>, flag: &dyn Fn(&Path, bool) -> Option<String>) -> Vec<Change> {
    let mut out = Vec::new();
    for e in entries {
        let Some((what, kind)) = what_of(e) else { continue };
        let mode = e.upper_meta.filter(|_| what != What::Deleted).map(|m| m.mode);
        let target = match &e.upper {
            Upper::Link(t) if what != What::Deleted => Some(t.clone()),
            _ => None,
        };
        out.push(Change {
            rel: e.rel.clone(),
            what,
            kind,
            was: e.host.name(),
            mode,
            old_mode: e.host_meta.map(|m| m.mode),
            refused: refused(e, what),
            conflict: conflict(e, since),
            host_run: flag(&e.rel, kind == "dir"),
            target,
        });
    }
    out
}

fn what_of(e: &Entry) -> Option<(What, &'static str)> {
    let mode_changed = match (e.upper_meta, e.host_meta) {
        // `apply` leaves a folder open to its owner (apply.rs): a folder
        // whose owner bits alone differ is no change.
        (Some(u), Some(h)) if u.file_type == super::fds::Type::Dir => (u.mode | 0o700) != (h.mode | 0o700),
        (Some(u), Some(h)) => u.mode != h.mode,
        _ => false,
    };
    let same = |w: What, k| Some((w, k));
    match (&e.upper, &e.host) {
        (Upper::Whiteout, Host::Missing) => None,
        (Upper::Whiteout, h) => same(What::Deleted, h.name()),
        (Upper::Dir { .. }, Host::Dir) => mode_changed.then_some((What::ModeChange, "dir")),
        (Upper::Dir { .. }, Host::Missing) => same(What::Added, "dir"),
        (Upper::Dir { .. }, _) => same(What::TypeChange, "dir"),
        (Upper::File, Host::Missing) => same(What::Added, "file"),
        (Upper::File, Host::File) if e.same_content == Some(true) => mode_changed.then_some((What::ModeChange, "file")),
        (Upper::File, Host::File) => same(What::Modified, "file"),
        (Upper::File, _) => same(What::TypeChange, "file"),
        (Upper::Link(_), Host::Missing) => same(What::Added, "link"),
        (Upper::Link(t), Host::Link(h)) if t == h => None,
        (Upper::Link(_), Host::Link(_)) => same(What::Modified, "link"),
        (Upper::Link(_), _) => same(What::TypeChange, "link"),
        (Upper::Special(s), Host::Missing) => same(What::Added, s),
        (Upper::Special(s), Host::Special(h)) if s == h => same(What::Modified, s),
        (Upper::Special(s), _) => same(What::TypeChange, s),
        (Upper::Foreign(_), Host::Missing) => same(What::Added, "overlay entry"),
        (Upper::Foreign(_), _) => same(What::Modified, "overlay entry"),
    }
}

fn refused(e: &Entry, what: What) -> Option<String> {
    if what == What::Deleted {
        return None;
    }
    match &e.upper {
        Upper::Special("device") => Some("a device node: never made on the host".into()),
        Upper::Special("fifo") => Some("a FIFO: never made on the host".into()),
        Upper::Special(_) => Some("a socket: never made on the host".into()),
        Upper::Foreign(why) => Some(format!("{why}, which claude-shim's layers never hold")),
        Upper::Link(t) if !link_stays_inside(&e.rel, t) => Some(format!(
            "a link to {}, outside the project (only a relative link that stays inside is applied)",
            show(t)
        )),
        _ => None,
    }
}

/// A link at `rel` whose `target` is relative and, read from the link's
/// folder, never climbs above the project.
pub fn link_stays_inside(rel: &Path, target: &Path) -> bool {
    if target.as_os_str().is_empty() {
        return false;
    }
    let mut depth = rel.components().count().saturating_sub(1) as isize;
    for c in target.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

fn conflict(e: &Entry, since: &Since<'_>) -> Option<String> {
    if let Some(t) = e.host_tree_ctime {
        if t >= since.start_ns && since.touched.get(&show(&e.rel)) != Some(&t) {
            return Some("it, or something in it, changed on the host since the run began".into());
        }
    }
    match e.host_meta {
        Some(m) if since.changed(&e.rel, m.ctime_ns) => Some("changed on the host since the run began".into()),
        Some(_) => None,
        None if e.copied_up => Some("deleted on the host since the run began".into()),
        // Made new by the sandbox: nothing of the user's is there to lose.
        None if since.origins => None,
        None => {
            // Not there now, and the layer cannot say whether it was at the
            // start: only its folder's change can tell (a deletion or a
            // rename changes it).
            since
                .changed(&e.anchor, e.anchor_ctime)
                .then(|| format!("{} changed on the host since the run began", shown_dir(&e.anchor)))
        }
    }
}

fn shown_dir(p: &Path) -> String {
    if p.as_os_str().is_empty() {
        "the project's top folder".into()
    } else {
        format!("its folder {}/", show(p))
    }
}

#[cfg(test)]
mod tests;
