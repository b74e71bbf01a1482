//! One connection from the sandbox, served: its request head read and
//! checked, its body read whole and judged, the request sent up and the
//! response streamed down, one log line per request (and one for what was
//! dropped from it).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::json;

use super::body;
use super::http::{parse_request, response_head, upstream_head, Request};
use super::upstream::Gateway;
use crate::network::log::Log;

const MAX_HEAD: usize = 64 * 1024;
/// A request body is held whole to be judged before it goes up: Claude
/// Code's grow with the conversation (a long one with images is a few MiB).
const MAX_BODY: u64 = 32 << 20;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A model may think for minutes before its first byte; a dead upstream still ends.
const UPSTREAM_IDLE: Duration = Duration::from_secs(600);

/// The error body Claude Code shows as it shows the API's own.
fn error(stream: &mut TcpStream, status: &str, kind: &str, text: &str) {
    error_with(stream, status, kind, text, "");
}

/// `error` with extra header lines (each ending in CRLF).
fn error_with(stream: &mut TcpStream, status: &str, kind: &str, text: &str, headers: &str) {
    let body = json!({"type": "error", "error": {"type": kind, "message": format!("claude-shim gateway: {text}")}})
        .to_string();
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{headers}Connection: close\r\n\r\n{body}",
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
        match parse_request(&buf, &gw.server_tools) {
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
                let kind = if status.starts_with("403") {
                    "permission_error"
                } else {
                    "invalid_request_error"
                };
                return error(&mut stream, status, kind, &why);
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let path = req.target.split('?').next().unwrap_or_default().to_owned();
    let dropped = &req.headers;
    if !dropped.dropped.is_empty() || !dropped.dropped_betas.is_empty() {
        log.write(
            json!({"client": peer.to_string(), "proto": "gateway", "method": req.method, "path": path,
            "dropped_headers": bounded(&dropped.dropped), "dropped_betas": bounded(&dropped.dropped_betas)}),
        );
    }
    if req.content_length > MAX_BODY {
        let why = format!(
            "a request body of {} bytes is over the gateway's {MAX_BODY}",
            req.content_length
        );
        logged(&req.method, &path, 413, 0, 0, Some(&why));
        return error(&mut stream, "413 Payload Too Large", "request_too_large", &why);
    }
    if req.expects_continue {
        let _ = stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    let body = match read_body(&mut stream, &buf[req.body_start..], req.content_length) {
        Ok(b) => b,
        Err(e) => {
            log.write(json!({"client": peer.to_string(), "proto": "gateway", "error": format!("{e:#}")}));
            return;
        }
    };
    if let Err(r) = body::judge(&body, &gw.server_tools) {
        let (status, kind) = match r.needs {
            Some(_) => ("403 Forbidden", "permission_error"),
            None => ("400 Bad Request", "invalid_request_error"),
        };
        let why = r.to_string();
        logged(&req.method, &path, status[..3].parse().unwrap_or(400), 0, 0, Some(&why));
        return error(&mut stream, status, kind, &why);
    }
    let up = match connect(gw) {
        Ok(up) => up,
        Err(e) => {
            // Claude Code retries a 5xx for minutes, silently; an upstream
            // that does not even take the connection will not answer the
            // next try either. `x-should-retry: false` (which its API
            // client honours) ends the turn now with this message, and the
            // runtime prints the log's `upstream_error` on the user's terminal.
            let why = format!("the upstream {} did not answer: {e:#}", gw.upstream.host_header());
            logged(&req.method, &path, 502, 0, 0, None);
            log.write(json!({"client": peer.to_string(), "proto": "gateway", "upstream_error": why}));
            return error_with(
                &mut stream,
                "502 Bad Gateway",
                "api_error",
                &why,
                "x-should-retry: false\r\n",
            );
        }
    };
    let result = forward(&mut stream, up, &body, &req, gw);
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

/// At most 32 names of at most 100 characters: the sandbox chose them.
fn bounded(names: &[String]) -> Vec<String> {
    names.iter().take(32).map(|n| n.chars().take(100).collect()).collect()
}

/// The whole body: exactly Content-Length bytes (anything after them would
/// be a second, unchecked request).
fn read_body(client: &mut TcpStream, early: &[u8], length: u64) -> Result<Vec<u8>> {
    let length = length as usize;
    let mut body = Vec::with_capacity(length);
    body.extend_from_slice(&early[..early.len().min(length)]);
    let _ = client.set_read_timeout(Some(UPSTREAM_IDLE));
    let mut chunk = vec![0u8; 64 * 1024];
    while body.len() < length {
        let want = chunk.len().min(length - body.len());
        let n = client.read(&mut chunk[..want]).context("read the request body")?;
        if n == 0 {
            bail!("the client closed before the end of its request body");
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Ok(body)
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
fn forward(client: &mut TcpStream, mut up: Conn, body: &[u8], req: &Request, gw: &Gateway) -> Result<(u16, u64, u64)> {
    up.write_all(&upstream_head(req, &gw.upstream, gw.credential.as_ref()))
        .context("send the request")?;
    up.write_all(body).context("send the request body")?;
    let mut chunk = vec![0u8; 64 * 1024];
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
