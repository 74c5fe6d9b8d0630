//! A request head, as far as judging needs it: the target it names ([`Target`]), how the
//! client asked ([`Via`], hence how it is answered), and how reading it ended ([`Head`]).
//! Here, apart, because the HTTP reader, the SOCKS5 reader, the judge and the relay all
//! speak of these, and they are pure: bytes in, a target out, tested without a socket.
//! 1. a head ends at its blank line ([`find_head_end`]), read up to [`MAX_HEAD_BYTES`];
//! 2. its request line names the target: `CONNECT host:port`, or an absolute `http://` URI
//!    (port 80 unless it says);
//! 3. a head cut short names one only once its request line got past the target.

/// Longest request head the proxy reads.
pub(super) const MAX_HEAD_BYTES: usize = 16 * 1024;

/// How reading a request head ended.
pub(super) enum Head {
    /// The head ends at this offset.
    Complete(usize),
    /// The client ended its input first.
    Cut,
}

/// Where a head ends: just past its blank line, when it has one.
pub(super) fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Where a proxy request goes.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Target {
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) via: Via,
}

/// How the client asked, hence how it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Via {
    /// HTTP `CONNECT`: a tunnel.
    Connect,
    /// A plain HTTP request in absolute form, sent on in origin form ([`forward`](super::forward)).
    Forward,
    /// A SOCKS5 `CONNECT`: a tunnel.
    Socks5,
}

impl Target {
    /// The target a whole head's request line names, if this proxy takes it.
    pub(super) fn parse(head: &[u8]) -> Option<Self> {
        let line = head.split(|&b| b == b'\r').next()?;
        let line = std::str::from_utf8(line).ok()?;
        let mut words = line.split(' ');
        let method = words.next()?;
        let uri = words.next()?;
        if method.eq_ignore_ascii_case("CONNECT") {
            let (host, port) = split_host_port(uri)?;
            return Some(Self {
                host,
                port: port?,
                via: Via::Connect,
            });
        }
        let rest = uri.strip_prefix("http://")?;
        let authority = rest.split(['/', '?', '#']).next()?;
        let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
        let (host, port) = split_host_port(authority)?;
        Some(Self {
            host,
            port: port.unwrap_or(80),
            via: Via::Forward,
        })
    }

    /// The target of a head cut short: only when its request line got past the target (a
    /// space after it), so that a name is never judged half-read.
    pub(super) fn parse_cut(head: &[u8]) -> Option<Self> {
        let line = head.split(|&b| b == b'\r' || b == b'\n').next()?;
        if line.split(|&b| b == b' ').count() < 3 {
            return None;
        }
        Self::parse(line)
    }

    /// `host:port`, as the verdicts name it.
    pub(super) fn display(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

fn split_host_port(s: &str) -> Option<(String, Option<u16>)> {
    if s.starts_with('[') {
        let (v6, after) = s.split_once(']')?;
        let port = after.strip_prefix(':').map(str::parse).transpose().ok()?;
        return Some((format!("{v6}]"), port));
    }
    match s.rsplit_once(':') {
        Some((h, p)) => Some((h.to_owned(), Some(p.parse().ok()?))),
        None if !s.is_empty() => Some((s.to_owned(), None)),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_heads_name_their_target() {
        let t =
            Target::parse(b"CONNECT example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n").expect("connect");
        assert_eq!(
            (t.host.as_str(), t.port, t.via),
            ("example.com", 443, Via::Connect)
        );
        let t = Target::parse(b"GET http://u@h.test:8080/p?q HTTP/1.1\r\n\r\n").expect("get");
        assert_eq!(
            (t.host.as_str(), t.port, t.via),
            ("h.test", 8080, Via::Forward)
        );
        let t = Target::parse(b"GET http://h.test/ HTTP/1.1\r\n\r\n").expect("default port");
        assert_eq!(t.port, 80);
        assert!(Target::parse(b"GET /relative HTTP/1.1\r\n\r\n").is_none());
        assert!(Target::parse(b"CONNECT example.com HTTP/1.1\r\n\r\n").is_none());
        // Cut short by the end of input: judged once the target is whole.
        let t = Target::parse_cut(b"CONNECT example.com:443 HTTP/1.").expect("cut version");
        assert_eq!((t.host.as_str(), t.port), ("example.com", 443));
        assert!(Target::parse_cut(b"GET http://h.test/ \r\nHost: h").is_some());
        assert!(Target::parse_cut(b"CONNECT example.com:44").is_none());
        assert!(Target::parse_cut(b"GET http://exam").is_none());
    }
}
