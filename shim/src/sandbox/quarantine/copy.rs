//! A move across filesystems (a project on /tmp, the quarantine in the
//! home): the entry copied through two directory handles, nothing followed
//! on either side, bounded in size and depth, the partial copy removed when
//! it cannot be finished.

use std::path::Path;

use crate::hostfs::{Dir, Kind};

/// What one entry may hold: a quarantine is for settings and scripts, not
/// for a tree someone should look at where it is.
const BUDGET: u64 = 64 << 20;
const MAX_DEPTH: usize = 64;

pub(super) fn tree(from: &Dir, rel: &Path, to: &Dir, to_rel: &Path) -> Result<(), String> {
    let mut budget = BUDGET;
    let r = copy(from, rel, to, to_rel, &mut budget, 0);
    if r.is_err() {
        let _ = to.remove_all(to_rel);
    }
    r
}

fn copy(from: &Dir, rel: &Path, to: &Dir, to_rel: &Path, budget: &mut u64, depth: usize) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "copy {}: deeper than {MAX_DEPTH} levels",
            from.join(rel).display()
        ));
    }
    let st = from
        .stat(rel)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("copy {}: it is gone", from.join(rel).display()))?;
    match st.kind {
        Kind::File => {
            let data = from.read(rel, *budget).map_err(|e| e.to_string())?;
            *budget -= data.len() as u64;
            to.write_new(to_rel, &data, st.mode & 0o777).map_err(|e| e.to_string())
        }
        Kind::Dir => {
            to.create_dir(to_rel, st.mode & 0o777 | 0o700)
                .map_err(|e| e.to_string())?;
            for (name, _) in from.list(rel).map_err(|e| e.to_string())? {
                copy(from, &rel.join(&name), to, &to_rel.join(&name), budget, depth + 1)?;
            }
            Ok(())
        }
        Kind::Link => {
            let target = from.read_link(rel).map_err(|e| e.to_string())?.unwrap_or_default();
            to.replace_symlink(to_rel, &target).map_err(|e| e.to_string())
        }
        // A fifo, socket or device: nothing a tool runs code from.
        Kind::Other => Ok(()),
    }
}
