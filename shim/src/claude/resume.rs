//! Claude Code's resume hint, as the whole agent's terminal shows it. At
//! exit Claude Code prints `Resume this session with:` and `claude --resume
//! ID` (2.1: `claude [--worktree NAME ]--resume ID`, dimmed). Under
//! `claude-shim claude` the session lives in the agent's configuration
//! directory, so that command on the host says `No conversation found` (and
//! would run the agent unsandboxed); what resumes it is `claude-shim claude
//! -- --resume ID`. The relay of the sandbox's terminal passes its output
//! through `Hint`, which puts the working command in the hint's place.
//! With `--per-command`, `claude` writes to the user's terminal itself and
//! its hint would resume the session with nothing sandboxed: `claude`
//! says so after it (`per_command_note`).

/// What Claude Code prints before the command.
const HINT: &[u8] = b"Resume this session with:";
const CLAUDE: &[u8] = b"claude ";
/// A tail of output is held back only when it could be the start of the
/// hint this long or longer: holding a lone `R` would delay a keystroke's echo.
const HOLD_FROM: usize = 8;

/// A streaming rewriter of the hint.
pub struct Hint {
    /// `claude-shim [--root R] claude [--policy P] --`, then a space.
    command: Vec<u8>,
    pending: Vec<u8>,
}

/// The end of the terminal sequence or line break starting at `b[0]`, if
/// it is one: CSI sequences (`ESC [ ... final`), `\r`, `\n`. None: not one;
/// Some(None): cut off at the end of `b`.
fn skip(b: &[u8]) -> Option<Option<usize>> {
    match b.first() {
        Some(b'\r' | b'\n') => Some(Some(1)),
        Some(0x1b) => match b.get(1) {
            None => Some(None),
            Some(b'[') => match b[2..].iter().position(|c| (0x40..=0x7e).contains(c)) {
                Some(k) => Some(Some(k + 3)),
                None => Some(None),
            },
            Some(_) => None,
        },
        _ => None,
    }
}

impl Hint {
    pub fn new(command: &str) -> Self {
        let mut command = command.as_bytes().to_vec();
        command.push(b' ');
        Self {
            command,
            pending: Vec::new(),
        }
    }

    /// The output to show for `chunk`; at `end`, everything held too.
    pub fn feed(&mut self, chunk: &[u8], end: bool) -> Vec<u8> {
        self.pending.extend_from_slice(chunk);
        let buf = std::mem::take(&mut self.pending);
        let mut out = Vec::with_capacity(buf.len() + self.command.len());
        let mut i = 0;
        loop {
            let Some(k) = buf[i..].windows(HINT.len()).position(|w| w == HINT) else {
                // A tail that may be the hint's start waits for the next chunk.
                let rest = &buf[i..];
                let hold = (HOLD_FROM..HINT.len().min(rest.len() + 1))
                    .rev()
                    .find(|n| rest.ends_with(&HINT[..*n]))
                    .filter(|_| !end)
                    .unwrap_or(0);
                out.extend_from_slice(&rest[..rest.len() - hold]);
                self.pending = rest[rest.len() - hold..].to_vec();
                return out;
            };
            let start = i + k;
            let mut j = start + HINT.len();
            // Past the colour changes and the line break to the command.
            let cut = loop {
                match skip(&buf[j..]) {
                    Some(Some(n)) => j += n,
                    Some(None) => break true,
                    None => break false,
                }
            };
            let partial = cut || (buf.len() - j < CLAUDE.len() && CLAUDE.starts_with(&buf[j..]));
            if partial && !end {
                out.extend_from_slice(&buf[i..start]);
                self.pending = buf[start..].to_vec();
                return out;
            }
            out.extend_from_slice(&buf[i..j]);
            i = j;
            if buf[j..].starts_with(CLAUDE) {
                out.extend_from_slice(&self.command);
                i = j + CLAUDE.len();
            }
        }
    }
}

/// `claude-shim` with the `--root` of this run when it is not the default,
/// `claude`, `--per-command` if it was, the `--policy` given, and `--`: the
/// start of the command that resumes a session of this agent.
pub fn command(root: Option<&std::path::Path>, per_command: bool, policy: Option<&str>) -> String {
    let mut c = String::from("claude-shim");
    if let Some(r) = root {
        c.push_str(&format!(" --root {}", quoted(&r.to_string_lossy())));
    }
    c.push_str(" claude");
    if per_command {
        c.push_str(" --per-command");
    }
    if let Some(p) = policy {
        c.push_str(&format!(" --policy {}", quoted(p)));
    }
    c.push_str(" --");
    c
}

/// What `claude --per-command` prints after an interactive session.
pub fn per_command_note(command: &str) -> String {
    format!(
        "claude-shim: to resume this session with its commands sandboxed: {command} --resume ID (the ID above), \
         or {command} --continue"
    )
}

/// `s` as one shell word.
fn quoted(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:@%+,".contains(&b))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Claude Code 2.1.197 writes at exit (chalk's dim around each line).
    const EXIT: &[u8] =
        b"\x1b[2m\x1b[22m\n\x1b[2mResume this session with:\x1b[22m\n\x1b[2mclaude --resume 0b9d2f4e-1c3a-4c55-9d2e-7f1e8a6b3c21\x1b[22m\n";

    fn all(h: &mut Hint, chunks: &[&[u8]]) -> String {
        let mut out = Vec::new();
        for (n, c) in chunks.iter().enumerate() {
            out.extend(h.feed(c, n + 1 == chunks.len()));
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_hint_names_claude_shim() {
        let want = "\x1b[2m\x1b[22m\n\x1b[2mResume this session with:\x1b[22m\n\x1b[2mclaude-shim claude -- --resume 0b9d2f4e-1c3a-4c55-9d2e-7f1e8a6b3c21\x1b[22m\n";
        assert_eq!(all(&mut Hint::new("claude-shim claude --"), &[EXIT]), want);
        // Cut anywhere but just inside `Resume t` (Claude Code writes the
        // hint in one write, which a pty hands on whole), the same.
        let hint = EXIT.windows(HINT.len()).position(|w| w == HINT).unwrap();
        for at in (0..EXIT.len()).filter(|at| !(hint + 1..hint + HOLD_FROM).contains(at)) {
            let mut h = Hint::new("claude-shim claude --");
            assert_eq!(all(&mut h, &[&EXIT[..at], &EXIT[at..]]), want, "cut at {at}");
        }
        let worktree = b"Resume this session with:\nclaude --worktree w1 --resume X\n";
        assert_eq!(
            all(&mut Hint::new("claude-shim claude --"), &[worktree]),
            "Resume this session with:\nclaude-shim claude -- --worktree w1 --resume X\n"
        );
    }

    #[test]
    fn other_output_passes_at_once() {
        let mut h = Hint::new("x");
        assert_eq!(h.feed(b"R", false), b"R");
        assert_eq!(h.feed(b"esume", false), b"esume");
        assert_eq!(
            h.feed(b"run claude --resume later\nResume this", false),
            b"run claude --resume later\n"
        );
        assert_eq!(h.feed(b" file", true), b"Resume this file");
        assert_eq!(
            all(&mut Hint::new("x"), &[b"Resume this session with: later"]),
            "Resume this session with: later"
        );
    }

    #[test]
    fn the_command_carries_root_and_policy() {
        assert_eq!(command(None, false, None), "claude-shim claude --");
        assert_eq!(
            command(Some(std::path::Path::new("/tmp/my root")), true, Some("p.toml")),
            "claude-shim --root '/tmp/my root' claude --per-command --policy p.toml --"
        );
    }
}
