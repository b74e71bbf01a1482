//! Text that may come from a sandbox (a path it created, an API path it
//! requested, a host it named), made safe to print on the user's terminal:
//! a control character (ESC, CR, a newline...) or a bidirectional override
//! would let the sandbox retitle the terminal, rewrite earlier lines or
//! forge a line of claude-shim's own. Each is shown escaped instead (`\u{1b}`).

use std::borrow::Cow;

/// Whether `c` changes the terminal or how a line reads rather than showing.
fn unsafe_char(c: char) -> bool {
    // U+061C, U+200E/F, U+202A..E, U+2066..9: bidirectional marks and overrides.
    c.is_control()
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with each unsafe character escaped; borrowed when there is none.
pub fn escaped(s: &str) -> Cow<'_, str> {
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A file name's bytes (one a sandbox made) as printable text that names it
/// exactly: unsafe characters escaped as `escaped` does, a backslash
/// doubled, and each byte that is not UTF-8 written `\x{NN}`, so no two
/// names print alike and a printed name can be given back.
pub fn escaped_name(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                out.push_str("\\\\");
            } else if unsafe_char(c) {
                out.extend(c.escape_default());
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{{{b:02x}}}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_print_escaped_and_never_alike() {
        assert_eq!(escaped_name(b"a\x1b[31mred\n"), "a\\u{1b}[31mred\\n");
        assert_eq!(escaped_name(b"back\\slash"), "back\\\\slash");
        assert_eq!(escaped_name(b"bad\xff\xfe"), "bad\\x{ff}\\x{fe}");
        assert_ne!(escaped_name(b"\\u{1b}"), escaped_name(b"\x1b"));
        assert_eq!(escaped_name("名前".as_bytes()), "名前");
    }

    #[test]
    fn controls_and_overrides_are_escaped() {
        assert_eq!(
            escaped("POST /v1/\u{1b}]0;TITLE\u{7}\r\nclaude-shim: ok\u{9b}2J"),
            "POST /v1/\\u{1b}]0;TITLE\\u{7}\\r\\nclaude-shim: ok\\u{9b}2J"
        );
        assert_eq!(escaped("a\u{202e}txt.exe\u{7f}"), "a\\u{202e}txt.exe\\u{7f}");
    }

    #[test]
    fn plain_text_is_kept_as_is() {
        for s in [
            "évil.example:443 (not on the allowlist)",
            "名前/ファイル",
            "tab-free \"quoted\" \\ text",
            "",
        ] {
            assert!(matches!(escaped(s), Cow::Borrowed(b) if b == s), "{s}");
        }
    }
}
