//! The network allowlist: an HTTP proxy that uexec runs per session, the only way out of the
//! session's network namespace, and the source of the engine's network-policy verdicts.
//! 1. at plan time, uexec makes a socket pair for the session ([`ProxySocket::pair`]): it
//!    keeps one end, and the launcher inherits the other as a descriptor (`--proxy-fd 3`:
//!    fd 3 of a cold spawn, or one more descriptor of a warm launcher's launch message).
//!    Nothing names the pair in the filesystem, so no other process, another user's or a
//!    sandboxed command that can write the sandbox base, can swap it and receive the
//!    command's connections. uexec sets `HTTP(S)_PROXY`, `ALL_PROXY` and friends to
//!    `http://127.0.0.1:PROXY_PORT` ([`proxy_env`]);
//! 2. inside the namespace, the launcher listens on 127.0.0.1:[`PROXY_PORT`] and hands the
//!    listening socket to uexec over its end of the pair (`SCM_RIGHTS`), closes that end,
//!    then runs the command. A socket keeps the network namespace it was made in: uexec
//!    accepts the command's connections directly, and each is relayed once, by uexec (a
//!    bridge in the namespace relaying to a Unix socket halved a fast download's
//!    throughput);
//! 3. the session's policy monitor (the socket itself) serves the proxy: `CONNECT host:port`,
//!    absolute-URI requests (`GET http://host/...`, sent on in origin form: [`forward`]) and
//!    SOCKS5 `CONNECT`s ([`socks5`], told apart by their first byte) to an allowed host are
//!    relayed, to the addresses the name resolved to, once, and only public ones unless the
//!    list names the address itself ([`address`]); any other gets a 403 (SOCKS5: "not
//!    allowed by ruleset") and the monitor calls `fail_and_terminate("network access to
//!    HOST denied ...")`: the End is failed, naming the host. With [`OnDenial::Record`] it
//!    records the same verdict instead and the command runs on: the next snapshot reports it
//!    (`denied: true`) and the End is failed with it;
//! 4. after the exit, the monitor still accepts what is queued for
//!    [`LATE_CONNECTION_GRACE_MS`] (below the engine's late-failure grace) and lets every
//!    judgement finish, so a denial that races the exit is still seen. Nothing in the
//!    sandbox outlives the command (the pid namespace takes what it left behind before the
//!    launcher exits), so all the proxy will ever judge is queued by the time uexec sees the
//!    exit, and each judgement ends at once: the clients are gone. A request head cut short
//!    by that end is judged on its request line, so a request sent as the sandbox dies is not
//!    lost either.

mod address;
mod allow;
mod forward;
mod socks5;

pub use allow::proxy_env;

use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use uexec_core::policy::{AllowEntry, OnDenial};
use uexec_core::{MonitorHandle, PolicyMonitor};

/// The proxy's port on the namespace's loopback.
pub const PROXY_PORT: u16 = 3128;
/// How long, after the exit, connections already made are still judged.
const LATE_CONNECTION_GRACE_MS: u64 = 60;
/// Longest request head the proxy reads.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Buffer per direction of a relayed connection at first. Each read that fills it doubles
/// it, up to [`RELAY_BUFFER_MAX_BYTES`]: a bulk download gets the large buffer (fewer reads,
/// writes and wake-ups per byte: 1 MiB relays ~12 % faster than 256 KiB, and tokio's 8 KiB
/// costs two thirds), while the many small connections of a package install stay small.
const RELAY_BUFFER_BYTES: usize = 64 * 1024;
/// Largest buffer per direction: a relayed connection holds at most twice this.
const RELAY_BUFFER_MAX_BYTES: usize = 1024 * 1024;
/// How long a client may take to send its request head.
const HEAD_TIMEOUT_MS: u64 = 10_000;

/// The session's end of the proxy hand-over (a socket pair, step 1 of the module docs) and
/// the allowlist.
#[derive(Debug)]
pub struct ProxySocket {
    socket: Option<UnixStream>,
    allow: Vec<AllowEntry>,
    on_denial: OnDenial,
}

impl ProxySocket {
    /// A fresh pair: the session's end, and the launcher's, for the spawn to pass on
    /// ([`crate::backend::SpawnSpec::passed_fd`]). Both close on exec: only a spawn that
    /// passes the launcher's end on gives it away.
    pub fn pair(allow: Vec<AllowEntry>, on_denial: OnDenial) -> std::io::Result<(Self, OwnedFd)> {
        let (ours, theirs) = UnixStream::pair()?;
        ours.set_nonblocking(true)?;
        let socket = Self {
            socket: Some(ours),
            allow,
            on_denial,
        };
        Ok((socket, theirs.into()))
    }
}

impl PolicyMonitor for ProxySocket {
    fn watch(mut self: Box<Self>, session: MonitorHandle) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let Some(socket) = self
                .socket
                .take()
                .and_then(|s| tokio::net::UnixStream::from_std(s).ok())
            else {
                session.fail_and_terminate("the network proxy could not start");
                return;
            };
            let grace = Duration::from_millis(LATE_CONNECTION_GRACE_MS);
            let exited = session.exited();
            tokio::pin!(exited);
            // Set once the exit is seen: until when queued connections are still taken.
            let mut late_until = None;
            let listener = {
                let receiving = receive_port(&socket);
                tokio::pin!(receiving);
                tokio::select! {
                    listener = &mut receiving => listener,
                    // A command that exits at once: its handover may still be queued.
                    _ = &mut exited => {
                        let until = Instant::now() + grace;
                        late_until = Some(until);
                        match tokio::time::timeout_at(until, &mut receiving).await {
                            Ok(listener) => listener,
                            Err(_) => return,
                        }
                    }
                }
            };
            // The one handover is in: the pair has served.
            drop(socket);
            let listener = match listener {
                Ok(Some(listener)) => listener,
                // The launcher closed its end without a listener: it had no network
                // namespace to confine (best effort), or it failed and said why.
                Ok(None) => return,
                Err(e) => {
                    session.fail_and_terminate(format!("the network proxy could not start: {e}"));
                    return;
                }
            };
            let judge = Judge {
                allow: std::mem::take(&mut self.allow).into(),
                on_denial: self.on_denial,
                session: session.clone(),
            };
            let mut judging = tokio::task::JoinSet::new();
            let mut relaying = tokio::task::JoinSet::new();
            while late_until.is_none() {
                tokio::select! {
                    accepted = listener.accept() => {
                        if let Ok((client, _)) = accepted {
                            judging.spawn(judge.clone().judge(client));
                        }
                    }
                    Some(judged) = judging.join_next(), if !judging.is_empty() => {
                        if let Ok(Some(admitted)) = judged {
                            relaying.spawn(admitted.relay());
                        }
                    }
                    _ = &mut exited => late_until = Some(Instant::now() + grace),
                }
            }
            // Step 4: what is queued is judged, and relayed no further.
            let grace = tokio::time::sleep_until(late_until.unwrap_or_else(Instant::now));
            tokio::pin!(grace);
            loop {
                tokio::select! {
                    biased;
                    accepted = listener.accept() => {
                        if let Ok((client, _)) = accepted {
                            judging.spawn(judge.clone().judge(client));
                        }
                    }
                    _ = &mut grace => break,
                }
            }
            relaying.abort_all();
            // Their clients are gone, so every judgement ends at once (at the end of input);
            // past the engine's grace, a verdict would change nothing.
            let _ = tokio::time::timeout(
                Duration::from_millis(uexec_core::limits::LATE_FAILURE_GRACE_MS),
                async { while judging.join_next().await.is_some() {} },
            )
            .await;
        })
    }
}

/// The listening socket of 127.0.0.1:PROXY_PORT in the command's namespace, as the launcher
/// hands it over on its end of the pair; `None` when it closed its end without one.
async fn receive_port(
    socket: &tokio::net::UnixStream,
) -> std::io::Result<Option<tokio::net::TcpListener>> {
    let fd = loop {
        socket.readable().await?;
        match socket.try_io(tokio::io::Interest::READABLE, || {
            uexec_sys::recv_fd(socket.as_raw_fd())
        }) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            other => break other?,
        }
    };
    if !uexec_sys::is_tcp_listener(fd.as_raw_fd()) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the launcher handed over something other than a TCP listener",
        ));
    }
    let listener = std::net::TcpListener::from(fd);
    listener.set_nonblocking(true)?;
    tokio::net::TcpListener::from_std(listener).map(Some)
}

/// What judges a connection: the allowlist, and what a denial does to the session.
#[derive(Clone)]
struct Judge {
    allow: Arc<[AllowEntry]>,
    on_denial: OnDenial,
    session: MonitorHandle,
}

/// A connection the allowlist lets through: its client, target, where it goes, and what
/// goes there.
struct Admitted {
    client: tokio::net::TcpStream,
    target: Target,
    /// The addresses the target resolved to that it may reach (never looked up again).
    addrs: Vec<SocketAddr>,
    /// What goes upstream first: the client's first data (a tunnel), or the request in
    /// origin form with what of its body came with the head.
    first: Vec<u8>,
    /// How much more of the client's data goes upstream: all of it for a tunnel (`None`).
    more: Option<forward::Body>,
}

impl Judge {
    /// Reads the request head and judges its host and the addresses it resolves to: a
    /// denied one gets its verdict and a 403; an allowed one comes back to be relayed. A head
    /// cut short by the end of input (the client died, as the sandbox's processes do at the
    /// exit) is judged too when its request line got past the target: it tried to reach
    /// that host.
    async fn judge(self, mut client: tokio::net::TcpStream) -> Option<Admitted> {
        let mut head = Vec::with_capacity(1024);
        let read = tokio::time::timeout(
            Duration::from_millis(HEAD_TIMEOUT_MS),
            read_request(&mut client, &mut head),
        )
        .await;
        let Ok(Some((target, read))) = read else {
            return None;
        };
        let Some(target) = target else {
            // (A SOCKS5 request this proxy does not take was refused as it was read.)
            let _ = client.write_all(&http_answer("400 Bad Request", "")).await;
            return None;
        };
        if !self
            .allow
            .iter()
            .any(|a| a.allows(&target.host, target.port))
        {
            let message = format!(
                "network access to {} denied by the allowlist",
                target.display()
            );
            self.deny(client, &target, message).await;
            return None;
        }
        let resolved = match address::resolve(&target.host, target.port).await {
            Ok(resolved) => resolved,
            Err(e) => {
                if matches!(read, Head::Complete(_)) {
                    unreachable(client, &target, &e).await;
                }
                return None;
            }
        };
        let screened = address::screen(resolved, |ip| {
            self.allow.iter().any(|a| a.names_address(ip, target.port))
        });
        if screened.permitted.is_empty() && !screened.refused.is_empty() {
            let message = non_public_message(&target, &screened.refused);
            self.deny(client, &target, message).await;
            return None;
        }
        let Head::Complete(end) = read else {
            // An allowed request that never ended: nothing to relay.
            return None;
        };
        let (first, more) = match target.via {
            Via::Connect | Via::Socks5 => (head[end..].to_vec(), None),
            Via::Forward => match forward::rewrite(&head[..end]) {
                Ok(origin) => {
                    let mut first = origin.head;
                    let came = &head[end..];
                    let more = match origin.body {
                        forward::Body::Length(n) => {
                            let now = came.len().min(usize::try_from(n).unwrap_or(usize::MAX));
                            first.extend_from_slice(&came[..now]);
                            forward::Body::Length(n - now as u64)
                        }
                        forward::Body::UntilEnd => {
                            first.extend_from_slice(came);
                            forward::Body::UntilEnd
                        }
                    };
                    (first, Some(more))
                }
                Err(why) => {
                    let body = format!("uexec: the proxy refuses this request: {why}\r\n");
                    let _ = client
                        .write_all(&http_answer("400 Bad Request", &body))
                        .await;
                    return None;
                }
            },
        };
        Some(Admitted {
            client,
            target,
            addrs: screened.permitted,
            first,
            more,
        })
    }

    /// A denial: the session's verdict first (by the time the client hears of it, the
    /// session knows), then the refusal.
    async fn deny(&self, mut client: tokio::net::TcpStream, target: &Target, message: String) {
        match self.on_denial {
            OnDenial::Terminate => self.session.fail_and_terminate(message.clone()),
            OnDenial::Record => self.session.record_verdict(message.clone()),
        }
        let refusal = match target.via {
            Via::Socks5 => socks5::reply(socks5::NOT_ALLOWED).to_vec(),
            Via::Connect | Via::Forward => {
                http_answer("403 Forbidden", &format!("uexec: {message}\r\n"))
            }
        };
        let _ = client.write_all(&refusal).await;
    }
}

/// The verdict on an allowed name whose every address is non-public (see [`address`]).
fn non_public_message(target: &Target, refused: &[(SocketAddr, &'static str)]) -> String {
    let list = refused
        .iter()
        .map(|(addr, kind)| format!("{}: {kind}", addr.ip()))
        .collect::<Vec<_>>()
        .join("; ");
    let first = refused
        .first()
        .map_or_else(String::new, |(a, _)| a.to_string());
    let host = target.host.trim_start_matches('[').trim_end_matches(']');
    let what = if host.parse::<IpAddr>().is_ok() {
        format!("{host} is a non-public address ({list})")
    } else {
        format!("{host} resolved to a non-public address ({list})")
    };
    format!(
        "network access to {} denied: {what}; to allow it, name that address in the \
         allowlist ({first})",
        target.display()
    )
}

/// An HTTP answer that closes the connection, with a plain-text body.
fn http_answer(status: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Tells the client its allowed target cannot be reached (`e`).
async fn unreachable(mut client: tokio::net::TcpStream, target: &Target, e: &std::io::Error) {
    let answer = match target.via {
        Via::Socks5 => socks5::reply(socks5::failure_of(e)).to_vec(),
        Via::Connect | Via::Forward => http_answer(
            "502 Bad Gateway",
            &format!("uexec: cannot reach {}: {e}\r\n", target.display()),
        ),
    };
    let _ = client.write_all(&answer).await;
}

/// Reads one request, HTTP or SOCKS5 (told apart by the first byte), into `head`: its
/// target (`None`: an HTTP request this proxy does not take) and how reading ended. `None`
/// when there is nothing to judge (an error, a head too long, input ended before any
/// target).
async fn read_request(
    client: &mut tokio::net::TcpStream,
    head: &mut Vec<u8>,
) -> Option<(Option<Target>, Head)> {
    let mut buf = [0u8; 4096];
    loop {
        if head.first() == Some(&socks5::VERSION) {
            return socks5::read_request(client, head).await;
        }
        if let Some(end) = find_head_end(head) {
            return Some((Target::parse(&head[..end]), Head::Complete(end)));
        }
        if head.len() > MAX_HEAD_BYTES {
            return None;
        }
        match client.read(&mut buf).await {
            Ok(0) => return Some((Target::parse_cut(head), Head::Cut)),
            Err(_) => return None,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
}

/// How reading a request head ended.
enum Head {
    /// The head ends at this offset.
    Complete(usize),
    /// The client ended its input first.
    Cut,
}

impl Admitted {
    /// Connects to the target's addresses and relays both ways until either side is done
    /// (a plain-HTTP request: until its answer is).
    async fn relay(self) {
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

fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Where a proxy request goes.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    host: String,
    port: u16,
    via: Via,
}

/// How the client asked, hence how it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// HTTP `CONNECT`: a tunnel.
    Connect,
    /// A plain HTTP request in absolute form, sent on in origin form ([`forward`]).
    Forward,
    /// A SOCKS5 `CONNECT`: a tunnel.
    Socks5,
}

impl Target {
    fn parse(head: &[u8]) -> Option<Self> {
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
    fn parse_cut(head: &[u8]) -> Option<Self> {
        let line = head.split(|&b| b == b'\r' || b == b'\n').next()?;
        if line.split(|&b| b == b' ').count() < 3 {
            return None;
        }
        Self::parse(line)
    }

    fn display(&self) -> String {
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
    fn a_non_public_refusal_says_which_address_to_name() {
        let target = Target {
            host: "localhost".into(),
            port: 8080,
            via: Via::Connect,
        };
        let refused = [
            ("127.0.0.1:8080".parse().expect("v4"), "loopback"),
            ("[::1]:8080".parse().expect("v6"), "loopback"),
        ];
        assert_eq!(
            non_public_message(&target, &refused),
            "network access to localhost:8080 denied: localhost resolved to a non-public \
             address (127.0.0.1: loopback; ::1: loopback); to allow it, name that address in \
             the allowlist (127.0.0.1:8080)"
        );
        let literal = Target {
            host: "[fd00::1]".into(),
            port: 443,
            via: Via::Socks5,
        };
        let refused = [(
            "[fd00::1]:443".parse().expect("v6"),
            "private (unique local)",
        )];
        let message = non_public_message(&literal, &refused);
        assert!(
            message.contains("fd00::1 is a non-public address")
                && message.ends_with("([fd00::1]:443)"),
            "{message}"
        );
    }

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
