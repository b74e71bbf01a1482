//! The allowlist proxy's wire formats, parsed without I/O: the head of an
//! HTTP/1 request (CONNECT, or an absolute http:// URL rewritten to origin
//! form) and SOCKS5's greeting and CONNECT request (RFC 1928). Kept apart from
//! the server so that every parser is a pure function with unit tests.

use std::net::IpAddr;

use super::policy::Host;

// ---- HTTP ----

/// `host:port` (port required when `default_port` is None), IPv6 in brackets.
pub fn parse_authority(s: &str, default_port: Option<u16>) -> Result<(Host, u16), String> {
    if s.contains('@') {
        return Err(format!("{s:?}: credentials in the authority are not accepted"));
    }
    let (host, port) = if s.starts_with('[') {
        let end = s.find(']').ok_or_else(|| format!("{s:?}: unclosed '['"))?;
        let rest = &s[end + 1..];
        let port = match rest.strip_prefix(':') {
            Some(p) => Some(p),
            None if rest.is_empty() => None,
            None => return Err(format!("{s:?}: text after ']'")),
        };
        (&s[..=end], port)
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    let port = match port {
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => n,
            _ => return Err(format!("{s:?}: {p:?} is not a port")),
        },
        None => default_port.ok_or_else(|| format!("{s:?}: a port is required"))?,
    };
    let host = Host::parse(host).map_err(|e| e.to_string())?;
    Ok((host, port))
}

/// A parsed request head.
#[derive(Debug, PartialEq, Eq)]
pub struct HttpRequest {
    pub method: String,
    pub host: Host,
    pub port: u16,
    /// For plain http://: the head to send upstream. None for CONNECT.
    pub upstream_head: Option<Vec<u8>>,
    /// Bytes after the head (the start of a body).
    pub body_start: usize,
    /// For plain http://: the body's length; nothing after it is forwarded.
    pub content_length: u64,
}

/// Headers that belong to the hop to the proxy, not to the origin (RFC 9110 7.6.1).
const HOP_HEADERS: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
];

/// Why a request's body length cannot be known.
#[derive(Debug, PartialEq, Eq)]
pub enum BodyLength {
    /// Transfer-Encoding: refused, not parsed.
    Encoded,
    Bad(&'static str),
}

impl BodyLength {
    pub fn why(&self) -> &'static str {
        match self {
            Self::Encoded => "a request body with Transfer-Encoding is not forwarded; send Content-Length",
            Self::Bad(why) => why,
        }
    }
}

/// A request's body length from its Content-Length headers (0 without one).
/// Where the body ends must be known, so that nothing after it (a second
/// request) is forwarded: Transfer-Encoding and disagreeing copies are refused.
pub fn body_length(headers: &[httparse::Header<'_>]) -> Result<u64, BodyLength> {
    let mut length = None;
    for h in headers {
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(BodyLength::Encoded);
        }
        if h.name.eq_ignore_ascii_case("content-length") {
            let n = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or(BodyLength::Bad("Content-Length is not a number"))?;
            if length.is_some_and(|l| l != n) {
                return Err(BodyLength::Bad("two different Content-Length headers"));
            }
            length = Some(n);
        }
    }
    Ok(length.unwrap_or(0))
}

/// Ok(None): the head is not complete yet.
pub fn parse_http(buf: &[u8]) -> Result<Option<HttpRequest>, String> {
    let mut headers = [httparse::EMPTY_HEADER; 100];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(format!("malformed request: {e}")),
    };
    let method = req.method.unwrap_or_default().to_owned();
    let target = req.path.unwrap_or_default();
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = parse_authority(target, None)?;
        return Ok(Some(HttpRequest {
            method,
            host,
            port,
            upstream_head: None,
            body_start: len,
            content_length: 0,
        }));
    }
    let rest = match target.get(..7) {
        Some(scheme) if scheme.eq_ignore_ascii_case("http://") => &target[7..],
        _ => {
            return Err(format!(
                "{target:?} is not an absolute http:// URL (use CONNECT for https)"
            ))
        }
    };
    let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(split);
    let (host, port) = parse_authority(authority, Some(80))?;
    let path = if path.is_empty() || path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_owned()
    };
    let path = path.split('#').next().unwrap_or("/").to_owned();
    let mut head = format!("{method} {path} HTTP/1.1\r\n").into_bytes();
    let mut has_host = false;
    let content_length = body_length(req.headers).map_err(|e| e.why().to_owned())?;
    for h in req.headers.iter() {
        let name = h.name.to_ascii_lowercase();
        if HOP_HEADERS.contains(&name.as_str()) {
            continue;
        }
        // The origin routes by Host: one naming another host than the
        // checked target would reach that host on a shared server.
        if name == "host" {
            let value = String::from_utf8_lossy(h.value);
            if has_host {
                return Err("two Host headers".into());
            }
            if parse_authority(value.trim(), Some(80)).ok() != Some((host.clone(), port)) {
                return Err(format!(
                    "Host {:?} names another host than the request's {authority:?}",
                    value.trim()
                ));
            }
            has_host = true;
        }
        head.extend_from_slice(h.name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(h.value);
        head.extend_from_slice(b"\r\n");
    }
    if !has_host {
        head.extend_from_slice(format!("Host: {authority}\r\n").as_bytes());
    }
    // One request per connection: a second request on it could name another host.
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Some(HttpRequest {
        method,
        host,
        port,
        upstream_head: Some(head),
        body_start: len,
        content_length,
    }))
}

// ---- SOCKS5 (RFC 1928) ----

/// Reply codes.
pub const SOCKS_GENERAL_FAILURE: u8 = 1;
pub const SOCKS_NOT_ALLOWED: u8 = 2;
pub const SOCKS_HOST_UNREACHABLE: u8 = 4;
pub const SOCKS_REFUSED: u8 = 5;
pub const SOCKS_COMMAND_NOT_SUPPORTED: u8 = 7;
pub const SOCKS_ADDRESS_NOT_SUPPORTED: u8 = 8;

/// A client's CONNECT request for `host` (a name, or an address literal,
/// IPv6 with or without brackets) and `port`.
pub fn socks_connect_request(host: &str, port: u16) -> Result<Vec<u8>, String> {
    let mut req = vec![5, 1, 0];
    match host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
        Ok(IpAddr::V4(a)) => {
            req.push(1);
            req.extend_from_slice(&a.octets());
        }
        Ok(IpAddr::V6(a)) => {
            req.push(4);
            req.extend_from_slice(&a.octets());
        }
        Err(_) => {
            let len = u8::try_from(host.len()).map_err(|_| format!("the name {host:?} is longer than 255 bytes"))?;
            req.push(3);
            req.push(len);
            req.extend_from_slice(host.as_bytes());
        }
    }
    req.extend_from_slice(&port.to_be_bytes());
    Ok(req)
}

#[derive(Debug, PartialEq, Eq)]
pub enum Parsed<T> {
    Incomplete,
    Done(T, usize),
    /// Refused, with the reply code to send and why.
    Bad(u8, String),
}

/// The greeting: version 5 and the methods the client offers; only "no
/// authentication" (0) is accepted.
pub fn parse_greeting(buf: &[u8]) -> Parsed<bool> {
    if buf.len() < 2 {
        return Parsed::Incomplete;
    }
    if buf[0] != 5 {
        return Parsed::Bad(SOCKS_GENERAL_FAILURE, format!("SOCKS version {} is not 5", buf[0]));
    }
    let n = buf[1] as usize;
    if buf.len() < 2 + n {
        return Parsed::Incomplete;
    }
    Parsed::Done(buf[2..2 + n].contains(&0), 2 + n)
}

/// The request: CONNECT only, to an IPv4, IPv6 or domain-name address.
pub fn parse_request(buf: &[u8]) -> Parsed<(Host, u16)> {
    if buf.len() < 5 {
        return Parsed::Incomplete;
    }
    if buf[0] != 5 {
        return Parsed::Bad(SOCKS_GENERAL_FAILURE, format!("SOCKS version {} is not 5", buf[0]));
    }
    if buf[1] != 1 {
        return Parsed::Bad(
            SOCKS_COMMAND_NOT_SUPPORTED,
            format!("SOCKS command {} is not CONNECT", buf[1]),
        );
    }
    let (addr_len, start) = match buf[3] {
        1 => (4, 4),
        4 => (16, 4),
        3 => (buf[4] as usize, 5),
        t => return Parsed::Bad(SOCKS_ADDRESS_NOT_SUPPORTED, format!("SOCKS address type {t}")),
    };
    let end = start + addr_len;
    if buf.len() < end + 2 {
        return Parsed::Incomplete;
    }
    let raw = &buf[start..end];
    let host = match buf[3] {
        1 => Host::Ip(IpAddr::from(<[u8; 4]>::try_from(raw).expect("4 bytes"))),
        4 => Host::Ip(super::policy::canonical(IpAddr::from(
            <[u8; 16]>::try_from(raw).expect("16 bytes"),
        ))),
        _ => match std::str::from_utf8(raw)
            .map_err(|_| "not UTF-8".to_owned())
            .and_then(|s| Host::parse(s).map_err(|e| e.to_string()))
        {
            Ok(h) => h,
            Err(e) => return Parsed::Bad(SOCKS_NOT_ALLOWED, e),
        },
    };
    let port = u16::from_be_bytes([buf[end], buf[end + 1]]);
    if port == 0 {
        return Parsed::Bad(SOCKS_NOT_ALLOWED, "port 0".into());
    }
    Parsed::Done((host, port), end + 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Host {
        Host::Name(s.into())
    }

    #[test]
    fn authorities_parse() {
        assert_eq!(
            parse_authority("Example.COM:443", None).unwrap(),
            (name("example.com"), 443)
        );
        assert_eq!(
            parse_authority("example.com", Some(80)).unwrap(),
            (name("example.com"), 80)
        );
        assert_eq!(
            parse_authority("[2001:db8::1]:8443", None).unwrap(),
            (Host::Ip("2001:db8::1".parse().unwrap()), 8443)
        );
        assert_eq!(
            parse_authority("10.0.0.1:22", None).unwrap(),
            (Host::Ip("10.0.0.1".parse().unwrap()), 22)
        );
        for bad in [
            "example.com",
            "a:0",
            "a:65536",
            "user@host:443",
            "[::1:443",
            "[::1]x:1",
            "a b:1",
            "127.1:80",
        ] {
            assert!(parse_authority(bad, None).is_err(), "{bad}");
        }
    }

    #[test]
    fn connect_requests_parse() {
        let raw = b"CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\nrest";
        let r = parse_http(raw).unwrap().unwrap();
        assert_eq!(r.host, name("api.example.com"));
        assert_eq!(r.port, 443);
        assert!(r.upstream_head.is_none());
        assert_eq!(&raw[r.body_start..], b"rest");
        assert_eq!(parse_http(b"CONNECT a.com:443 HTTP/1.1\r\nHost: a").unwrap(), None);
        assert!(parse_http(b"CONNECT a.com HTTP/1.1\r\n\r\n").is_err(), "port required");
        assert!(parse_http(b"\x16\x03\x01garbage\r\n\r\n").is_err());
    }

    #[test]
    fn plain_http_is_rewritten_to_origin_form() {
        let r = parse_http(
            b"GET http://Pub.Test:8080/x?y=1 HTTP/1.1\r\nHost: pub.test:8080\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\nUser-Agent: t\r\n\r\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!((r.host.clone(), r.port), (name("pub.test"), 8080));
        let head = String::from_utf8(r.upstream_head.unwrap()).unwrap();
        assert_eq!(
            head,
            "GET /x?y=1 HTTP/1.1\r\nHost: pub.test:8080\r\nUser-Agent: t\r\nConnection: close\r\n\r\n"
        );
        let r = parse_http(b"GET http://pub.test HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert_eq!(r.port, 80);
        assert_eq!(
            String::from_utf8(r.upstream_head.unwrap()).unwrap(),
            "GET / HTTP/1.1\r\nHost: pub.test\r\nConnection: close\r\n\r\n"
        );
        let r = parse_http(b"POST http://pub.test/ HTTP/1.1\r\nHOST: PUB.test:80\r\nContent-Length: 3\r\n\r\nabc")
            .unwrap()
            .unwrap();
        assert_eq!(r.content_length, 3);
        for (bad, why) in [
            (
                &b"GET http://pub.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n"[..],
                "another host",
            ),
            (
                b"GET http://pub.test/ HTTP/1.1\r\nHost: pub.test:8080\r\n\r\n",
                "another host",
            ),
            (
                b"GET http://pub.test/ HTTP/1.1\r\nHost: pub.test\r\nHost: evil.test\r\n\r\n",
                "two Host",
            ),
            (
                b"POST http://pub.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                "Transfer-Encoding",
            ),
            (
                b"POST http://pub.test/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                "Content-Length",
            ),
        ] {
            let e = parse_http(bad).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
        assert!(parse_http(b"GET /relative HTTP/1.1\r\n\r\n").is_err());
        assert!(parse_http(b"GET https://a.com/ HTTP/1.1\r\n\r\n").is_err());
        assert!(parse_http(b"GET http://user@a.com/ HTTP/1.1\r\n\r\n").is_err());
    }

    #[test]
    fn socks_greetings_parse() {
        assert_eq!(parse_greeting(&[5]), Parsed::Incomplete);
        assert_eq!(parse_greeting(&[5, 2, 2]), Parsed::Incomplete);
        assert_eq!(parse_greeting(&[5, 2, 2, 0]), Parsed::Done(true, 4));
        assert_eq!(parse_greeting(&[5, 1, 2]), Parsed::Done(false, 3));
        assert!(matches!(parse_greeting(&[4, 1, 0]), Parsed::Bad(..)));
    }

    #[test]
    fn socks_requests_parse() {
        let mut r = vec![5, 1, 0, 3, 8];
        r.extend_from_slice(b"PUB.test");
        r.extend_from_slice(&443u16.to_be_bytes());
        assert_eq!(parse_request(&r), Parsed::Done((name("pub.test"), 443), r.len()));
        assert_eq!(parse_request(&r[..r.len() - 1]), Parsed::Incomplete);
        let v4 = [5, 1, 0, 1, 127, 0, 0, 1, 0, 80];
        assert_eq!(
            parse_request(&v4),
            Parsed::Done((Host::Ip("127.0.0.1".parse().unwrap()), 80), 10)
        );
        let mut v6 = vec![5, 1, 0, 4];
        v6.extend_from_slice(&"::ffff:10.0.0.1".parse::<std::net::Ipv6Addr>().unwrap().octets());
        v6.extend_from_slice(&[0, 22]);
        assert_eq!(
            parse_request(&v6),
            Parsed::Done((Host::Ip("10.0.0.1".parse().unwrap()), 22), 22)
        );
        assert!(matches!(
            parse_request(&[5, 2, 0, 1, 1, 2, 3, 4, 0, 80]),
            Parsed::Bad(SOCKS_COMMAND_NOT_SUPPORTED, _)
        ));
        assert!(matches!(
            parse_request(&[5, 1, 0, 9, 0, 0]),
            Parsed::Bad(SOCKS_ADDRESS_NOT_SUPPORTED, _)
        ));
        let mut bad = vec![5, 1, 0, 3, 5];
        bad.extend_from_slice(b"127.1");
        bad.extend_from_slice(&[0, 80]);
        assert!(matches!(parse_request(&bad), Parsed::Bad(SOCKS_NOT_ALLOWED, _)));
        assert!(matches!(
            parse_request(&[5, 1, 0, 1, 1, 2, 3, 4, 0, 0]),
            Parsed::Bad(SOCKS_NOT_ALLOWED, _)
        ));
    }
}
