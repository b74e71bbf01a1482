//! The HTTP heads the gateway reads and writes: the sandbox's request checked
//! against the API paths it forwards (`target`) and cut down to Claude
//! Code's headers (`headers`), rewritten for the upstream with the caller's
//! credential, and the upstream's response head passed down. Pure logic: no
//! sockets.

use claude_shim_bundle::policy::values::ServerTool;

use super::headers::Judged;
use super::target;
use super::upstream::{Credential, Upstream};
use crate::network::wire::{body_length, BodyLength};

/// The beta flag the API wants with a Claude subscription's OAuth token.
const OAUTH_BETA: &str = "oauth-2025-04-20";

/// What the sandbox asked for, once checked.
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// Path and query to forward, rebuilt (`target`).
    pub target: String,
    /// The head to send upstream, without Host, credential and framing
    /// (`headers`), and what was dropped from it.
    pub headers: Judged,
    pub content_length: u64,
    /// The client waits for `100 Continue` before its body.
    pub expects_continue: bool,
    pub body_start: usize,
}

/// Ok(None): the head is incomplete. Err((status, why)): refused.
/// `allowed`: the server tools whose beta flags may pass.
pub fn parse_request(buf: &[u8], allowed: &[ServerTool]) -> Result<Option<Request>, (&'static str, String)> {
    let mut headers = [httparse::EMPTY_HEADER; 100];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(("400 Bad Request", format!("malformed request: {e}"))),
    };
    let method = req.method.unwrap_or_default().to_owned();
    let target = target::normalise(&method, req.path.unwrap_or_default()).map_err(|why| ("403 Forbidden", why))?;
    let content_length = body_length(req.headers).map_err(|e| {
        let status = match e {
            BodyLength::Encoded => "411 Length Required",
            BodyLength::Bad(_) => "400 Bad Request",
        };
        (status, e.why().to_owned())
    })?;
    let mut expects_continue = false;
    let mut judged = Judged::default();
    for h in req.headers.iter() {
        let name = h.name.to_ascii_lowercase();
        if name == "expect" && h.value.eq_ignore_ascii_case(b"100-continue") {
            expects_continue = true;
        }
        judged.add(h.name, h.value, allowed);
    }
    Ok(Some(Request {
        method,
        target,
        headers: judged,
        content_length,
        expects_continue,
        body_start: len,
    }))
}

/// The head sent upstream: the checked request under the base path, the
/// upstream's Host, the caller's credential, one request per connection.
pub fn upstream_head(req: &Request, up: &Upstream, cred: Option<&Credential>) -> Vec<u8> {
    let mut head = format!("{} {}{} HTTP/1.1\r\n", req.method, up.base_path, req.target).into_bytes();
    head.extend_from_slice(format!("Host: {}\r\n", up.host_header()).as_bytes());
    let oauth = matches!(cred, Some(Credential::Bearer { oauth: true, .. }));
    let mut beta_seen = false;
    for (name, value) in &req.headers.forwarded {
        head.extend_from_slice(name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value);
        if oauth && name.eq_ignore_ascii_case("anthropic-beta") {
            beta_seen = true;
            if !String::from_utf8_lossy(value)
                .split(',')
                .any(|b| b.trim() == OAUTH_BETA)
            {
                head.extend_from_slice(format!(",{OAUTH_BETA}").as_bytes());
            }
        }
        head.extend_from_slice(b"\r\n");
    }
    if oauth && !beta_seen {
        head.extend_from_slice(format!("anthropic-beta: {OAUTH_BETA}\r\n").as_bytes());
    }
    match cred {
        Some(Credential::ApiKey(k)) => head.extend_from_slice(format!("x-api-key: {k}\r\n").as_bytes()),
        Some(Credential::Bearer { token, .. }) => {
            head.extend_from_slice(format!("Authorization: Bearer {token}\r\n").as_bytes())
        }
        None => {}
    }
    head.extend_from_slice(format!("Content-Length: {}\r\nConnection: close\r\n\r\n", req.content_length).as_bytes());
    head
}

/// The response head passed down, with `Connection: close` (the client must
/// not reuse a connection this gateway closes). Returns the head's length in
/// `buf` and the status code, or None while incomplete.
pub fn response_head(buf: &[u8]) -> Result<Option<(usize, u16, Vec<u8>)>, String> {
    let mut headers = [httparse::EMPTY_HEADER; 100];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(format!("malformed response: {e}")),
    };
    let code = resp.code.unwrap_or(0);
    let mut head = format!("HTTP/1.1 {code} {}\r\n", resp.reason.unwrap_or("")).into_bytes();
    for h in resp.headers.iter() {
        if matches!(h.name.to_ascii_lowercase().as_str(), "connection" | "keep-alive") {
            continue;
        }
        head.extend_from_slice(h.name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(h.value);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Some((len, code, head)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_api_paths_pass() {
        let ok = b"POST /v1/messages?beta=true HTTP/1.1\r\nHost: 127.0.0.1:3180\r\nx-api-key: placeholder\r\nAuthorization: Bearer x\r\nanthropic-version: 2023-06-01\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\n{}";
        let r = parse_request(ok, &[]).unwrap().unwrap();
        assert_eq!(
            (r.method.as_str(), r.target.as_str(), r.content_length),
            ("POST", "/v1/messages?beta=true", 2)
        );
        assert_eq!(&ok[r.body_start..], b"{}");
        let names: Vec<&str> = r.headers.forwarded.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["anthropic-version"], "credential, host and framing are dropped");
        for (bad, status) in [
            (&b"GET /v1/models HTTP/1.1\r\n\r\n"[..], "403"),
            (b"POST /v1/files HTTP/1.1\r\n\r\n", "403"),
            (b"POST /v1/messages/../files HTTP/1.1\r\n\r\n", "403"),
            (b"POST /v1/messages/batches HTTP/1.1\r\n\r\n", "403"),
            (b"POST http://evil/v1/messages HTTP/1.1\r\n\r\n", "403"),
            (
                b"POST /v1/messages HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                "411",
            ),
            (
                b"POST /v1/messages HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                "400",
            ),
        ] {
            let e = parse_request(bad, &[]).unwrap_err();
            assert!(e.0.starts_with(status), "{}: {e:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse_request(b"POST /v1/messages HTTP/1.1\r\nHost", &[]), Ok(None));
    }

    #[test]
    fn the_credential_is_the_callers() {
        let r = parse_request(
            b"POST /v1/messages HTTP/1.1\r\nx-api-key: sk-placeholder\r\nanthropic-beta: effort-2025-11-24,b\r\nContent-Length: 0\r\n\r\n",
            &[],
        )
        .unwrap()
        .unwrap();
        let up = Upstream::parse("https://api.anthropic.com/base").unwrap();
        let head = String::from_utf8(upstream_head(&r, &up, Some(&Credential::ApiKey("sk-real".into())))).unwrap();
        assert_eq!(
            head,
            "POST /base/v1/messages HTTP/1.1\r\nHost: api.anthropic.com\r\nanthropic-beta: effort-2025-11-24\r\nx-api-key: sk-real\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        let oauth = Credential::Bearer {
            token: "tok".into(),
            oauth: true,
        };
        let head = String::from_utf8(upstream_head(&r, &up, Some(&oauth))).unwrap();
        assert!(
            head.contains("anthropic-beta: effort-2025-11-24,oauth-2025-04-20\r\n"),
            "{head}"
        );
        assert!(head.contains("Authorization: Bearer tok\r\n") && !head.contains("placeholder"));
    }

    #[test]
    fn responses_close_their_connection() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\nevent: x";
        let (len, code, head) = response_head(raw).unwrap().unwrap();
        assert_eq!((code, &raw[len..]), (200, &b"event: x"[..]));
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(response_head(b"HTTP/1.1 200 OK\r\n"), Ok(None));
    }
}
