//! The network allowlist: an HTTP proxy that uexec runs per session, the only way out of the
//! session's network namespace, and the source of the engine's network-policy verdicts.
//! 1. at plan time, uexec binds a Unix socket for the session ([`ProxySocket`]) and sets
//!    `HTTP(S)_PROXY`, `ALL_PROXY` and friends to `http://127.0.0.1:PROXY_PORT`;
//! 2. inside the namespace, the launcher listens on 127.0.0.1:[`PROXY_PORT`] and hands the
//!    listening socket to uexec through that Unix socket (`SCM_RIGHTS`), then runs the
//!    command. A socket keeps the network namespace it was made in: uexec accepts the
//!    command's connections directly, and each is relayed once, by uexec (a bridge in the
//!    namespace relaying to a Unix socket halved a fast download's throughput). The first
//!    handover closes the Unix socket, so nothing else can use it;
//! 3. the session's policy monitor (the socket itself) serves the proxy: `CONNECT host:port`,
//!    absolute-URI requests (`GET http://host/...`) and SOCKS5 `CONNECT`s (told apart by
//!    their first byte) to an allowed host are relayed; any other gets a 403 (SOCKS5: "not
//!    allowed by ruleset") and the monitor calls `fail_and_terminate("network access to
//!    HOST denied by the allowlist")`: the End is failed, naming the host. With
//!    [`OnDenial::Record`] it records the same verdict instead and the command runs on: the
//!    next snapshot reports it (`denied: true`) and the End is failed with it;
//! 4. after the exit, the monitor still accepts what is queued for
//!    [`LATE_CONNECTION_GRACE_MS`] (below the engine's late-failure grace) and lets every
//!    judgement finish, so a denial that races the exit is still seen. Nothing in the
//!    sandbox outlives the command (the pid namespace takes what it left behind before the
//!    launcher exits), so all the proxy will ever judge is queued by the time uexec sees the
//!    exit, and each judgement ends at once: the clients are gone. A request head cut short
//!    by that end is judged on its request line, so a request sent as the sandbox dies is not
//!    lost either.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use super::OnDenial;
use crate::{MonitorHandle, PolicyMonitor};

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

/// One allowlist entry: `host`, `*.domain` (its subdomains) or either with `:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowEntry {
    /// Lowercase; starts with `*.` for a domain's subdomains.
    pub host: String,
    /// Any port when `None`.
    pub port: Option<u16>,
}

impl AllowEntry {
    /// Parses `host`, `*.domain`, `host:port`, `[v6]` or `[v6]:port`.
    pub fn parse(entry: &str) -> Result<Self, String> {
        let bad = || format!("{entry:?} is neither a host nor host:port");
        let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
            let (v6, after) = rest.split_once(']').ok_or_else(bad)?;
            v6.parse::<std::net::Ipv6Addr>().map_err(|_| bad())?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(bad)?),
            };
            (v6.to_owned(), port)
        } else {
            match entry.rsplit_once(':') {
                Some((h, p)) => (h.to_owned(), Some(p)),
                None => (entry.to_owned(), None),
            }
        };
        let port = match port {
            None => None,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => Some(n),
                _ => return Err(bad()),
            },
        };
        let name = host.strip_prefix("*.").unwrap_or(&host);
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        };
        let valid = name.parse::<std::net::IpAddr>().is_ok()
            || (!name.is_empty() && name.split('.').all(label_ok));
        if !valid {
            return Err(bad());
        }
        Ok(Self {
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    /// Whether a connection to `host:port` is allowed by this entry.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        match self.host.strip_prefix("*.") {
            Some(domain) => host.ends_with(&format!(".{domain}")),
            None => host == self.host,
        }
    }
}

/// The variables that point tools at the proxy.
pub fn proxy_env() -> Vec<(&'static str, String)> {
    let url = format!("http://127.0.0.1:{PROXY_PORT}");
    let mut env: Vec<(&'static str, String)> = [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "npm_config_proxy",
        "npm_config_https_proxy",
        "YARN_HTTP_PROXY",
        "YARN_HTTPS_PROXY",
        "PIP_PROXY",
    ]
    .into_iter()
    .map(|name| (name, url.clone()))
    .collect();
    let local = "localhost,127.0.0.1,::1".to_owned();
    env.push(("NO_PROXY", local.clone()));
    env.push(("no_proxy", local));
    env
}

/// The session's end of the proxy: a Unix socket (removed when dropped) and the allowlist.
#[derive(Debug)]
pub struct ProxySocket {
    listener: Option<UnixListener>,
    path: PathBuf,
    allow: Vec<AllowEntry>,
    on_denial: OnDenial,
}

impl ProxySocket {
    /// Binds a fresh socket in `dir` (created 0700 when missing).
    pub fn bind(dir: &Path, allow: Vec<AllowEntry>, on_denial: OnDenial) -> std::io::Result<Self> {
        crate::fs::private_dir(dir)?;
        let path = dir.join(format!(
            "proxy-{}-{:016x}.sock",
            std::process::id(),
            rand::random::<u64>()
        ));
        let listener = UnixListener::bind(&path)?;
        listener.set_nonblocking(true)?;
        Ok(Self {
            listener: Some(listener),
            path,
            allow,
            on_denial,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ProxySocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl PolicyMonitor for ProxySocket {
    fn watch(mut self: Box<Self>, session: MonitorHandle) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let Some(socket) = self
                .listener
                .take()
                .and_then(|l| tokio::net::UnixListener::from_std(l).ok())
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
            // The one handover is in: nobody else may use the socket.
            drop(socket);
            let _ = std::fs::remove_file(&self.path);
            let listener = match listener {
                Ok(listener) => listener,
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
                Duration::from_millis(crate::limits::LATE_FAILURE_GRACE_MS),
                async { while judging.join_next().await.is_some() {} },
            )
            .await;
        })
    }
}

/// The listening socket of 127.0.0.1:PROXY_PORT in the command's namespace, as the launcher
/// hands it over: the first connection to the proxy socket, and the fd it carries.
async fn receive_port(
    socket: &tokio::net::UnixListener,
) -> std::io::Result<tokio::net::TcpListener> {
    let (stream, _) = socket.accept().await?;
    let fd = loop {
        stream.readable().await?;
        match stream.try_io(tokio::io::Interest::READABLE, || {
            crate::sys::recv_fd(stream.as_raw_fd())
        }) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            other => break other?,
        }
    };
    if !crate::sys::is_tcp_listener(fd.as_raw_fd()) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the launcher handed over something other than a TCP listener",
        ));
    }
    let listener = std::net::TcpListener::from(fd);
    listener.set_nonblocking(true)?;
    tokio::net::TcpListener::from_std(listener)
}

/// What judges a connection: the allowlist, and what a denial does to the session.
#[derive(Clone)]
struct Judge {
    allow: Arc<[AllowEntry]>,
    on_denial: OnDenial,
    session: MonitorHandle,
}

/// A connection the allowlist lets through: its client, target and request head.
struct Admitted {
    client: tokio::net::TcpStream,
    target: Target,
    head: Vec<u8>,
    /// Where the request head ends in `head` (what follows is the client's first data).
    end: usize,
}

impl Judge {
    /// Reads the request head and judges its host: a denied one gets its verdict and a 403;
    /// an allowed one comes back to be relayed. A head cut short by the end of input (the
    /// client died, as the sandbox's processes do at the exit) is judged too when its request
    /// line got past the target: it tried to reach that host.
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
            let _ = client
                .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                .await;
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
            // The verdict first: by the time the client hears of it, the session knows.
            match self.on_denial {
                OnDenial::Terminate => self.session.fail_and_terminate(message.clone()),
                OnDenial::Record => self.session.record_verdict(message.clone()),
            }
            let refusal = match target.via {
                Via::Socks5 => socks5::reply(socks5::NOT_ALLOWED).to_vec(),
                Via::Connect | Via::Forward => {
                    let body = format!("uexec: {message}\r\n");
                    format!(
                        "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .into_bytes()
                }
            };
            let _ = client.write_all(&refusal).await;
            return None;
        }
        match read {
            Head::Complete(end) => Some(Admitted {
                client,
                target,
                head,
                end,
            }),
            // An allowed request that never ended: nothing to relay.
            Head::Cut => None,
        }
    }
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
    /// Connects to the target and relays both ways until either side is done.
    async fn relay(self) {
        let Self {
            mut client,
            target,
            head,
            end,
        } = self;
        let host = target
            .host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let mut upstream = match tokio::net::TcpStream::connect((host.as_str(), target.port)).await
        {
            Ok(s) => s,
            Err(e) => {
                let answer = match target.via {
                    Via::Socks5 => socks5::reply(socks5::failure_of(&e)).to_vec(),
                    Via::Connect | Via::Forward => {
                        let body = format!("uexec: cannot reach {}: {e}\r\n", target.display());
                        format!(
                            "HTTP/1.1 502 Bad Gateway\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        )
                        .into_bytes()
                    }
                };
                let _ = client.write_all(&answer).await;
                return;
            }
        };
        let established: &[u8] = match target.via {
            Via::Connect => b"HTTP/1.1 200 Connection established\r\n\r\n",
            Via::Socks5 => &socks5::reply(socks5::SUCCEEDED),
            Via::Forward => b"",
        };
        if client.write_all(established).await.is_err() {
            return;
        }
        let rest = match target.via {
            Via::Connect | Via::Socks5 => &head[end..],
            Via::Forward => &head[..], // a plain HTTP request goes on as it came (absolute form)
        };
        if upstream.write_all(rest).await.is_err() {
            return;
        }
        let (client_in, client_out) = client.split();
        let (upstream_in, upstream_out) = upstream.split();
        let _ = tokio::try_join!(
            relay_one_way(client_in, upstream_out),
            relay_one_way(upstream_in, client_out),
        );
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
    /// A plain HTTP request in absolute form, relayed as it came.
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

/// SOCKS5 (RFC 1928) on the proxy's port, `CONNECT` only, no authentication: what tools
/// that speak SOCKS rather than HTTP (`ALL_PROXY=socks5h://127.0.0.1:3128`, `ssh -o
/// ProxyCommand='nc -X 5 ...'`, database clients) need to reach an allowed host. The target
/// is judged as an HTTP one is.
mod socks5 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::{Head, Target, Via};

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
            if head.len() > super::MAX_HEAD_BYTES {
                return None;
            }
            match client.read(&mut buf).await {
                // Cut short before its target was whole: nothing to judge.
                Ok(0) | Err(_) => return None,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_and_match() {
        let e = AllowEntry::parse("Example.com").expect("host");
        assert!(e.allows("example.com", 443) && e.allows("EXAMPLE.com", 80));
        assert!(!e.allows("a.example.com", 443));
        let w = AllowEntry::parse("*.example.com:443").expect("wildcard");
        assert!(w.allows("a.example.com", 443));
        assert!(!w.allows("example.com", 443) && !w.allows("a.example.com", 80));
        let v6 = AllowEntry::parse("[::1]:8080").expect("v6");
        assert!(v6.allows("[::1]", 8080));
        assert!(AllowEntry::parse("127.0.0.1:3000").is_ok());
        for bad in [
            "",
            "http://example.com",
            "example.com/path",
            "a b",
            "host:0",
            "host:http",
            "host:70000",
            "*.",
            "[nope]",
        ] {
            let e = AllowEntry::parse(bad).expect_err(bad);
            assert!(e.contains("neither a host nor host:port"), "{e}");
        }
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

    #[test]
    fn socks5_requests_name_their_target() {
        use socks5::{parse_request, Parsed};
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
