//! `uexec logs --since`, against a real daemon: what a session printed after a time or in
//! the last while, found through its transcript's timing, and the bad input.

use std::time::{Duration, Instant};

use crate::cli::{stderr, stdout};
use crate::cli_sessions::{assert_refused, go, on_go, start_ready, uexec};
use crate::place::DaemonPlace as Place;

#[test]
fn logs_since_a_time_or_a_duration_prints_only_what_came_after() {
    let place = Place::new("cli-sessions");
    let cmd = format!(
        "echo early-line; {}",
        on_go(&place, 0).replace("exit 0", "echo late-line")
    );
    let id = start_ready(&place, &cmd, "early-line").to_string();
    // Once the transcript has the early line, a time after it...
    let deadline = Instant::now() + Duration::from_secs(10);
    while !stdout(&uexec(&place, &["logs", &id])).contains("early-line") {
        assert!(
            Instant::now() < deadline,
            "the transcript never had the early line"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let between = uexec_core::rfc3339::format(std::time::SystemTime::now());
    go(&place, 0);
    assert_eq!(
        uexec(&place, &["wait", &id]).status.code(),
        Some(0),
        "the session ends"
    );
    // ...splits its output.
    let since = uexec(&place, &["logs", "--since", &between, &id]);
    assert_eq!(
        stdout(&since),
        "late-line\n",
        "{between}: {}",
        stderr(&since)
    );
    let hour = uexec(&place, &["logs", "--since", "1h", &id]);
    assert_eq!(
        stdout(&hour),
        "early-line\nlate-line\n",
        "{}",
        stderr(&hour)
    );
    let now = uexec(&place, &["logs", "--since", "0s", &id]);
    assert_eq!(stdout(&now), "", "{}", stderr(&now));
    // An offset is read as RFC 3339 says: the same instant, an hour east.
    let t = uexec_core::rfc3339::parse(&between).unwrap() + Duration::from_secs(3600);
    let east = uexec_core::rfc3339::format(t).replace('Z', "+01:00");
    let since = uexec(&place, &["logs", "--since", &east, &id]);
    assert_eq!(stdout(&since), "late-line\n", "{east}: {}", stderr(&since));

    for (bad, says) in [
        ("10", "neither a duration"),
        ("5x", "neither a duration"),
        ("1h30", "neither a duration"),
        (
            "2026-13-01T00:00:00Z",
            "not an RFC 3339 time (no such date)",
        ),
        ("2026-12-01T00:00:00", "not an RFC 3339 time"),
    ] {
        assert_refused(
            &place,
            &["logs", "--since", bad, &id],
            2,
            &format!("invalid value '{bad}' for '--since <DURATION|TIME>'"),
        );
        assert_refused(&place, &["logs", "--since", bad, &id], 2, says);
    }
    assert_refused(
        &place,
        &["logs", "--since", "1h", "--tail", "3", &id],
        2,
        "cannot be used with",
    );
    let help = stdout(&uexec(&place, &["logs", "--help"]));
    assert!(
        help.contains("--since <DURATION|TIME>") && help.contains("RFC"),
        "{help}"
    );
}
