//! `changes --diff`: one change as git shows it, a header (`diff --git`,
//! new or deleted file mode, old and new mode) and a unified diff of the
//! lines (the `similar` crate), or one line naming a binary file, a file
//! past the size shown, or a link's target. Pure: the caller reads the
//! bytes. The names are the sandbox's, printed escaped.

use std::fmt::Write as _;
use std::path::Path;

use similar::TextDiff;

use super::change::{Change, What};
use super::layer::show;

/// What the diff shows of one side of a change.
pub enum Side<'a> {
    /// Nothing there (an added or deleted path).
    None,
    /// A file's bytes (None: past the size a diff shows).
    File(Option<&'a [u8]>),
    /// A link's target.
    Link(&'a Path),
    /// A folder, device, FIFO or socket: named, no content.
    Other(&'a str),
}

/// Files larger than this are named, not diffed.
pub const SHOWN_LIMIT: u64 = 8 << 20;

/// git's test: a NUL byte in the first 8000 bytes makes a file binary; so
/// does text that is not UTF-8, which the diff could not print.
fn text(b: &[u8]) -> Option<&str> {
    if b[..b.len().min(8000)].contains(&0) {
        return None;
    }
    std::str::from_utf8(b).ok()
}

/// The diff of `c`, `old` being the project's side and `new` the layer's.
pub fn diff(c: &Change, old: &Side<'_>, new: &Side<'_>) -> String {
    let p = show(&c.rel);
    let mut out = format!("diff --git a/{p} b/{p}\n");
    let mode = |m: Option<u32>| m.map(|m| format!("{m:o}")).unwrap_or_default();
    match c.what {
        What::Added => {
            let _ = writeln!(out, "new {} mode {}", c.kind, mode(c.mode));
        }
        What::Deleted => {
            let _ = writeln!(out, "deleted {} mode {}", c.kind, mode(c.old_mode));
        }
        What::TypeChange => {
            let _ = writeln!(out, "type change: {} -> {}", c.was, c.kind);
        }
        What::Modified | What::ModeChange if c.mode != c.old_mode => {
            let _ = writeln!(out, "old mode {}\nnew mode {}", mode(c.old_mode), mode(c.mode));
        }
        _ => {}
    }
    // A folder's change is its header; its entries are changes of their own.
    if c.what == What::ModeChange || (c.kind == "dir" && c.what != What::Deleted) {
        return out;
    }
    let bytes = |s: &Side<'_>| -> Option<Vec<u8>> {
        match s {
            Side::None => Some(Vec::new()),
            Side::File(Some(b)) => Some(b.to_vec()),
            Side::File(None) | Side::Other(_) => None,
            // git shows a link as a file holding its target, no newline.
            Side::Link(t) => Some(show(t).into_bytes()),
        }
    };
    let names = (
        if matches!(old, Side::None) {
            "/dev/null".to_owned()
        } else {
            format!("a/{p}")
        },
        if matches!(new, Side::None) {
            "/dev/null".to_owned()
        } else {
            format!("b/{p}")
        },
    );
    let (Some(a), Some(b)) = (bytes(old), bytes(new)) else {
        let what = |s: &Side<'_>| match s {
            Side::File(None) => format!("larger than {} MiB", SHOWN_LIMIT >> 20),
            Side::Other(k) => format!("a {k}"),
            _ => String::new(),
        };
        let why = [what(old), what(new)]
            .into_iter()
            .filter(|w| !w.is_empty())
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(out, "Files {} and {} differ ({why}: not shown)", names.0, names.1);
        return out;
    };
    match (text(&a), text(&b)) {
        (Some(ta), Some(tb)) => {
            // What the sandbox wrote goes to the terminal: escaped line by line.
            let ta = escape_lines(ta);
            let tb = escape_lines(tb);
            let d = TextDiff::from_lines(ta.as_str(), tb.as_str());
            let _ = write!(out, "{}", d.unified_diff().context_radius(3).header(&names.0, &names.1));
        }
        _ => {
            let _ = writeln!(out, "Binary files {} and {} differ", names.0, names.1);
        }
    }
    out
}

/// Each line's unsafe characters escaped, the line breaks kept.
fn escape_lines(t: &str) -> String {
    t.split_inclusive('\n')
        .map(|l| {
            let (body, nl) = match l.strip_suffix('\n') {
                Some(b) => (b, "\n"),
                None => (l, ""),
            };
            format!("{}{nl}", crate::terminal::escaped(body))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn change(what: What, kind: &'static str, was: &'static str) -> Change {
        Change {
            rel: PathBuf::from("src/a.txt"),
            what,
            kind,
            was,
            mode: Some(0o644),
            old_mode: Some(0o644),
            target: None,
            host_run: None,
            conflict: None,
            refused: None,
        }
    }

    #[test]
    fn a_modified_text_file_is_a_unified_diff() {
        let c = change(What::Modified, "file", "file");
        let d = diff(&c, &Side::File(Some(b"one\ntwo\n")), &Side::File(Some(b"one\n2\n")));
        assert_eq!(
            d,
            "diff --git a/src/a.txt b/src/a.txt\n--- a/src/a.txt\n+++ b/src/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"
        );
    }

    #[test]
    fn added_binary_deleted_and_mode_changes_read_as_in_git() {
        let d = diff(
            &change(What::Added, "file", "nothing"),
            &Side::None,
            &Side::File(Some(b"x\n")),
        );
        assert!(
            d.contains("new file mode 644\n--- /dev/null\n+++ b/src/a.txt\n@@ -0,0 +1 @@\n+x\n"),
            "{d}"
        );
        let d = diff(
            &change(What::Modified, "file", "file"),
            &Side::File(Some(b"a\0b")),
            &Side::File(Some(b"c")),
        );
        assert!(d.ends_with("Binary files a/src/a.txt and b/src/a.txt differ\n"), "{d}");
        let mut m = change(What::ModeChange, "file", "file");
        m.mode = Some(0o4755);
        let d = diff(&m, &Side::None, &Side::None);
        assert!(d.ends_with("old mode 644\nnew mode 4755\n"), "{d}");
        let d = diff(
            &change(What::Deleted, "file", "file"),
            &Side::File(Some(b"x\n")),
            &Side::None,
        );
        assert!(
            d.contains("deleted file mode 644") && d.contains("+++ /dev/null"),
            "{d}"
        );
        let d = diff(
            &change(What::Added, "device", "nothing"),
            &Side::None,
            &Side::Other("device"),
        );
        assert!(d.contains("(a device: not shown)"), "{d}");
    }

    #[test]
    fn what_the_sandbox_wrote_reaches_the_terminal_escaped() {
        let c = change(What::Added, "file", "nothing");
        let d = diff(&c, &Side::None, &Side::File(Some(b"\x1b]0;owned\x07\n")));
        assert!(d.contains("+\\u{1b}]0;owned\\u{7}\n") && !d.contains('\x1b'), "{d}");
    }
}
