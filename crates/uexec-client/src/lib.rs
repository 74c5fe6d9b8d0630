//! The client side of the exec-server dialect: [`RemoteBackend`] runs the engine's sessions on
//! an exec server (`uexec serve`, or `codex exec-server`), with the same semantics as local
//! ones.
//!
//! # Architecture invariants
//! - It never knows the exec server (`uexec-server`) nor any face: it speaks the wire
//!   (`uexec-protocol`) and implements the engine's `Backend` seam (`uexec-core`), with the
//!   TLS trust of `uexec-net`.
//! - It runs no process of its own: every process it reports on lives on the server.
//! - Neither clap nor anyhow: its errors are [`ClientError`], which the engine reads as a
//!   `BackendError`. No `unsafe`.
//! - The connection's reader never waits for one process: a feed's inbox drops what does not
//!   fit and the feed reads it again.
//! - The session and the feeds meet through `inbox` and never name each other.
//!
//! Who uses it: the remote environments of `uexec mcp` (`--environment`,
//! `--environments-file`, in `uexec-mcp`), and any other face that runs commands on an exec
//! server. A crate of its own, so such a face depends on the client alone, not on the exec
//! server (`uexec-server`): the client needs only the wire types and limits
//! (`uexec-protocol`), the engine's `Backend` trait (`uexec-core`), TLS trust for `wss://`
//! (`uexec-net`) and a WebSocket client (`tokio-tungstenite`).
//!
//! Why this is more than a request per call: the server's events for a process arrive as
//! notifications that share one `seq` counter but not one order (Codex may send `exited`
//! with a lower seq than trailing output; only `closed` is last), a reconnect loses the
//! notifications sent meanwhile, and the engine wants exactly "output in order, one exit,
//! then the output closes". So:
//! 1. [`RemoteBackend::connect`] dials ([`link`]), sends `initialize {clientName: "uexec"}`
//!    and `initialized`, and keeps the server's cwd and shell as the backend's
//!    [`Placement::Remote`](uexec_core::backend::Placement);
//! 2. `spawn` registers a *feed* for a fresh process id ([`feed`]), then sends
//!    `process/start`;
//! 3. the link's reader routes each process event to its feed, which puts events back in
//!    seq order ([`sequencer`]), fills gaps with `process/read {afterSeq}`, and feeds the
//!    engine's output channel and exit oneshot;
//! 4. writes, signals and termination go through a [`control`] per process;
//! 5. when the connection drops, the session's supervisor ([`remote_session`]) dials again
//!    with `initialize {resumeSessionId}` a bounded number of times; resumed, each feed
//!    re-reads what it missed; not resumed, every live process fails with `connection to
//!    <url> lost: ...`, and the next spawn opens a fresh session.
//!
//! Requests never use `process/read`'s long poll: Codex serves one request at a time per
//! connection, so a long poll would hold up every write and signal behind it.

#![forbid(unsafe_code)]

mod backend;
mod control;
mod error;
mod feed;
mod inbox;
mod link;
mod remote_session;
pub mod sequencer;

use std::time::Duration;

pub use backend::RemoteBackend;
pub use error::ClientError;

/// Longest a request may wait for its answer (a write to a full stdin waits longer: the
/// engine bounds it itself).
pub const REQUEST_TIMEOUT_MS: u64 = 30_000;
/// Dials to resume a session after its connection dropped.
pub const RECONNECT_ATTEMPTS: u32 = 5;
/// Wait before the second dial; doubled for each further one, up to
/// [`RECONNECT_BACKOFF_MAX`].
pub const RECONNECT_BACKOFF_MS: u64 = 100;
/// Longest wait between two dials.
pub const RECONNECT_BACKOFF_MAX: Duration = Duration::from_millis(1_000);
/// How long a seq gap may last before it is filled with `process/read`.
pub const GAP_FILL_DELAY_MS: u64 = 250;
/// Events one process may hold while waiting for a missing seq; a full buffer is filled at
/// once, and what comes early into it is dropped (and read again).
pub const MAX_EARLY_EVENTS: usize = 256;
/// Bytes of output one process may hold while waiting for a missing seq (one bigger chunk is
/// held alone).
pub const MAX_EARLY_BYTES: usize = 16 * 1024 * 1024;
/// Notifications waiting for one process's feed task; more are dropped (and read again).
pub const FEED_INBOX_EVENTS: usize = 1024;
/// Bytes of output waiting for one process's feed task; more are dropped (and read again).
pub const FEED_INBOX_BYTES: usize = 16 * 1024 * 1024;
/// Interval of the client's WebSocket pings.
pub const PING_INTERVAL_MS: u64 = 15_000;
/// A server silent this long (not even a pong) is considered gone.
pub const IDLE_TIMEOUT_MS: u64 = 4 * PING_INTERVAL_MS;

/// Timers and limits of a [`RemoteBackend`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// `clientName` of `initialize`.
    pub client_name: String,
    pub request_timeout: Duration,
    pub reconnect_attempts: u32,
    pub reconnect_backoff: Duration,
    pub gap_fill_delay: Duration,
    pub max_early_events: usize,
    pub max_early_bytes: usize,
    pub feed_inbox_events: usize,
    pub feed_inbox_bytes: usize,
    pub ping_interval: Duration,
    pub idle_timeout: Duration,
    /// Whom `wss://` servers must be certified by.
    pub trust: uexec_net::tls::ClientTrust,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            client_name: "uexec".to_string(),
            request_timeout: Duration::from_millis(REQUEST_TIMEOUT_MS),
            reconnect_attempts: RECONNECT_ATTEMPTS,
            reconnect_backoff: Duration::from_millis(RECONNECT_BACKOFF_MS),
            gap_fill_delay: Duration::from_millis(GAP_FILL_DELAY_MS),
            max_early_events: MAX_EARLY_EVENTS,
            max_early_bytes: MAX_EARLY_BYTES,
            feed_inbox_events: FEED_INBOX_EVENTS,
            feed_inbox_bytes: FEED_INBOX_BYTES,
            ping_interval: Duration::from_millis(PING_INTERVAL_MS),
            idle_timeout: Duration::from_millis(IDLE_TIMEOUT_MS),
            trust: uexec_net::tls::ClientTrust::default(),
        }
    }
}

/// Locks a std mutex, ignoring poisoning: every critical section here leaves its data
/// consistent, and a panicked task must not take the client down with it.
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
