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
//!
//! The room, by concern: this file is the hand-over and the accept loop (steps 1, 2 and 4);
//! `judge` reads a request and decides (step 3); `relay` carries an admitted connection;
//! `answer` is what a client is told when nothing is relayed; `socks5` reads and answers
//! SOCKS5; `head` is the request head and its target; `forward` (origin form), `address`
//! (resolve and screen) and `allow` (the allowlist's entries, the port and the variables)
//! stand alone. Each child uses only children later in that list, never this file.

mod address;
mod allow;
mod answer;
mod forward;
mod head;
mod judge;
mod relay;
mod socks5;

pub use allow::{proxy_env, PROXY_PORT};

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::time::Instant;

use uexec_core::policy::{AllowEntry, OnDenial};
use uexec_core::{MonitorHandle, PolicyMonitor};

use judge::Judge;

/// How long, after the exit, connections already made are still judged.
const LATE_CONNECTION_GRACE_MS: u64 = 60;

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
    /// ([`uexec_core::backend::SpawnSpec::passed_fd`]). Both close on exec: only a spawn that
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
