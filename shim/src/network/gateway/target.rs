//! The request target the gateway forwards: rebuilt from the few paths and
//! the one query parameter Claude Code sends, never passed through, so that
//! nothing riding along (`?/../../v1/files`, a fragment, a dot segment, an
//! absolute URL) reaches an upstream or a proxy in front of it that might
//! normalise it into another endpoint. Pure logic.

/// The API paths Claude Code calls; everything else is refused so the key
/// cannot be spent on other endpoints (files, batches, admin...).
pub const ALLOWED: &[(&str, &str)] = &[("POST", "/v1/messages"), ("POST", "/v1/messages/count_tokens")];

/// The query parameters Claude Code sends (`?beta=true` with any beta header).
const QUERY: &[&str] = &["beta=true"];

/// The target to forward for `method` and the target as sent, or why not.
pub fn normalise(method: &str, target: &str) -> Result<String, String> {
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    let Some((_, allowed)) = ALLOWED.iter().find(|(m, p)| *m == method && *p == path) else {
        return Err(format!("{method} {path} is not an API path the gateway forwards"));
    };
    let mut out = (*allowed).to_owned();
    let Some(query) = query else {
        return Ok(out);
    };
    let mut kept: Vec<&str> = Vec::new();
    for param in query.split('&') {
        match QUERY.iter().find(|q| **q == param) {
            Some(q) if !kept.contains(q) => kept.push(q),
            _ => {
                return Err(format!(
                    "{method} {path}: the query {query:?} is not one the gateway forwards"
                ))
            }
        }
    }
    out.push('?');
    out.push_str(&kept.join("&"));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_codes_targets_pass_as_they_are() {
        for t in [
            "/v1/messages",
            "/v1/messages?beta=true",
            "/v1/messages/count_tokens?beta=true",
        ] {
            assert_eq!(normalise("POST", t).as_deref(), Ok(t));
        }
    }

    #[test]
    fn anything_else_is_refused() {
        for (m, t) in [
            ("GET", "/v1/messages"),
            ("POST", "/v1/files"),
            ("POST", "/v1/messages/"),
            ("POST", "/v1/messages/../files"),
            ("POST", "/v1/messages/batches"),
            ("POST", "//v1/messages"),
            ("POST", "/v1/%6dessages"),
            ("POST", "http://evil/v1/messages"),
            ("POST", "/v1/messages#x"),
            ("POST", "/v1/messages?/../../v1/files"),
            ("POST", "/v1/messages?beta=true&x=1"),
            ("POST", "/v1/messages?beta=true&beta=true"),
            ("POST", "/v1/messages?beta=false"),
            ("POST", "/v1/messages?"),
            ("POST", "/v1/messages?beta=true#/../files"),
        ] {
            assert!(normalise(m, t).is_err(), "{m} {t}");
        }
        assert_eq!(
            normalise("POST", "/v1/messages?/../../v1/files").unwrap_err(),
            "POST /v1/messages: the query \"/../../v1/files\" is not one the gateway forwards"
        );
    }
}
