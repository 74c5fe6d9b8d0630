//! A plain-HTTP request, as a proxy's client sends it (`GET http://host:port/path HTTP/1.1`),
//! rewritten for the origin server, which expects origin form (RFC 9112 §3.2): sent as it
//! came, `python3 -m http.server` and most servers answer 404. [`rewrite`]:
//! 1. the request line keeps the method and version, and the target becomes its path and
//!    query (`/` when it has none; the fragment never goes on the wire);
//! 2. `Host` is the URI's authority (less any `user@`), as a proxy must send it (RFC 9112
//!    §3.2.2): a different `Host` would address another name on that server than the one the
//!    allowlist judged;
//! 3. the proxy's own headers (`Proxy-Connection`, `Proxy-Authorization`) and the hop-by-hop
//!    ones (`Connection`, `Keep-Alive`, `TE`, `Trailer`, `Upgrade` and those `Connection`
//!    names) stay here, and `Connection: close` goes instead: one request per connection, so
//!    each request is judged (a client that keeps its connection to the proxy cannot send a
//!    second request, to another host, through the first one's upstream);
//! 4. the request's body is framed as the origin server will frame it ([`Body`]), so the
//!    relay forwards that much and no more: what a client sends after it goes nowhere.
//!
//! A head this cannot parse safely (a bare CR or LF, a folded line, a header without a
//! name, disagreeing `Content-Length`s) is refused with a 400, never guessed at.

/// How much of what the client sends after the head belongs to the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// This many bytes (`Content-Length`, or none without one).
    Length(u64),
    /// Everything until the client ends (`Transfer-Encoding`: the origin finds the end).
    UntilEnd,
}

/// The request as it goes to the origin server: its new head, and its body's framing.
#[derive(Debug, PartialEq, Eq)]
pub struct Origin {
    pub head: Vec<u8>,
    pub body: Body,
}

/// Headers that belong to one connection, or to the proxy (step 3 of the module docs).
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
    "host",
];

/// Headers that frame the body: kept whatever `Connection` says of them.
const FRAMING: &[&str] = &["content-length", "transfer-encoding"];

/// Rewrites a request head (up to and including its blank line) whose target is an
/// absolute `http://` URI; `Err` says why it is refused.
pub fn rewrite(head: &[u8]) -> Result<Origin, &'static str> {
    let head = head
        .strip_suffix(b"\r\n\r\n")
        .ok_or("a request head without its end")?;
    let mut lines = CrlfLines(head);
    let line = lines.next().ok_or("an empty request")?;
    let line = std::str::from_utf8(line).map_err(|_| "a request line that is not UTF-8")?;
    if line.contains(['\r', '\n']) {
        return Err("a bare CR or LF in the request line");
    }
    let mut words = line.split(' ');
    let (Some(method), Some(uri), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err("a request line that is not METHOD URI VERSION");
    };
    if !version.starts_with("HTTP/1.") {
        return Err("a request that is not HTTP/1.x");
    }
    let rest = uri
        .strip_prefix("http://")
        .ok_or("a target that is not http://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host.is_empty() {
        return Err("a target without a host");
    }
    let path = path.split('#').next().unwrap_or("");
    let origin = match path {
        "" => "/".to_owned(),
        p if p.starts_with('?') => format!("/{p}"),
        p => p.to_owned(),
    };

    let mut headers = Vec::new();
    for line in lines {
        // A bare CR or LF inside a line is one the origin might split where this proxy did
        // not.
        if line.contains(&b'\r') || line.contains(&b'\n') {
            return Err("a bare CR or LF in the head");
        }
        if line.first().is_some_and(|b| *b == b' ' || *b == b'\t') {
            return Err("a folded header line");
        }
        let colon = line
            .iter()
            .position(|&b| b == b':')
            .ok_or("a header line without a colon")?;
        let name =
            std::str::from_utf8(&line[..colon]).map_err(|_| "a header name that is not ASCII")?;
        if name.is_empty() || !name.bytes().all(is_token_byte) {
            return Err("a header without a proper name");
        }
        headers.push((name.to_ascii_lowercase(), line, trim(&line[colon + 1..])));
    }

    // Step 3: what `Connection` names goes too (the framing headers excepted).
    let named: Vec<String> = headers
        .iter()
        .filter(|(name, ..)| name == "connection" || name == "proxy-connection")
        .flat_map(|(_, _, value)| value.split(|&b| b == b','))
        .map(|token| String::from_utf8_lossy(trim(token)).to_ascii_lowercase())
        .filter(|token| !FRAMING.contains(&token.as_str()))
        .collect();
    let body = framing(&headers)?;

    let mut out = format!("{method} {origin} {version}\r\nHost: {host}\r\n").into_bytes();
    for (name, line, _) in &headers {
        if HOP_BY_HOP.contains(&name.as_str()) || named.contains(name) {
            continue;
        }
        out.extend_from_slice(line);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Origin { head: out, body })
}

/// The body's framing (RFC 9112 §6.3): `Transfer-Encoding` wins; `Content-Length`s must
/// agree; without either, there is none.
fn framing(headers: &[(String, &[u8], &[u8])]) -> Result<Body, &'static str> {
    if headers.iter().any(|(name, ..)| name == "transfer-encoding") {
        return Ok(Body::UntilEnd);
    }
    let mut length = None;
    for (_, _, value) in headers.iter().filter(|(name, ..)| name == "content-length") {
        for item in value.split(|&b| b == b',') {
            let n = std::str::from_utf8(trim(item))
                .ok()
                .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or("a Content-Length that is not a number")?;
            if length.is_some_and(|l| l != n) {
                return Err("Content-Lengths that disagree");
            }
            length = Some(n);
        }
    }
    Ok(Body::Length(length.unwrap_or(0)))
}

/// The lines of a head without its final CRLF CRLF, split at each CRLF.
struct CrlfLines<'a>(&'a [u8]);

impl<'a> Iterator for CrlfLines<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.0.is_empty() {
            return None;
        }
        let rest = self.0;
        match rest.windows(2).position(|w| w == b"\r\n") {
            Some(at) => {
                self.0 = &rest[at + 2..];
                Some(&rest[..at])
            }
            None => {
                self.0 = &[];
                Some(rest)
            }
        }
    }
}

/// RFC 9110 `tchar`.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn trim(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|b| *b != b' ' && *b != b'\t')
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| *b != b' ' && *b != b'\t')
        .map_or(start, |i| i + 1);
    &bytes[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(origin: &Origin) -> &str {
        std::str::from_utf8(&origin.head).expect("UTF-8")
    }

    #[test]
    fn an_absolute_request_becomes_origin_form_with_its_host() {
        let o = rewrite(
            b"GET http://user@h.test:8080/p/a?q=1#frag HTTP/1.1\r\nHost: other.test\r\n\
              Accept: */*\r\nProxy-Connection: Keep-Alive\r\n\r\n",
        )
        .expect("rewritten");
        assert_eq!(
            text(&o),
            "GET /p/a?q=1 HTTP/1.1\r\nHost: h.test:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(o.body, Body::Length(0));
        let o = rewrite(b"GET http://h.test HTTP/1.0\r\n\r\n").expect("no path");
        assert_eq!(
            text(&o),
            "GET / HTTP/1.0\r\nHost: h.test\r\nConnection: close\r\n\r\n"
        );
        let o = rewrite(b"HEAD http://h.test?x HTTP/1.1\r\n\r\n").expect("query only");
        assert!(
            text(&o).starts_with("HEAD /?x HTTP/1.1\r\n"),
            "{}",
            text(&o)
        );
    }

    #[test]
    fn the_proxy_and_hop_by_hop_headers_stay_here() {
        let o = rewrite(
            b"POST http://h.test/ HTTP/1.1\r\nProxy-Authorization: Basic eDp5\r\n\
              Connection: keep-alive, X-Private, Content-Length\r\nKeep-Alive: 5\r\nTE: trailers\r\n\
              Upgrade: h2c\r\nX-Private: 1\r\nx-kept: yes\r\nContent-Length: 3\r\n\r\n",
        )
        .expect("rewritten");
        assert_eq!(
            text(&o),
            "POST / HTTP/1.1\r\nHost: h.test\r\nx-kept: yes\r\nContent-Length: 3\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(o.body, Body::Length(3));
    }

    #[test]
    fn the_body_is_framed_as_the_origin_will_frame_it() {
        let framed = |headers: &str| {
            rewrite(format!("PUT http://h.test/ HTTP/1.1\r\n{headers}\r\n").as_bytes())
                .map(|o| o.body)
        };
        assert_eq!(framed("Content-Length: 10\r\n"), Ok(Body::Length(10)));
        assert_eq!(
            framed("Content-Length: 10\r\nContent-Length: 10\r\n"),
            Ok(Body::Length(10))
        );
        assert_eq!(
            framed("Transfer-Encoding: chunked\r\nContent-Length: 10\r\n"),
            Ok(Body::UntilEnd)
        );
        assert!(framed("Content-Length: 10\r\nContent-Length: 11\r\n").is_err());
        assert!(framed("Content-Length: 10, 11\r\n").is_err());
        assert!(framed("Content-Length: -1\r\n").is_err());
        assert!(framed("Content-Length: +1\r\n").is_err());
    }

    #[test]
    fn heads_that_could_be_read_two_ways_are_refused() {
        for (head, why) in [
            (
                &b"GET http://h.test/ HTTP/1.1\r\nA: b\nHost: evil\r\n\r\n"[..],
                "bare LF",
            ),
            (
                b"GET http://h.test/ HTTP/1.1\r\nA: b\rHost: evil\r\n\r\n",
                "bare CR",
            ),
            (
                b"GET http://h.test/ HTTP/1.1\r\nA: b\r\n c\r\n\r\n",
                "folded",
            ),
            (
                b"GET http://h.test/ HTTP/1.1\r\nNoColon\r\n\r\n",
                "no colon",
            ),
            (
                b"GET http://h.test/ HTTP/1.1\r\nBad Name: x\r\n\r\n",
                "space in name",
            ),
            (b"GET http://h.test/ HTTP/2\r\n\r\n", "not HTTP/1"),
            (b"GET http://h.test/ x HTTP/1.1\r\n\r\n", "four words"),
            (b"GET http:///p HTTP/1.1\r\n\r\n", "no host"),
        ] {
            assert!(rewrite(head).is_err(), "{why}");
        }
    }
}
