//! The API gateway of `claude-shim claude`: the agent's only way to the model
//! API, so that the credential never enters the sandbox. It runs in the proxy
//! helper (outside the sandbox, listening on 127.0.0.1:3180 inside the
//! sandbox's network namespace) and forwards the few paths Claude Code uses
//! to the caller's upstream (`ANTHROPIC_BASE_URL`, default
//! https://api.anthropic.com), with the caller's credential added there and
//! whatever the sandbox sent in its place dropped. One request per
//! connection; the request body goes up exactly as long as its
//! Content-Length says, the response comes back as it arrives (SSE). Each
//! request is logged with method, path, status, bytes and duration: never a
//! body, never a header value.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::json;

use super::log::Log;

/// Where the gateway listens inside the sandbox.
pub const PORT: u16 = 3180;
/// The annotation that asks for a gateway; its value is the upstream URL.
pub const ANNOTATION: &str = "run.claude-shim.gateway";
/// The base URL the agent is given.
pub const BASE_URL: &str = "http://127.0.0.1:3180";

/// The API paths Claude Code calls; everything else is refused so the key
/// cannot be spent on other endpoints (files, batches, admin...).
pub const ALLOWED: &[(&str, &str)] = &[("POST", "/v1/messages"), ("POST", "/v1/messages/count_tokens")];

/// The variables the credential is read from, outside, in this order.
pub const CREDENTIAL_VARS: &[&str] = &["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"];

const MAX_HEAD: usize = 64 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A model may think for minutes before its first byte; a dead upstream still ends.
const UPSTREAM_IDLE: Duration = Duration::from_secs(600);

/// Headers never passed up: the credential the sandbox holds (a placeholder),
/// the hop's own headers, and the framing this gateway sets itself.
const DROPPED: &[&str] = &[
    "x-api-key",
    "authorization",
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "te",
    "trailer",
    "upgrade",
    "content-length",
    "expect",
];

/// The beta flag the API wants with a Claude subscription's OAuth token.
const OAUTH_BETA: &str = "oauth-2025-04-20";

#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    /// `x-api-key`.
    ApiKey(String),
    /// `Authorization: Bearer`; `oauth` adds the beta flag OAuth tokens need.
    Bearer { token: String, oauth: bool },
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the value.
        match self {
            Self::ApiKey(_) => f.write_str("ApiKey(..)"),
            Self::Bearer { oauth, .. } => write!(f, "Bearer {{ oauth: {oauth} }}"),
        }
    }
}

impl Credential {
    /// The caller's credential from `vars` (name -> value), first set one wins.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Option<Self> {
        let set = |n: &str| get(n).filter(|v| !v.trim().is_empty());
        if let Some(k) = set("ANTHROPIC_API_KEY") {
            return Some(Self::ApiKey(k));
        }
        if let Some(t) = set("ANTHROPIC_AUTH_TOKEN") {
            return Some(Self::Bearer { token: t, oauth: false });
        }
        set("CLAUDE_CODE_OAUTH_TOKEN").map(|t| Self::Bearer { token: t, oauth: true })
    }

    pub fn from_env() -> Option<Self> {
        Self::from_vars(|n| std::env::var(n).ok())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// A path prefix of the base URL (no trailing slash), e.g. `/anthropic`.
    pub base_path: String,
}

impl Upstream {
    /// `http://HOST[:PORT][/PATH]` or `https://...`.
    pub fn parse(url: &str) -> Result<Self> {
        let (tls, rest) = if let Some(r) = url.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = url.strip_prefix("http://") {
            (false, r)
        } else {
            bail!("{url:?} is not an http:// or https:// URL");
        };
        let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(split);
        if path.contains(['?', '#']) {
            bail!("{url:?}: a base URL has no query or fragment");
        }
        let (host, port) = super::wire::parse_authority(authority, Some(if tls { 443 } else { 80 }))
            .map_err(|e| anyhow!("{url:?}: {e}"))?;
        let host = host.to_string();
        let host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
        Ok(Self {
            tls,
            host,
            port,
            base_path: path.trim_end_matches('/').to_owned(),
        })
    }

    fn host_header(&self) -> String {
        let h = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == if self.tls { 443 } else { 80 } {
            h
        } else {
            format!("{h}:{}", self.port)
        }
    }
}

pub struct Gateway {
    pub upstream: Upstream,
    credential: Option<Credential>,
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl Gateway {
    /// Reads the credential from this process's environment (it was started
    /// by the runtime, outside the sandbox) and the system's CA certificates.
    pub fn new(upstream_url: &str) -> Result<Self> {
        let upstream = Upstream::parse(upstream_url).context("read the gateway's upstream")?;
        let tls = if upstream.tls { Some(tls_config()?) } else { None };
        Ok(Self {
            upstream,
            credential: Credential::from_env(),
            tls,
        })
    }
}

fn tls_config() -> Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    for cert in found.certs {
        let _ = roots.add(cert);
    }
    if roots.is_empty() {
        bail!("load the system's CA certificates: none found (install Debian's ca-certificates)");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("set TLS versions")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// What the sandbox asked for, once checked.
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// Path and query as sent.
    pub target: String,
    /// The head to send upstream, without Host, credential and framing.
    pub headers: Vec<(String, Vec<u8>)>,
    pub content_length: u64,
    pub body_start: usize,
}

/// Ok(None): the head is incomplete. Err((status, why)): refused.
pub fn parse_request(buf: &[u8]) -> Result<Option<Request>, (&'static str, String)> {
    let mut headers = [httparse::EMPTY_HEADER; 100];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(("400 Bad Request", format!("malformed request: {e}"))),
    };
    let method = req.method.unwrap_or_default().to_owned();
    let target = req.path.unwrap_or_default().to_owned();
    let path = target.split(['?', '#']).next().unwrap_or_default();
    if !ALLOWED.iter().any(|(m, p)| *m == method && *p == path) {
        return Err((
            "403 Forbidden",
            format!("{method} {path} is not an API path the gateway forwards"),
        ));
    }
    let mut content_length = None;
    let mut out = Vec::new();
    for h in req.headers.iter() {
        let name = h.name.to_ascii_lowercase();
        if name == "transfer-encoding" {
            return Err((
                "411 Length Required",
                "a request body with Transfer-Encoding is not forwarded; send Content-Length".into(),
            ));
        }
        if name == "content-length" {
            let n = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| ("400 Bad Request", "Content-Length is not a number".to_owned()))?;
            if content_length.is_some_and(|c| c != n) {
                return Err(("400 Bad Request", "two different Content-Length headers".into()));
            }
            content_length = Some(n);
        }
        if DROPPED.contains(&name.as_str()) {
            continue;
        }
        out.push((h.name.to_owned(), h.value.to_vec()));
    }
    Ok(Some(Request {
        method,
        target,
        headers: out,
        content_length: content_length.unwrap_or(0),
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
    for (name, value) in &req.headers {
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

/// The error body Claude Code shows as it shows the API's own.
fn error(stream: &mut TcpStream, status: &str, kind: &str, text: &str) {
    let body = json!({"type": "error", "error": {"type": kind, "message": format!("claude-shim gateway: {text}")}})
        .to_string();
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

enum Conn {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Plain(s) => s.read(buf),
            Self::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Self::Plain(s) => s.write(buf),
            Self::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Self::Plain(s) => s.flush(),
            Self::Tls(s) => s.flush(),
        }
    }
}

fn connect(gw: &Gateway) -> Result<Conn> {
    let up = &gw.upstream;
    let addrs: Vec<SocketAddr> = (up.host.as_str(), up.port)
        .to_socket_addrs()
        .with_context(|| format!("resolve {}", up.host))?
        .collect();
    let mut errors = Vec::new();
    for a in addrs {
        match TcpStream::connect_timeout(&a, CONNECT_TIMEOUT) {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                let _ = s.set_read_timeout(Some(UPSTREAM_IDLE));
                let Some(config) = &gw.tls else {
                    return Ok(Conn::Plain(s));
                };
                let name = rustls::pki_types::ServerName::try_from(up.host.clone())
                    .map_err(|e| anyhow!("{}: {e}", up.host))?;
                let conn = rustls::ClientConnection::new(config.clone(), name).context("start TLS")?;
                return Ok(Conn::Tls(Box::new(rustls::StreamOwned::new(conn, s))));
            }
            Err(e) => errors.push(format!("connect {a}: {e}")),
        }
    }
    bail!("{}", errors.join("; "))
}

/// Serves one connection from the sandbox.
pub fn serve(mut stream: TcpStream, peer: SocketAddr, gw: &Gateway, log: &Log) {
    let started = Instant::now();
    let mut buf = Vec::with_capacity(8192);
    let mut chunk = [0u8; 8192];
    let logged = |method: &str, path: &str, status: u16, up: u64, down: u64, reason: Option<&str>| {
        let mut line = json!({"client": peer.to_string(), "proto": "gateway", "method": method, "path": path,
            "status": status, "bytes_up": up, "bytes_down": down, "ms": started.elapsed().as_millis() as u64});
        if let Some(r) = reason {
            line["decision"] = json!("deny");
            line["reason"] = json!(r);
        }
        log.write(line);
    };
    let req = loop {
        match parse_request(&buf) {
            Ok(Some(r)) => break r,
            Ok(None) if buf.len() < MAX_HEAD => {}
            Ok(None) => {
                return error(
                    &mut stream,
                    "431 Request Header Fields Too Large",
                    "invalid_request_error",
                    "request head too large",
                )
            }
            Err((status, why)) => {
                let (method, path) = first_line(&buf);
                logged(&method, &path, status[..3].parse().unwrap_or(400), 0, 0, Some(&why));
                return error(&mut stream, status, "permission_error", &why);
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let path = req.target.split('?').next().unwrap_or_default().to_owned();
    let result = forward(&mut stream, &buf[req.body_start..], &req, gw);
    match result {
        Ok((status, up, down)) => logged(&req.method, &path, status, up, down, None),
        Err(e) => {
            let why = format!("{}: {e:#}", gw.upstream.host_header());
            logged(&req.method, &path, 502, 0, 0, None);
            log.write(json!({"client": peer.to_string(), "proto": "gateway", "error": why}));
            error(&mut stream, "502 Bad Gateway", "api_error", &why);
        }
    }
}

fn first_line(buf: &[u8]) -> (String, String) {
    let line = buf.split(|b| *b == b'\n').next().unwrap_or_default();
    let text = String::from_utf8_lossy(line);
    let mut words = text.split_whitespace();
    let method = words.next().unwrap_or_default().chars().take(16).collect();
    let path = words
        .next()
        .unwrap_or_default()
        .split('?')
        .next()
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect();
    (method, path)
}

/// Sends the request up and the response down; returns the status and the
/// body bytes each way. An error before the response head reached the
/// client is the caller's to answer.
fn forward(client: &mut TcpStream, early: &[u8], req: &Request, gw: &Gateway) -> Result<(u16, u64, u64)> {
    let mut up = connect(gw)?;
    up.write_all(&upstream_head(req, &gw.upstream, gw.credential.as_ref()))
        .context("send the request")?;
    // Exactly the body: anything after it would be a second, unchecked request.
    let mut left = req.content_length;
    let first = early.len().min(left as usize);
    up.write_all(&early[..first]).context("send the request body")?;
    left -= first as u64;
    let mut chunk = vec![0u8; 64 * 1024];
    let _ = client.set_read_timeout(Some(UPSTREAM_IDLE));
    while left > 0 {
        let want = chunk.len().min(left as usize);
        let n = client.read(&mut chunk[..want]).context("read the request body")?;
        if n == 0 {
            bail!("the client closed before the end of its request body");
        }
        up.write_all(&chunk[..n]).context("send the request body")?;
        left -= n as u64;
    }
    up.flush().context("send the request")?;
    let mut head = Vec::new();
    let (status, rest) = loop {
        let n = up.read(&mut chunk).context("read the response")?;
        if n == 0 {
            bail!("the upstream closed without a response");
        }
        head.extend_from_slice(&chunk[..n]);
        match response_head(&head).map_err(|e| anyhow!(e))? {
            Some((len, status, rewritten)) => {
                client.write_all(&rewritten).context("answer the client")?;
                break (status, head.split_off(len));
            }
            None if head.len() > MAX_HEAD => bail!("the response head is too large"),
            None => {}
        }
    };
    let mut down = rest.len() as u64;
    if client.write_all(&rest).is_err() {
        return Ok((status, req.content_length, down));
    }
    // Each piece goes down as it arrives: server-sent events stream.
    loop {
        match up.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                if client.write_all(&chunk[..n]).is_err() {
                    break;
                }
                down += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // A TLS peer that closes without close_notify: the body ends here.
            Err(_) => break,
        }
    }
    let _ = client.shutdown(std::net::Shutdown::Write);
    Ok((status, req.content_length, down))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstreams_parse() {
        let u = Upstream::parse("https://api.anthropic.com").unwrap();
        assert_eq!(
            (u.tls, u.host.as_str(), u.port, u.base_path.as_str()),
            (true, "api.anthropic.com", 443, "")
        );
        assert_eq!(u.host_header(), "api.anthropic.com");
        let u = Upstream::parse("http://127.0.0.1:8080/llm/").unwrap();
        assert_eq!(
            (u.tls, u.host.as_str(), u.port, u.base_path.as_str()),
            (false, "127.0.0.1", 8080, "/llm")
        );
        assert_eq!(u.host_header(), "127.0.0.1:8080");
        let u = Upstream::parse("http://[::1]:9/").unwrap();
        assert_eq!(u.host_header(), "[::1]:9");
        for bad in [
            "ftp://x",
            "api.anthropic.com",
            "https://u@x/",
            "https://x/?a=1",
            "http://x:0",
        ] {
            assert!(Upstream::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_the_api_paths_pass() {
        let ok = b"POST /v1/messages?beta=true HTTP/1.1\r\nHost: 127.0.0.1:3180\r\nx-api-key: placeholder\r\nAuthorization: Bearer x\r\nanthropic-version: 2023-06-01\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\n{}";
        let r = parse_request(ok).unwrap().unwrap();
        assert_eq!(
            (r.method.as_str(), r.target.as_str(), r.content_length),
            ("POST", "/v1/messages?beta=true", 2)
        );
        assert_eq!(&ok[r.body_start..], b"{}");
        let names: Vec<&str> = r.headers.iter().map(|(n, _)| n.as_str()).collect();
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
            let e = parse_request(bad).unwrap_err();
            assert!(e.0.starts_with(status), "{}: {e:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse_request(b"POST /v1/messages HTTP/1.1\r\nHost"), Ok(None));
    }

    #[test]
    fn the_credential_is_the_callers() {
        let r = parse_request(
            b"POST /v1/messages HTTP/1.1\r\nx-api-key: sk-placeholder\r\nanthropic-beta: a,b\r\nContent-Length: 0\r\n\r\n",
        )
        .unwrap()
        .unwrap();
        let up = Upstream::parse("https://api.anthropic.com/base").unwrap();
        let head = String::from_utf8(upstream_head(&r, &up, Some(&Credential::ApiKey("sk-real".into())))).unwrap();
        assert_eq!(
            head,
            "POST /base/v1/messages HTTP/1.1\r\nHost: api.anthropic.com\r\nanthropic-beta: a,b\r\nx-api-key: sk-real\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        let oauth = Credential::Bearer {
            token: "tok".into(),
            oauth: true,
        };
        let head = String::from_utf8(upstream_head(&r, &up, Some(&oauth))).unwrap();
        assert!(head.contains("anthropic-beta: a,b,oauth-2025-04-20\r\n"), "{head}");
        assert!(head.contains("Authorization: Bearer tok\r\n") && !head.contains("placeholder"));
    }

    #[test]
    fn credentials_come_in_order() {
        let vars = |set: &'static [(&'static str, &'static str)]| {
            Credential::from_vars(move |n| set.iter().find(|(k, _)| *k == n).map(|(_, v)| v.to_string()))
        };
        assert_eq!(
            vars(&[("ANTHROPIC_API_KEY", "k"), ("ANTHROPIC_AUTH_TOKEN", "t")]),
            Some(Credential::ApiKey("k".into()))
        );
        assert_eq!(
            vars(&[("ANTHROPIC_API_KEY", " "), ("CLAUDE_CODE_OAUTH_TOKEN", "o")]),
            Some(Credential::Bearer {
                token: "o".into(),
                oauth: true
            })
        );
        assert_eq!(vars(&[]), None);
        assert_eq!(format!("{:?}", Credential::ApiKey("secret".into())), "ApiKey(..)");
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
