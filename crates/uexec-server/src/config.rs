//! The numbers of the exec server, each with its unit in its name, and [`ServerConfig`] that
//! carries them (tests shorten the timers; `uexec serve` flags override a few).

use std::time::Duration;

/// Output kept per process for `process/read`: the newest whole chunks that fit.
pub const RETAINED_OUTPUT_MAX_BYTES: usize = 1024 * 1024;
/// Largest chunk of one `process/output` notification (Codex reads 8 KiB at a time).
pub const OUTPUT_CHUNK_MAX_BYTES: usize = 8 * 1024;
/// How long a closed process stays readable (and keeps its id taken).
pub const EXITED_PROCESS_RETENTION_MS: u64 = 30_000;
/// How long a session outlives its dropped connection, waiting for `resumeSessionId`.
pub const DETACHED_SESSION_TTL_MS: u64 = 30_000;
/// The wire's message and frame limits live with the wire types: the client reads with them too.
pub use uexec_protocol::limits::{MAX_FRAME_BYTES, MAX_MESSAGE_BYTES};
/// Interval of WebSocket pings from the server.
pub const PING_INTERVAL_MS: u64 = 30_000;
/// A WebSocket peer silent this long (not even a pong) is considered gone.
pub const IDLE_TIMEOUT_MS: u64 = 3 * PING_INTERVAL_MS;
/// Messages queued for one connection before producers wait (backpressure to the processes).
pub const OUTBOUND_QUEUE_MESSAGES: usize = 256;
/// Writes queued per process stdin; one more is refused (the connection never waits for a
/// process's stdin).
pub const STDIN_QUEUE_WRITES: usize = 64;
/// Bytes queued per process stdin; a write that would go past it is refused unless the queue
/// is empty.
pub const STDIN_QUEUE_MAX_BYTES: usize = 8 * 1024 * 1024;
/// Requests of one connection waiting for their answer (long polls, queued stdin writes);
/// more that may wait are refused at once.
pub const MAX_PENDING_ANSWERS: usize = 4096;
/// `writeId`s remembered per process for idempotency.
pub const WRITE_IDS_REMEMBERED: usize = 4096;

/// Limits and timers of one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    pub retained_output_max_bytes: usize,
    pub output_chunk_max_bytes: usize,
    pub exited_process_retention: Duration,
    pub detached_session_ttl: Duration,
    pub max_message_bytes: usize,
    pub max_frame_bytes: usize,
    pub ping_interval: Duration,
    pub idle_timeout: Duration,
    /// `[bash|sh, "-lc", cmd]` starts from a shell snapshot of the profile instead of
    /// running it each time (`uexec_core::shell_snapshot`); `--no-shell-snapshot` turns it off.
    pub shell_snapshot: bool,
    /// Limits of each process's cgroup together with its descendants (`--memory-max`,
    /// `--pids-max`, `--cpu-max`); the local backend refuses a spawn it cannot limit.
    pub limits: uexec_core::policy::Limits,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            retained_output_max_bytes: RETAINED_OUTPUT_MAX_BYTES,
            output_chunk_max_bytes: OUTPUT_CHUNK_MAX_BYTES,
            exited_process_retention: Duration::from_millis(EXITED_PROCESS_RETENTION_MS),
            detached_session_ttl: Duration::from_millis(DETACHED_SESSION_TTL_MS),
            max_message_bytes: MAX_MESSAGE_BYTES,
            max_frame_bytes: MAX_FRAME_BYTES,
            ping_interval: Duration::from_millis(PING_INTERVAL_MS),
            idle_timeout: Duration::from_millis(IDLE_TIMEOUT_MS),
            shell_snapshot: true,
            limits: uexec_core::policy::Limits::default(),
        }
    }
}

/// Locks a std mutex, ignoring poisoning: every critical section here leaves its data
/// consistent, and a panicked task must not take the server down with it.
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
