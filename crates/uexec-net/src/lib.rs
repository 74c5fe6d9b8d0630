//! Network hardening shared by every uexec face that listens or dials: who may connect, over
//! what, how many at once, and when a face stops.
//!
//! # Architecture invariants
//! - It knows no face, no engine and no wire dialect: it depends on `uexec-sys` (peer
//!   credentials, pidfds, the effective uid), never on `uexec-core`, and any face can use it
//!   without pulling in another.
//! - Neither clap nor anyhow: a face's flags arrive as a plain [`ListenerConfig`] (their clap
//!   definitions live in the binary), errors are typed. No `unsafe`: the syscalls are
//!   `uexec-sys`'s.
//! - Without a token nothing but this user's own loopback peer, outside every sandbox, is let
//!   in; a non-loopback listener never runs without a token.
//!
//! Who uses it: `uexec serve`'s WebSocket listener (`uexec-server`), `uexec mcp --http` and the
//! per-user daemon (`uexec-mcp`), and the exec-server client (`uexec-client`: TLS trust for
//! `wss://`, token files). A crate of its own so that a face depending on it pulls in neither
//! the exec server nor its client.
//!
//! Why it exists: both faces listen on TCP, and each of these holes was open on both — a
//! token-less loopback listener any local user could drive, tokens and output in clear text,
//! requests that could be half-sent forever until the fd limit was reached. So:
//! 1. [`accept::HttpListener`] accepts with a connection cap and EMFILE back-off, optionally
//!    wraps the socket in TLS ([`tls`]), and serves HTTP/1 with a header-read timeout (plain
//!    `axum::serve` has none); every request carries the [`peer::Peer`] it came from;
//! 2. [`authorize`] decides per request: with tokens configured, a right bearer token is
//!    required (`401` otherwise); without, only a loopback peer of the server's own uid is let
//!    in (`403` otherwise: "loopback" must not mean "any user of this machine"), and never one
//!    held by a process in another user namespace (`403`: a sandboxed command has the user's
//!    uid but is not the user; see [`peer`], looked up once per connection);
//! 3. [`check_exposure`] refuses a non-loopback listener without a token, or without TLS
//!    unless `--insecure-plaintext` is given;
//! 4. tokens come from argv, the environment or, better, a file ([`secret`]);
//! 5. every face stops on SIGTERM or SIGINT ([`shutdown_signal`]) and kills what it started.

#![forbid(unsafe_code)]

pub mod accept;
pub mod backoff;
pub mod peer;
pub mod secret;
pub mod signal;
pub mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

pub use accept::{Admit, HttpListener, ListenerOptions};
pub use peer::{LocalUser, Peer};
pub use signal::{shutdown_signal, SignalError};

/// Default longest wait for a request's headers (and for a TLS handshake).
pub const HEADER_READ_TIMEOUT_MS: u64 = 10_000;
/// Default most HTTP connections served at once (an upgraded WebSocket no longer counts).
pub const MAX_CONNECTIONS: usize = 512;

/// What a face asks of its listener: TLS files, whether plain text may leave loopback, and
/// limits. `uexec serve` and `uexec mcp --http` fill it from the same flags (the binary's
/// `args::net::ListenerArgs`); [`ListenerConfig::options`] reads the TLS files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerConfig {
    /// PEM certificate chain to serve TLS with (with `tls_key`).
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of `tls_cert`.
    pub tls_key: Option<PathBuf>,
    /// A non-loopback listener may go without TLS ([`check_exposure`]).
    pub insecure_plaintext: bool,
    /// Most HTTP connections served at once.
    pub max_connections: usize,
    /// Longest wait for a request's headers or a TLS handshake.
    pub header_read_timeout: Duration,
}

impl ListenerConfig {
    /// The options of a listener, reading the TLS files.
    pub fn options(&self) -> Result<ListenerOptions, tls::TlsError> {
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(tls::server_config(cert, key)?),
            _ => None,
        };
        Ok(ListenerOptions {
            tls,
            header_read_timeout: self.header_read_timeout,
            max_connections: self.max_connections,
            admit: accept::Admit::Anyone,
        })
    }
}

/// Why a listener may not be exposed this way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExposureError {
    #[error(
        "refusing to listen on non-loopback address {addr} without a bearer token: set {token_flags}"
    )]
    NoToken {
        addr: SocketAddr,
        token_flags: &'static str,
    },
    #[error(
        "refusing to listen on non-loopback address {addr} without TLS: the token and every \
         command's output would cross the network in clear text; pass --tls-cert and \
         --tls-key, or --insecure-plaintext to accept that"
    )]
    NoTls { addr: SocketAddr },
}

/// A non-loopback listener needs a token, and TLS unless `insecure_plaintext`.
pub fn check_exposure(
    addr: SocketAddr,
    has_token: bool,
    has_tls: bool,
    insecure_plaintext: bool,
    token_flags: &'static str,
) -> Result<(), ExposureError> {
    if addr.ip().is_loopback() {
        return Ok(());
    }
    if !has_token {
        return Err(ExposureError::NoToken { addr, token_flags });
    }
    if !has_tls && !insecure_plaintext {
        return Err(ExposureError::NoTls { addr });
    }
    Ok(())
}

/// Who a request was let in as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// It carried the token at this index of the configured list.
    Token(usize),
    /// No token is configured and it comes from this server's own user over loopback.
    SameUser,
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `401`: a token is configured and the request did not carry it.
    BadToken,
    /// `403`: no token is configured and the peer is not this server's user on loopback.
    OtherUser,
    /// `403`: no token is configured and the peer is a sandboxed command of this user.
    Sandboxed,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::BadToken => (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                "missing or wrong bearer token\n",
            )
                .into_response(),
            Refusal::OtherUser => (
                StatusCode::FORBIDDEN,
                "without a token, only the server's own user may connect (over loopback)\n",
            )
                .into_response(),
            Refusal::Sandboxed => (
                StatusCode::FORBIDDEN,
                "a sandboxed command is not the server's user: without a token, only the \
                 server's own user may connect (over loopback), from outside every uexec sandbox\n",
            )
                .into_response(),
        }
    }
}

/// Decides whether a request may go on: see the module docs, step 2.
pub async fn authorize<T: AsRef<str>>(
    tokens: &[T],
    headers: &HeaderMap,
    peer: Option<&Peer>,
) -> Result<Access, Refusal> {
    if tokens.is_empty() {
        let user = match peer {
            Some(peer) => peer.user().await,
            None => LocalUser::Unknown,
        };
        return match user {
            LocalUser::Same => Ok(Access::SameUser),
            LocalUser::Sandboxed => Err(Refusal::Sandboxed),
            LocalUser::Unknown | LocalUser::Other(_) => Err(Refusal::OtherUser),
        };
    }
    let presented = bearer(headers).ok_or(Refusal::BadToken)?;
    tokens
        .iter()
        .position(|t| constant_time_eq(presented.as_bytes(), t.as_ref().as_bytes()))
        .map(Access::Token)
        .ok_or(Refusal::BadToken)
}

/// The token of `Authorization: Bearer TOKEN`, if any.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    Some(value.strip_prefix("Bearer ")?.trim())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bearer_tokens_must_match_exactly() {
        let tokens = ["s3cret", "other"];
        let mut headers = HeaderMap::new();
        let check = |headers: &HeaderMap| {
            let headers = headers.clone();
            async move { authorize(&tokens, &headers, None).await }
        };
        assert_eq!(check(&headers).await, Err(Refusal::BadToken));
        headers.insert(header::AUTHORIZATION, "Bearer s3cret".parse().unwrap());
        assert_eq!(check(&headers).await, Ok(Access::Token(0)));
        headers.insert(header::AUTHORIZATION, "Bearer other".parse().unwrap());
        assert_eq!(check(&headers).await, Ok(Access::Token(1)));
        headers.insert(header::AUTHORIZATION, "Bearer s3cre".parse().unwrap());
        assert_eq!(check(&headers).await, Err(Refusal::BadToken));
        headers.insert(header::AUTHORIZATION, "Basic s3cret".parse().unwrap());
        assert_eq!(check(&headers).await, Err(Refusal::BadToken));
    }

    #[tokio::test]
    async fn without_tokens_an_unknown_peer_is_refused() {
        let none: [&str; 0] = [];
        assert_eq!(
            authorize(&none, &HeaderMap::new(), None).await,
            Err(Refusal::OtherUser)
        );
    }

    #[tokio::test]
    async fn without_tokens_our_own_loopback_peer_is_let_in() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let local = listener.local_addr().unwrap();
        let _client = std::net::TcpStream::connect(local).unwrap();
        let (_accepted, remote) = listener.accept().unwrap();
        let none: [&str; 0] = [];
        let peer = Peer::new(remote, local);
        assert_eq!(
            authorize(&none, &HeaderMap::new(), Some(&peer)).await,
            Ok(Access::SameUser)
        );
    }

    #[test]
    fn exposure_rules() {
        let public: SocketAddr = "0.0.0.0:9000".parse().unwrap();
        let local: SocketAddr = "127.0.0.1:9000".parse().unwrap();
        assert_eq!(
            check_exposure(local, false, false, false, "--token"),
            Ok(())
        );
        assert!(matches!(
            check_exposure(public, false, true, true, "--token"),
            Err(ExposureError::NoToken { .. })
        ));
        assert_eq!(
            check_exposure(public, true, false, false, "--token"),
            Err(ExposureError::NoTls { addr: public })
        );
        assert_eq!(check_exposure(public, true, false, true, "--token"), Ok(()));
        assert_eq!(check_exposure(public, true, true, false, "--token"), Ok(()));
    }
}
