//! The numbers of the contract (SPEC §2–§7), each with its unit in its name, and the pure
//! functions that apply them to what a caller asked for.

/// Default observation window of `exec_command`.
pub const DEFAULT_EXEC_YIELD_TIME_MS: u64 = 10_000;
/// Default observation window of `write_stdin`.
pub const DEFAULT_WRITE_YIELD_TIME_MS: u64 = 250;
/// Floor of any window that writes or starts something.
pub const MIN_YIELD_TIME_MS: u64 = 250;
/// Ceiling of any window that writes or starts something.
pub const MAX_YIELD_TIME_MS: u64 = 30_000;
/// Floor of an empty poll (`write_stdin` with no chars): polling is not busy-waiting.
pub const MIN_EMPTY_POLL_YIELD_TIME_MS: u64 = 5_000;
/// Ceiling of an empty poll.
pub const MAX_EMPTY_POLL_YIELD_TIME_MS: u64 = 300_000;
/// Default token budget of one snapshot body.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u64 = 10_000;
/// Highest token budget a caller may get (configurable per store).
pub const OUTPUT_TOKEN_POLICY_MAX: u64 = 10_000;
/// How long `exec_command` waits for an exit before storing the session.
pub const EARLY_EXIT_GRACE_MS: u64 = 150;
/// After an exit, how long a call waits for the output to close.
pub const POST_EXIT_CLOSE_WAIT_MS: u64 = 50;
/// After an exit, how long the lifecycle watcher waits for the output to close.
pub const TRAILING_OUTPUT_GRACE_MS: u64 = 100;
/// After an exit, how long a policy monitor may take to deliver its verdict.
pub const LATE_FAILURE_GRACE_MS: u64 = 100;
/// Pause after writing to a TTY so the echo and the reaction land in the window.
pub const TTY_WRITE_SETTLE_MS: u64 = 100;
/// Pending output kept per session between calls (half head, half tail).
pub const OUTPUT_BUFFER_MAX_BYTES: usize = 1024 * 1024;
/// Largest `OutputDelta` event chunk.
pub const OUTPUT_DELTA_MAX_BYTES: usize = 8192;
/// Sessions a store holds before a new one prunes an old one.
pub const MAX_SESSIONS: usize = 64;
/// The most recently used sessions that pruning never picks.
pub const PROTECTED_RECENT_SESSIONS: usize = 8;
/// Largest `chars` a single `write_stdin` accepts.
pub const MAX_WRITE_CHARS_BYTES: usize = 1024 * 1024;
/// Session ids are drawn from `[MIN_SESSION_ID, MAX_SESSION_ID_EXCLUSIVE)`.
pub const MIN_SESSION_ID: i32 = 1000;
/// Upper bound (exclusive) of random session ids.
pub const MAX_SESSION_ID_EXCLUSIVE: i32 = 100_000;
/// Rows and columns of every PTY.
pub const PTY_ROWS: u16 = 24;
/// Columns of every PTY.
pub const PTY_COLS: u16 = 80;

/// Observation window of `exec_command`: `requested` clamped to `250..=30000` ms; a negative
/// request lands on the floor.
pub fn exec_window_ms(requested: Option<i64>) -> u64 {
    clamp_ms(
        requested,
        DEFAULT_EXEC_YIELD_TIME_MS,
        MIN_YIELD_TIME_MS,
        MAX_YIELD_TIME_MS,
    )
}

/// Observation window of `write_stdin`: an empty poll waits `5000..=300000` ms, a write
/// `250..=30000` ms.
pub fn write_window_ms(requested: Option<i64>, is_poll: bool) -> u64 {
    if is_poll {
        clamp_ms(
            requested,
            DEFAULT_WRITE_YIELD_TIME_MS,
            MIN_EMPTY_POLL_YIELD_TIME_MS,
            MAX_EMPTY_POLL_YIELD_TIME_MS,
        )
    } else {
        clamp_ms(
            requested,
            DEFAULT_WRITE_YIELD_TIME_MS,
            MIN_YIELD_TIME_MS,
            MAX_YIELD_TIME_MS,
        )
    }
}

fn clamp_ms(requested: Option<i64>, default: u64, lo: u64, hi: u64) -> u64 {
    match requested {
        None => default.clamp(lo, hi),
        Some(v) if v < 0 => lo,
        Some(v) => (v as u64).clamp(lo, hi),
    }
}

/// Token budget of one snapshot: the request (default 10 000) capped at `policy_max`.
pub fn output_token_budget(requested: Option<u64>, policy_max: u64) -> u64 {
    requested
        .unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS)
        .min(policy_max)
}

/// Tokens are approximated as `ceil(bytes / 4)`.
pub fn approx_tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

/// `timeout_ms` range: 100 ms to 24 hours.
pub const MIN_TIMEOUT_MS: i64 = 100;
pub const MAX_TIMEOUT_MS: i64 = 24 * 60 * 60 * 1000;
/// After the timeout's SIGTERM, how long the group has before SIGKILL.
pub const TIMEOUT_KILL_GRACE_MS: u64 = 2_000;
/// The exit code a timed-out command reports, as `timeout(1)` does.
pub const TIMEOUT_EXIT_CODE: i32 = 124;
/// Sessions whose unwatched exit waits to be noticed, per store; older notices give way.
pub const MAX_EXIT_NOTICES: usize = 64;
/// `wait`: the window when none is given.
pub const DEFAULT_WAIT_YIELD_TIME_MS: u64 = 30_000;
/// `wait`: most sessions one call may wait on.
pub const MAX_WAIT_SESSIONS: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_window_clamps_and_defaults() {
        assert_eq!(exec_window_ms(None), 10_000);
        assert_eq!(exec_window_ms(Some(0)), 250);
        assert_eq!(exec_window_ms(Some(-5)), 250);
        assert_eq!(exec_window_ms(Some(10)), 250);
        assert_eq!(exec_window_ms(Some(1_000)), 1_000);
        assert_eq!(exec_window_ms(Some(i64::MAX)), 30_000);
    }

    #[test]
    fn write_window_depends_on_poll_or_write() {
        assert_eq!(write_window_ms(None, true), 5_000);
        assert_eq!(write_window_ms(None, false), 250);
        assert_eq!(write_window_ms(Some(1), false), 250);
        assert_eq!(write_window_ms(Some(400_000), true), 300_000);
        assert_eq!(write_window_ms(Some(400_000), false), 30_000);
        assert_eq!(write_window_ms(Some(-1), true), 5_000);
    }

    #[test]
    fn token_budget_is_capped() {
        assert_eq!(output_token_budget(None, OUTPUT_TOKEN_POLICY_MAX), 10_000);
        assert_eq!(output_token_budget(Some(50), OUTPUT_TOKEN_POLICY_MAX), 50);
        assert_eq!(output_token_budget(Some(u64::MAX), 10_000), 10_000);
    }

    #[test]
    fn tokens_round_up() {
        assert_eq!(approx_tokens(0), 0);
        assert_eq!(approx_tokens(1), 1);
        assert_eq!(approx_tokens(4), 1);
        assert_eq!(approx_tokens(4001), 1001);
    }
}
