//! SOCKS5 (RFC 1928) on the proxy's port, `CONNECT` only, no authentication: what tools
//! that speak SOCKS rather than HTTP (`ALL_PROXY=socks5h://127.0.0.1:3128`, `ssh -o
//! ProxyCommand='nc -X 5 ...'`, database clients) need to reach an allowed host. The target
//! is judged as an HTTP one is.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::head::{Head, Target, Via, MAX_HEAD_BYTES};

pub const VERSION: u8 = 5;
const NO_AUTHENTICATION: u8 = 0;
const NO_ACCEPTABLE_METHOD: u8 = 0xff;
const CONNECT: u8 = 1;
pub const SUCCEEDED: u8 = 0;
pub const GENERAL_FAILURE: u8 = 1;
pub const NOT_ALLOWED: u8 = 2;
const NETWORK_UNREACHABLE: u8 = 3;
const HOST_UNREACHABLE: u8 = 4;
const CONNECTION_REFUSED: u8 = 5;
const COMMAND_NOT_SUPPORTED: u8 = 7;
const ADDRESS_TYPE_NOT_SUPPORTED: u8 = 8;

/// A reply to a request; the bound address is not told (0.0.0.0:0).
pub fn reply(code: u8) -> [u8; 10] {
    [VERSION, code, 0, 1, 0, 0, 0, 0, 0, 0]
}

/// The reply code for a failed connection to the target.
pub fn failure_of(e: &std::io::Error) -> u8 {
    match e.raw_os_error() {
        Some(libc::ECONNREFUSED) => CONNECTION_REFUSED,
        Some(libc::ENETUNREACH) => NETWORK_UNREACHABLE,
        Some(libc::EHOSTUNREACH | libc::ETIMEDOUT) => HOST_UNREACHABLE,
        _ => GENERAL_FAILURE,
    }
}

/// How a request in `bytes` (from its first byte) parses.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// More bytes are needed.
    Short,
    /// The target, and where the request ends.
    Request(Target, usize),
    /// Not one this proxy takes: the reply code that says why.
    Refused(u8),
}

/// Parses a request (`VER CMD RSV ATYP DST.ADDR DST.PORT`).
pub fn parse_request(bytes: &[u8]) -> Parsed {
    let [version, command, _, kind, rest @ ..] = bytes else {
        return Parsed::Short;
    };
    if *version != VERSION {
        return Parsed::Refused(GENERAL_FAILURE);
    }
    let (host, after) = match *kind {
        1 => match rest {
            [a, b, c, d, after @ ..] => (format!("{a}.{b}.{c}.{d}"), after),
            _ => return Parsed::Short,
        },
        3 => {
            let Some((&len, rest)) = rest.split_first() else {
                return Parsed::Short;
            };
            let Some(name) = rest.get(..usize::from(len)) else {
                return Parsed::Short;
            };
            match std::str::from_utf8(name) {
                Ok(name) if !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic()) => {
                    (name.to_ascii_lowercase(), &rest[usize::from(len)..])
                }
                _ => return Parsed::Refused(GENERAL_FAILURE),
            }
        }
        4 => {
            let Some(octets) = rest.get(..16) else {
                return Parsed::Short;
            };
            let mut v6 = [0u8; 16];
            v6.copy_from_slice(octets);
            (format!("[{}]", std::net::Ipv6Addr::from(v6)), &rest[16..])
        }
        _ => return Parsed::Refused(ADDRESS_TYPE_NOT_SUPPORTED),
    };
    let [hi, lo, ..] = after else {
        return Parsed::Short;
    };
    if *command != CONNECT {
        return Parsed::Refused(COMMAND_NOT_SUPPORTED);
    }
    let end = bytes.len() - after.len() + 2;
    let port = u16::from_be_bytes([*hi, *lo]);
    if port == 0 {
        return Parsed::Refused(GENERAL_FAILURE);
    }
    Parsed::Request(
        Target {
            host,
            port,
            via: Via::Socks5,
        },
        end,
    )
}

/// The SOCKS5 exchange up to the request, `head` holding what was read so far (its
/// first byte the version): the method negotiation (no authentication, answered here),
/// then the request. The request's end in `head` is where the client's data starts.
pub async fn read_request(
    client: &mut tokio::net::TcpStream,
    head: &mut Vec<u8>,
) -> Option<(Option<Target>, Head)> {
    let mut buf = [0u8; 512];
    // The greeting: VER NMETHODS METHODS.
    let greeting = loop {
        if let [_, n, methods @ ..] = head.as_slice() {
            if methods.len() >= usize::from(*n) {
                break 2 + usize::from(*n);
            }
        }
        match client.read(&mut buf).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    };
    if !head[2..greeting].contains(&NO_AUTHENTICATION) {
        let _ = client.write_all(&[VERSION, NO_ACCEPTABLE_METHOD]).await;
        return None;
    }
    client.write_all(&[VERSION, NO_AUTHENTICATION]).await.ok()?;
    loop {
        match parse_request(&head[greeting..]) {
            Parsed::Request(target, end) => {
                return Some((Some(target), Head::Complete(greeting + end)))
            }
            Parsed::Refused(code) => {
                let _ = client.write_all(&reply(code)).await;
                return None;
            }
            Parsed::Short => {}
        }
        if head.len() > MAX_HEAD_BYTES {
            return None;
        }
        match client.read(&mut buf).await {
            // Cut short before its target was whole: nothing to judge.
            Ok(0) | Err(_) => return None,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socks5_requests_name_their_target() {
        let connect = |kind: u8, addr: &[u8]| {
            let mut r = vec![5, 1, 0, kind];
            r.extend_from_slice(addr);
            r.extend_from_slice(&443u16.to_be_bytes());
            r
        };
        let target = |bytes: &[u8]| match parse_request(bytes) {
            Parsed::Request(t, end) => {
                assert_eq!(end, bytes.len(), "the request ends where its port does");
                (t.host, t.port)
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(
            target(&connect(1, &[10, 0, 0, 7])),
            ("10.0.0.7".to_owned(), 443)
        );
        assert_eq!(
            target(&connect(3, b"\x0bExample.COM")),
            ("example.com".to_owned(), 443)
        );
        let mut v6 = [0u8; 16];
        v6[15] = 1;
        assert_eq!(target(&connect(4, &v6)), ("[::1]".to_owned(), 443));
        // What follows the request is the client's first data, not part of it.
        let mut with_data = connect(1, &[127, 0, 0, 1]);
        let len = with_data.len();
        with_data.extend_from_slice(b"hello");
        assert!(matches!(parse_request(&with_data), Parsed::Request(_, end) if end == len));
        // Every prefix is short: a name is never judged half-read.
        let whole = connect(3, b"\x0bexample.com");
        for cut in 0..whole.len() {
            assert_eq!(parse_request(&whole[..cut]), Parsed::Short, "cut at {cut}");
        }
        let mut bind = connect(1, &[10, 0, 0, 7]);
        bind[1] = 2;
        assert_eq!(parse_request(&bind), Parsed::Refused(7), "BIND");
        assert_eq!(
            parse_request(&connect(9, &[0, 0, 0, 0])),
            Parsed::Refused(8),
            "an unknown address type"
        );
        assert_eq!(
            parse_request(&connect(3, b"\x02\xff\xfe")),
            Parsed::Refused(1),
            "a name that is not UTF-8"
        );
        assert_eq!(
            parse_request(&connect(3, b"\x05a\nb.c")),
            Parsed::Refused(1),
            "a name with a control character"
        );
        let mut port0 = connect(1, &[10, 0, 0, 7]);
        let n = port0.len();
        port0[n - 2..].copy_from_slice(&[0, 0]);
        assert_eq!(parse_request(&port0), Parsed::Refused(1), "port 0");
    }
}
