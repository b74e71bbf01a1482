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

#[cfg(test)]
mod tests {
    use super::*;

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
