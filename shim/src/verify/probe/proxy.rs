//! What the allowlist proxy answers, asked from inside: requests whose fate
//! the policy decides (HTTP CONNECT and SOCKS5), and plain-HTTP requests that
//! smuggle a second host, which the proxy must answer 400 before it connects.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::net::DIRECT_TIMEOUT;
use crate::verify::expect::{PlainHttp, ProxyRequest};
use crate::verify::outcome::Finding;

/// The proxy answers at once for a refusal; an admitted name is resolved and
/// connected first, which may take the resolver's own timeouts.
const PROXY_TIMEOUT: Duration = Duration::from_secs(20);

/// The proxy's listener. Nothing listening there (a runtime that starts no
/// proxy) refuses every request, which is what a refusal check asks.
fn open_proxy(listener: &SocketAddr, admit: bool) -> Result<TcpStream, Finding> {
    let s = TcpStream::connect_timeout(listener, DIRECT_TIMEOUT).map_err(|e| {
        if !admit && e.raw_os_error() == Some(libc::ECONNREFUSED) {
            Finding::pass(format!("nothing listens at {listener}: refused"))
        } else {
            Finding::fail(format!("the proxy at {listener} is not reachable: {e}"))
        }
    })?;
    s.set_read_timeout(Some(PROXY_TIMEOUT))
        .and_then(|_| s.set_write_timeout(Some(PROXY_TIMEOUT)))
        .map_err(|e| Finding::fail(format!("set timeouts: {e}")))?;
    Ok(s)
}

/// Reads an HTTP response head (httparse, as the proxy parses requests) and,
/// for an error, its short body: (status code, "reason: body").
fn read_response(s: &mut TcpStream) -> Result<(u16, String), String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    let (head_end, code, reason, length) = loop {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut resp = httparse::Response::new(&mut headers);
        match resp.parse(&buf) {
            Ok(httparse::Status::Complete(end)) => {
                let length = resp
                    .headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                    .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse::<usize>().ok())
                    .unwrap_or(0)
                    .min(512);
                let code = resp.code.unwrap_or_default();
                break (end, code, resp.reason.unwrap_or_default().to_owned(), length);
            }
            Ok(httparse::Status::Partial) if buf.len() > 16 * 1024 => return Err("a response head over 16 KiB".into()),
            Ok(httparse::Status::Partial) => {}
            Err(e) => return Err(format!("not an HTTP response: {e}")),
        }
        match s.read(&mut chunk) {
            Ok(0) => return Err("the proxy closed the connection without an answer".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(format!("no answer from the proxy: {e}")),
        }
    };
    let mut body = buf[head_end..].to_vec();
    while code != 200 && body.len() < length {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    body.truncate(length);
    let body = String::from_utf8_lossy(&body).trim().to_owned();
    let status = format!("{code} {reason}");
    Ok((
        code,
        if body.is_empty() {
            status
        } else {
            format!("{status}: {body}")
        },
    ))
}

fn http_connect(listener: &SocketAddr, r: &ProxyRequest) -> Finding {
    let mut s = match open_proxy(listener, r.admit) {
        Ok(s) => s,
        Err(f) => return f,
    };
    let target = r.target();
    // One write: `write!` sends each piece of the format on its own, and a
    // proxy that answers the first piece and closes resets the rest.
    let head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
    if let Err(e) = s.write_all(head.as_bytes()) {
        return Finding::fail(format!("send CONNECT: {e}"));
    }
    match read_response(&mut s) {
        Err(e) => Finding::fail(e),
        Ok((code, text)) => match (r.admit, code) {
            // A refusal for another reason than the one the check is about proves nothing.
            (false, 403) => match &r.why {
                Some(why) if !text.contains(why.as_str()) => {
                    Finding::fail(format!("refused, but not because of {why:?}: {text}"))
                }
                _ => Finding::pass(text),
            },
            (false, _) => Finding::fail(format!("not refused: {text}")),
            (true, 200) => Finding::pass(text),
            (true, 502 | 504) => Finding::pass(format!("admitted; the upstream is unreachable: {text}")),
            (true, _) => Finding::fail(text),
        },
    }
}

/// SOCKS5 reply codes (RFC 1928 6).
fn socks_code(code: u8) -> &'static str {
    match code {
        0 => "succeeded",
        1 => "general failure",
        2 => "connection not allowed by ruleset",
        3 => "network unreachable",
        4 => "host unreachable",
        5 => "connection refused",
        _ => "other failure",
    }
}

fn socks_request(r: &ProxyRequest) -> Vec<u8> {
    crate::network::wire::socks_connect_request(&r.host, r.port).unwrap_or_default()
}

fn socks5(listener: &SocketAddr, r: &ProxyRequest) -> Finding {
    let mut s = match open_proxy(listener, r.admit) {
        Ok(s) => s,
        Err(f) => return f,
    };
    let mut reply = [0u8; 2];
    if let Err(e) = s.write_all(&[5, 1, 0]).and_then(|_| s.read_exact(&mut reply)) {
        return Finding::fail(format!("SOCKS5 greeting: {e}"));
    }
    if reply != [5, 0] {
        return Finding::fail(format!("SOCKS5 greeting answered {reply:?}"));
    }
    if let Err(e) = s.write_all(&socks_request(r)).and_then(|_| s.read_exact(&mut reply)) {
        return Finding::fail(format!("SOCKS5 request: {e}"));
    }
    let code = reply[1];
    let text = format!("reply {code}: {}", socks_code(code));
    match (r.admit, code) {
        (false, 2) => Finding::pass(text),
        (false, _) => Finding::fail(format!("not refused: {text}")),
        (true, 2) => Finding::fail(text),
        (true, 0) => Finding::pass(text),
        (true, _) => Finding::pass(format!("admitted; the upstream is unreachable: {text}")),
    }
}

/// A plain http:// request that must be answered 400 before the proxy
/// connects anywhere: the destination it smuggles would otherwise be reached.
fn plain_http(listener: &SocketAddr, r: &ProxyRequest, shape: PlainHttp) -> Finding {
    let mut s = match open_proxy(listener, false) {
        Ok(s) => s,
        Err(f) => return f,
    };
    let host = &r.host;
    let get = |named: &str| format!("GET http://{host}/ HTTP/1.1\r\nHost: {named}\r\n\r\n");
    let head = match shape {
        PlainHttp::HostMismatch => get("not-listed.claude-shim.invalid"),
        PlainHttp::Pipelined => format!(
            "{}GET http://not-listed.claude-shim.invalid/ HTTP/1.1\r\nHost: not-listed.claude-shim.invalid\r\n\r\n",
            get(host)
        ),
    };
    if let Err(e) = s.write_all(head.as_bytes()) {
        return Finding::fail(format!("send the request: {e}"));
    }
    match read_response(&mut s) {
        Err(e) => Finding::fail(e),
        Ok((400, text)) => Finding::pass(text),
        Ok((_, text)) => Finding::fail(format!("not refused: {text}")),
    }
}

pub fn proxy(listener: &SocketAddr, r: &ProxyRequest) -> Finding {
    match (r.plain, r.socks) {
        (Some(shape), _) => plain_http(listener, r, shape),
        (None, true) => socks5(listener, r),
        (None, false) => http_connect(listener, r),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socks_requests_carry_names_and_addresses() {
        let r = |host: &str| ProxyRequest {
            what: "t".into(),
            host: host.into(),
            port: 443,
            socks: true,
            admit: false,
            plain: None,
            why: None,
        };
        assert_eq!(socks_request(&r("a.b")), [5, 1, 0, 3, 3, b'a', b'.', b'b', 1, 187]);
        assert_eq!(socks_request(&r("10.0.0.1")), [5, 1, 0, 1, 10, 0, 0, 1, 1, 187]);
        assert_eq!(socks_request(&r("::1"))[3], 4);
        assert_eq!(r("::1").target(), "[::1]:443");
        assert_eq!(r("a.b").target(), "a.b:443");
    }

    #[test]
    fn proxy_answers_are_judged_by_the_expected_decision() {
        // A stand-in that answers every request with `reply`.
        let serve = |reply: &'static [u8]| {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            std::thread::spawn(move || {
                let (mut s, _) = l.accept().unwrap();
                let mut buf = [0u8; 512];
                let _ = s.read(&mut buf);
                let _ = s.write_all(reply);
            });
            addr
        };
        let req = |admit: bool| ProxyRequest {
            what: "t".into(),
            host: "a.test".into(),
            port: 443,
            socks: false,
            admit,
            plain: None,
            why: None,
        };
        let forbidden = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 24\r\n\r\na.test:443 refused: nope";
        let f = proxy(&serve(forbidden), &req(false));
        assert_eq!(f.pass, Some(true), "{f:?}");
        assert!(f.observed.contains("a.test:443 refused: nope"), "{f:?}");
        assert_eq!(proxy(&serve(forbidden), &req(true)).pass, Some(false));
        let ok = b"HTTP/1.1 200 Connection established\r\n\r\n";
        assert_eq!(proxy(&serve(ok), &req(false)).pass, Some(false));
        let f = proxy(&serve(ok), &req(true));
        assert_eq!(f.pass, Some(true), "{f:?}");
        let bad = b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 4\r\n\r\ngone";
        let f = proxy(&serve(bad), &req(true));
        assert_eq!(f.pass, Some(true));
        assert!(f.observed.contains("unreachable"), "{f:?}");
        // A check about a reason passes only on that reason.
        let why = |w: &str| ProxyRequest {
            why: Some(w.into()),
            ..req(false)
        };
        assert_eq!(proxy(&serve(forbidden), &why("nope")).pass, Some(true));
        assert_eq!(proxy(&serve(forbidden), &why("blocked range")).pass, Some(false));
        // Plain-HTTP smuggling checks pass on 400 only: a 403 or a 200 means
        // the proxy judged, or forwarded, the smuggled request.
        let plain = |shape| ProxyRequest {
            plain: Some(shape),
            ..req(false)
        };
        let bad_request = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 3\r\n\r\nbad";
        for shape in [PlainHttp::HostMismatch, PlainHttp::Pipelined] {
            assert_eq!(proxy(&serve(bad_request), &plain(shape)).pass, Some(true));
            assert_eq!(proxy(&serve(forbidden), &plain(shape)).pass, Some(false));
            assert_eq!(
                proxy(&serve(b"HTTP/1.1 200 OK\r\n\r\n"), &plain(shape)).pass,
                Some(false)
            );
        }
    }
}
