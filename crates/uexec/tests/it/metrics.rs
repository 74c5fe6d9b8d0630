//! `uexec metrics`: the daemon's figures as Prometheus text, counted as the sessions start,
//! print and end, with no session id nor command line in any label.

use std::time::Duration;

use serde_json::json;

use crate::daemon::start_sleeper;
use crate::helpers::{call, eventually, marker, procs_with};
use crate::place::DaemonPlace as Place;

/// `uexec metrics` of `place`: its exit code and stdout.
fn scrape(place: &Place) -> (Option<i32>, String, String) {
    let out = place.command(&["metrics"]).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The value of the sample `name{labels}` (the whole text before the value).
fn sample(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no sample {name}: {text}"))
}

#[tokio::test]
async fn the_daemon_counts_spawns_exits_output_and_calls_with_no_session_in_a_label() {
    let place = Place::new("metrics");
    let (code, _, stderr) = scrape(&place);
    assert_eq!(code, Some(3), "no daemon: {stderr}");
    assert!(stderr.contains("no uexec daemon runs"), "{stderr}");
    assert!(place.status().is_none(), "uexec metrics starts no daemon");

    let (client, _) = place
        .plain_client(&["--structured", "--network", "off"])
        .await;
    let secret = marker();
    for cmd in [format!("echo {secret}"), "exit 3".to_owned()] {
        call(&client, "exec_command", json!({"cmd": cmd, "login": false})).await;
    }
    // Bad input is not counted; a call wider than the server's ceiling is refused, and is.
    for refused in [
        json!({"cmd": "true", "shell": "/no/such/shell"}),
        json!({"cmd": "true", "network": "on"}),
    ] {
        let r = call(&client, "exec_command", refused).await;
        assert_eq!(r.is_error, Some(true));
    }
    let (id, m) = start_sleeper(&client).await;
    let (code, text, _) = scrape(&place);
    assert_eq!(code, Some(0));
    assert_eq!(sample(&text, "uexec_sessions{state=\"running\"}"), 1.0);
    call(&client, "terminate_session", json!({"session_id": id})).await;
    eventually("the sleeper to go", Duration::from_secs(10), || {
        procs_with(&m).is_empty()
    })
    .await;

    let text = {
        let mut text = String::new();
        eventually("its end to be counted", Duration::from_secs(10), || {
            text = scrape(&place).1;
            sample(&text, "uexec_exits_total{cause=\"signal\"}") == 1.0
        })
        .await;
        text
    };
    assert_eq!(sample(&text, "uexec_spawns_total"), 3.0, "{text}");
    assert_eq!(
        sample(&text, "uexec_spawn_failures_total{cause=\"refused\"}"),
        1.0
    );
    assert_eq!(
        sample(&text, "uexec_spawn_failures_total{cause=\"not_found\"}"),
        0.0
    );
    assert_eq!(sample(&text, "uexec_exits_total{cause=\"success\"}"), 1.0);
    assert_eq!(sample(&text, "uexec_exits_total{cause=\"error\"}"), 1.0);
    assert_eq!(sample(&text, "uexec_sessions{state=\"running\"}"), 0.0);
    // `echo MARKER` and `up` of the sleeper, at least.
    assert!(sample(&text, "uexec_output_bytes_total") >= (secret.len() + 4) as f64);
    assert_eq!(
        sample(
            &text,
            "uexec_call_duration_seconds_count{call=\"exec_command\"}"
        ),
        5.0
    );
    assert!(sample(&text, "uexec_transcript_bytes") > 0.0, "{text}");
    // Secrets and unbounded values stay out of the labels.
    for leak in [secret.as_str(), &id.to_string(), "mcp:", "sleep"] {
        assert!(!text.contains(leak), "{leak} in {text}");
    }
    client.cancel().await.unwrap();
    place.stop();
}
