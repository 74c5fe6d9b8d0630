//! How frames reach a [`Connection`](crate::connection::Connection): WebSocket ([`ws`]) or
//! newline-delimited JSON on stdin/stdout ([`stdio`], framed by [`lines`]).
//!
//! [`ListenAddr`] parses `--listen`: `stdio` (or `stdio://`), or `ws://IP:PORT` / `wss://IP:PORT`
//! (IPv6 in brackets; `localhost` means `127.0.0.1`; port 0 picks a free port).

pub mod lines;
pub mod stdio;
pub mod ws;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Where `uexec serve` listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenAddr {
    Stdio,
    /// `ws://` or, with `tls`, `wss://`.
    WebSocket {
        addr: SocketAddr,
        tls: bool,
    },
}

/// Why `--listen` is not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListenAddrError {
    #[error("unsupported listen address {0:?}: expected ws://IP:PORT, wss://IP:PORT or stdio")]
    Scheme(String),
    #[error("bad host:port in listen address {0:?}: expected ws://IP:PORT, e.g. ws://127.0.0.1:0")]
    HostPort(String),
}

impl ListenAddr {
    /// Parses a `--listen` value.
    pub fn parse(text: &str) -> Result<Self, ListenAddrError> {
        if text == "stdio" || text == "stdio://" {
            return Ok(Self::Stdio);
        }
        let (rest, tls) = match (text.strip_prefix("ws://"), text.strip_prefix("wss://")) {
            (Some(rest), _) => (rest, false),
            (_, Some(rest)) => (rest, true),
            _ => return Err(ListenAddrError::Scheme(text.to_string())),
        };
        let hostport = rest.strip_suffix('/').unwrap_or(rest);
        let bad = || ListenAddrError::HostPort(text.to_string());
        if let Ok(addr) = hostport.parse::<SocketAddr>() {
            return Ok(Self::WebSocket { addr, tls });
        }
        let (host, port) = hostport.rsplit_once(':').ok_or_else(bad)?;
        let port: u16 = port.parse().map_err(|_| bad())?;
        let ip: IpAddr = if host.eq_ignore_ascii_case("localhost") {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        } else {
            return Err(bad());
        };
        Ok(Self::WebSocket {
            addr: SocketAddr::new(ip, port),
            tls,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_listen_forms() {
        assert_eq!(ListenAddr::parse("stdio"), Ok(ListenAddr::Stdio));
        assert_eq!(ListenAddr::parse("stdio://"), Ok(ListenAddr::Stdio));
        assert_eq!(
            ListenAddr::parse("ws://127.0.0.1:0"),
            Ok(ListenAddr::WebSocket {
                addr: "127.0.0.1:0".parse().unwrap(),
                tls: false
            })
        );
        assert_eq!(
            ListenAddr::parse("ws://[::1]:8080/"),
            Ok(ListenAddr::WebSocket {
                addr: "[::1]:8080".parse().unwrap(),
                tls: false
            })
        );
        assert_eq!(
            ListenAddr::parse("ws://localhost:9"),
            Ok(ListenAddr::WebSocket {
                addr: "127.0.0.1:9".parse().unwrap(),
                tls: false
            })
        );
        assert_eq!(
            ListenAddr::parse("wss://127.0.0.1:9"),
            Ok(ListenAddr::WebSocket {
                addr: "127.0.0.1:9".parse().unwrap(),
                tls: true
            })
        );
        assert!(matches!(
            ListenAddr::parse("http://127.0.0.1:0"),
            Err(ListenAddrError::Scheme(_))
        ));
        assert!(matches!(
            ListenAddr::parse("ws://example.com:1"),
            Err(ListenAddrError::HostPort(_))
        ));
        assert!(matches!(
            ListenAddr::parse("ws://127.0.0.1"),
            Err(ListenAddrError::HostPort(_))
        ));
    }
}
