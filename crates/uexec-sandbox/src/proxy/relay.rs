//! The relay (step 3 of the module docs, once a connection is admitted): connect to the
//! addresses the judge let through, answer the client as it asked, then copy both ways.
//! Here, apart from the judge, because a relay never judges again: it takes an
//! [`Admitted`] connection, and the accept loop aborts every relay at the exit while it
//! still lets every judgement finish.
//! 1. connect to the target's screened addresses (never looked up again); a failure is a
//!    502 or a SOCKS5 failure reply;
//! 2. tell the client the tunnel is up (`CONNECT`, SOCKS5) and send what goes first;
//! 3. copy both ways with a buffer that grows while reads fill it; a plain-HTTP request
//!    sends upstream no more than its body.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::answer::unreachable;
use super::forward;
use super::head::{Target, Via};
use super::socks5;

/// Buffer per direction of a relayed connection at first. Each read that fills it doubles
/// it, up to [`RELAY_BUFFER_MAX_BYTES`]: a bulk download gets the large buffer (fewer reads,
/// writes and wake-ups per byte: 1 MiB relays ~12 % faster than 256 KiB, and tokio's 8 KiB
/// costs two thirds), while the many small connections of a package install stay small.
const RELAY_BUFFER_BYTES: usize = 64 * 1024;
/// Largest buffer per direction: a relayed connection holds at most twice this.
const RELAY_BUFFER_MAX_BYTES: usize = 1024 * 1024;

/// A connection the allowlist lets through: its client, target, where it goes, and what
/// goes there.
pub(super) struct Admitted {
    pub(super) client: tokio::net::TcpStream,
    pub(super) target: Target,
    /// The addresses the target resolved to that it may reach (never looked up again).
    pub(super) addrs: Vec<SocketAddr>,
    /// What goes upstream first: the client's first data (a tunnel), or the request in
    /// origin form with what of its body came with the head.
    pub(super) first: Vec<u8>,
    /// How much more of the client's data goes upstream: all of it for a tunnel (`None`).
    pub(super) more: Option<forward::Body>,
}

impl Admitted {
    /// Connects to the target's addresses and relays both ways until either side is done
    /// (a plain-HTTP request: until its answer is).
    pub(super) async fn relay(self) {
        let Self {
            mut client,
            target,
            addrs,
            first,
            more,
        } = self;
        let mut upstream = match tokio::net::TcpStream::connect(&addrs[..]).await {
            Ok(s) => s,
            Err(e) => return unreachable(client, &target, &e).await,
        };
        let established: &[u8] = match target.via {
            Via::Connect => b"HTTP/1.1 200 Connection established\r\n\r\n",
            Via::Socks5 => &socks5::reply(socks5::SUCCEEDED),
            Via::Forward => b"",
        };
        if client.write_all(established).await.is_err() {
            return;
        }
        if upstream.write_all(&first).await.is_err() {
            return;
        }
        let (client_in, client_out) = client.split();
        let (upstream_in, upstream_out) = upstream.split();
        match more {
            Some(forward::Body::Length(n)) => {
                let _ = tokio::try_join!(
                    upload_request(client_in, upstream_out, n),
                    relay_one_way(upstream_in, client_out),
                );
            }
            None | Some(forward::Body::UntilEnd) => {
                let _ = tokio::try_join!(
                    relay_one_way(client_in, upstream_out),
                    relay_one_way(upstream_in, client_out),
                );
            }
        }
    }
}

/// The rest of a plain-HTTP request's body: `n` bytes from `from` to `to`. What the client
/// sends after them (a next request, on a connection it keeps) goes nowhere: it is read and
/// dropped until the client ends, so that closing the connection does not reset it under an
/// answer still on its way.
async fn upload_request(
    mut from: tokio::net::tcp::ReadHalf<'_>,
    mut to: tokio::net::tcp::WriteHalf<'_>,
    mut n: u64,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; RELAY_BUFFER_BYTES];
    loop {
        let got = from.read(&mut buf).await?;
        if got == 0 {
            return Ok(());
        }
        let part = got.min(usize::try_from(n).unwrap_or(usize::MAX));
        if part > 0 {
            to.write_all(&buf[..part]).await?;
            n -= part as u64;
        }
    }
}

/// Copies `from` to `to` until `from` ends (then shuts `to`'s writing half, as a half-closed
/// TCP connection expects) or either fails; the buffer grows while reads fill it.
async fn relay_one_way(
    mut from: tokio::net::tcp::ReadHalf<'_>,
    mut to: tokio::net::tcp::WriteHalf<'_>,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; RELAY_BUFFER_BYTES];
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            return to.shutdown().await;
        }
        to.write_all(&buf[..n]).await?;
        if n == buf.len() && buf.len() < RELAY_BUFFER_MAX_BYTES {
            buf.resize(buf.len() * 2, 0);
        }
    }
}
