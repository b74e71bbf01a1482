//! A minimal reader of git's config syntax, for the few keys the git pass
//! (`compile::mounts::git`) and the classifier need from a repository's own
//! `config` (`core.hooksPath`, `core.worktree`, `extensions.worktreeConfig`,
//! `include.path`): sections with or without a
//! subsection, `#`/`;` comments, quoted values with git's escapes, and
//! continuation lines. What it cannot read is skipped, never guessed: the
//! worst a misread does is protect one path more or one less than git would
//! use, and the quarantine at exit still sees what changed.

/// One `key = value` line: section and key lowercased as git compares them,
/// the subsection as written. A key without `=` is a boolean true (`None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub section: String,
    pub subsection: Option<String>,
    pub key: String,
    pub value: Option<String>,
}

impl Entry {
    /// `include.path` or `includeIf.<condition>.path`: a file git reads as
    /// part of this config (every condition counts: which holds depends on
    /// where git runs).
    pub(crate) fn is_include(&self) -> bool {
        self.key == "path" && (self.section == "include" || self.section == "includeif")
    }
}

/// The entries of `text`, in order.
pub(crate) fn parse(text: &str) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut subsection: Option<String> = None;
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let mut rest = line.trim_start();
        if rest.starts_with('[') {
            let Some((head, after)) = header(rest) else {
                // A malformed header: what follows belongs to no section.
                section.clear();
                subsection = None;
                continue;
            };
            (section, subsection) = head;
            rest = after.trim_start();
        }
        if rest.is_empty() || rest.starts_with('#') || rest.starts_with(';') || section.is_empty() {
            continue;
        }
        let name_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(rest.len());
        if name_len == 0 {
            continue;
        }
        let key = rest[..name_len].to_ascii_lowercase();
        let after = rest[name_len..].trim_start();
        let value = match after.strip_prefix('=') {
            Some(v) => match value(v, &mut lines) {
                Some(v) => Some(v),
                None => continue,
            },
            None if after.is_empty() || after.starts_with('#') || after.starts_with(';') => None,
            None => continue,
        };
        out.push(Entry {
            section: section.clone(),
            subsection: subsection.clone(),
            key,
            value,
        });
    }
    out
}

/// The last value of `section.key` outside any subsection (git's rule for
/// single-valued keys: the last one wins).
pub(crate) fn last<'a>(entries: &'a [Entry], section: &str, key: &str) -> Option<&'a Entry> {
    entries
        .iter()
        .rev()
        .find(|e| e.section == section && e.subsection.is_none() && e.key == key)
}

/// `[section]`, `[section "sub"]` or the old `[section.sub]`, and what
/// follows the `]` on the same line (git allows a key there).
type Header = (String, Option<String>);

fn header(line: &str) -> Option<(Header, &str)> {
    let inner = &line[1..];
    let name_len = inner
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.'))
        .unwrap_or(inner.len());
    let name = &inner[..name_len];
    let rest = &inner[name_len..];
    if name.is_empty() {
        return None;
    }
    if let Some(after) = rest.strip_prefix(']') {
        return Some(match name.split_once('.') {
            Some((s, sub)) => ((s.to_ascii_lowercase(), Some(sub.to_ascii_lowercase())), after),
            None => ((name.to_ascii_lowercase(), None), after),
        });
    }
    let quoted = rest.trim_start().strip_prefix('"')?;
    let mut sub = String::new();
    let mut chars = quoted.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => sub.push(chars.next()?.1),
            '"' => {
                let after = quoted[i + 1..].strip_prefix(']')?;
                return Some(((name.to_ascii_lowercase(), Some(sub)), after));
            }
            _ => sub.push(c),
        }
    }
    None
}

/// A value after `=`: quotes removed, escapes applied, comments dropped,
/// surrounding blanks trimmed (not those inside quotes), a trailing
/// backslash joining the next line. None when malformed.
fn value<'a>(first: &'a str, more: &mut impl Iterator<Item = &'a str>) -> Option<String> {
    let mut out = String::new();
    // Length of `out` up to its last character that is not trailing blank.
    let mut kept = 0;
    let mut quoted = false;
    let mut line = first;
    'lines: loop {
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => quoted = !quoted,
                '\\' => match chars.next() {
                    None => {
                        line = more.next()?;
                        continue 'lines;
                    }
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some('b') => {
                        out.pop();
                    }
                    Some(c @ ('"' | '\\')) => out.push(c),
                    Some(_) => return None,
                },
                '#' | ';' if !quoted => break 'lines,
                c if c.is_whitespace() && !quoted => {
                    if !out.is_empty() {
                        out.push(c);
                    }
                    continue;
                }
                c => out.push(c),
            }
            kept = out.len();
        }
        break;
    }
    if quoted {
        return None;
    }
    out.truncate(kept);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(text: &str, section: &str, key: &str) -> Option<Option<String>> {
        last(&parse(text), section, key).map(|e| e.value.clone())
    }

    #[test]
    fn reads_what_git_writes() {
        let text = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\thooksPath = .githooks\n\
                    [remote \"origin\"]\n\turl = x\n[include]\n\tpath = ../shared.gitconfig\n";
        assert_eq!(get(text, "core", "hookspath"), Some(Some(".githooks".into())));
        assert_eq!(get(text, "include", "path"), Some(Some("../shared.gitconfig".into())));
        assert_eq!(
            get(text, "remote", "url"),
            None,
            "a subsection's key is not the section's"
        );
        let e = parse(text);
        let url = e.iter().find(|e| e.key == "url").unwrap();
        assert_eq!(url.subsection.as_deref(), Some("origin"));
    }

    #[test]
    fn quotes_escapes_comments_and_continuations() {
        let text = "[CORE] HooksPath = \"my hooks\" # why\n";
        assert_eq!(get(text, "core", "hookspath"), Some(Some("my hooks".into())));
        let text = "[core]\nhooksPath = a\\\n/b ; c\nhooksPath = \"q\\\"x\"\n";
        assert_eq!(get(text, "core", "hookspath"), Some(Some("q\"x".into())));
        assert_eq!(parse(text)[0].value.as_deref(), Some("a/b"));
        let text = "[extensions]\n\tworktreeConfig\n";
        assert_eq!(get(text, "extensions", "worktreeconfig"), Some(None));
        let text = "[core.x]\nhooksPath = a\n[core]\n  hooksPath =   spaced  out   \n";
        assert_eq!(get(text, "core", "hookspath"), Some(Some("spaced  out".into())));
    }

    #[test]
    fn malformed_lines_are_skipped() {
        let text = "[core\nhooksPath = a\n[core]\nhooksPath = \"open\n= x\n[core \"sub]\nk = v\n";
        assert_eq!(get(text, "core", "hookspath"), None);
        assert!(parse("hooksPath = outside\n").is_empty());
        assert!(parse("\u{0}\u{fffd}[]]]\n[ ]\n").is_empty());
    }
}
