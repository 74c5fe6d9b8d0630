//! What an accept loop does when accepting fails (no fd left, no memory): it waits longer
//! each time, 50 ms doubling to 1 s (the fds come back as connections end; spinning would
//! only burn a core), and says so once, then at most once a minute with how many failures
//! it did not say, and once more when it accepts again (at most once per failure said): a
//! daemon out of fds wrote ten lines a second before.

use std::time::{Duration, Instant};

/// First wait after a failed accept; doubled up to [`MAX_WAIT_MS`].
const FIRST_WAIT_MS: u64 = 50;
const MAX_WAIT_MS: u64 = 1_000;
/// Longest silence while failures go on.
const SAY_EVERY_S: u64 = 60;

/// One accept loop's backoff and what it said.
#[derive(Debug)]
pub struct AcceptBackoff {
    /// Where accepts fail (`the daemon socket`, `127.0.0.1:9000`), for the log.
    place: String,
    wait: Duration,
    /// Failures since the last line said.
    unsaid: u64,
    /// When the last failure was said.
    said: Option<Instant>,
    /// A failure was said and the accepts that came after it were not yet.
    open: bool,
}

impl AcceptBackoff {
    pub fn new(place: impl Into<String>) -> Self {
        Self {
            place: place.into(),
            wait: Duration::from_millis(FIRST_WAIT_MS),
            unsaid: 0,
            said: None,
            open: false,
        }
    }

    /// An accept succeeded: the wait starts over, and a failing spell is said to be over.
    pub fn succeeded(&mut self) {
        if self.open {
            tracing::warn!(
                "accepting connections on {} again ({} more failed attempts since the last report)",
                self.place,
                self.unsaid
            );
            self.open = false;
            self.unsaid = 0;
        }
        self.wait = Duration::from_millis(FIRST_WAIT_MS);
    }

    /// An accept failed with `error`: how long to wait before the next one (said, or
    /// counted, as the module docs say).
    pub fn failed(&mut self, error: &std::io::Error) -> Duration {
        let now = Instant::now();
        if say_now(self.said, now) {
            let out_of_fds = matches!(
                error.raw_os_error(),
                Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
            );
            let why = if out_of_fds {
                " (out of file descriptors or memory)"
            } else {
                ""
            };
            let since = match self.unsaid {
                0 => String::new(),
                n => format!("; {n} more failed attempts since the last report"),
            };
            tracing::error!(
                "cannot accept a connection on {}: {error}{why}; retrying, backing off up to {} ms{since}",
                self.place,
                MAX_WAIT_MS
            );
            self.said = Some(now);
            self.unsaid = 0;
            self.open = true;
        } else {
            self.unsaid += 1;
        }
        let wait = self.wait;
        self.wait = (self.wait * 2).min(Duration::from_millis(MAX_WAIT_MS));
        wait
    }
}

/// Whether a failure at `now` is said, the last one said at `said` (`None`: none yet).
fn say_now(said: Option<Instant>, now: Instant) -> bool {
    said.is_none_or(|at| now.duration_since(at) >= Duration::from_secs(SAY_EVERY_S))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_failure_is_said_then_one_a_minute_at_most() {
        let t0 = Instant::now();
        assert!(say_now(None, t0));
        assert!(!say_now(Some(t0), t0 + Duration::from_secs(59)));
        assert!(say_now(Some(t0), t0 + Duration::from_secs(60)));
    }

    #[test]
    fn the_wait_doubles_to_a_second_and_starts_over_after_a_success() {
        let mut b = AcceptBackoff::new("test");
        let e = std::io::Error::from_raw_os_error(libc::EMFILE);
        let waits: Vec<u64> = (0..7).map(|_| b.failed(&e).as_millis() as u64).collect();
        assert_eq!(waits, [50, 100, 200, 400, 800, 1000, 1000]);
        assert_eq!(b.unsaid, 6, "said once, counted after");
        b.succeeded();
        assert!(!b.open, "the end of the spell was said");
        assert_eq!(b.failed(&e), Duration::from_millis(50));
        assert_eq!(
            b.unsaid, 1,
            "within the minute, a new failure is only counted"
        );
        assert!(!b.open);
    }
}
