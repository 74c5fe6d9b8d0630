//! Told, not guessed: an agent whose session a person stopped hears it in its next result,
//! and a poll of a session whose exit was reported says what became of it (uexec's dialect),
//! while a person's call never takes the agent's exit notices.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::{call, structured, text};
use crate::place::DaemonPlace as Place;

/// The session's state as `uexec ls --json` shows it.
fn state_of(place: &Place, id: i64) -> Option<String> {
    let out = place.command(&["ls", "--json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["sessions"]
        .as_array()?
        .iter()
        .find(|s| s["session_id"] == id)
        .and_then(|s| s["state"].as_str().map(str::to_owned))
}

#[tokio::test]
async fn a_persons_kill_reaches_the_agent_as_an_exit_notice() {
    let place = Place::new("told");
    let agent = place.client(&["--structured", "--owner", "agent-1"]).await;
    let started = call(
        &agent,
        "exec_command",
        json!({"cmd": "exec sleep 60", "login": false, "yield_time_ms": 250}),
    )
    .await;
    let id = structured(&started)["session_id"]
        .as_i64()
        .expect("running");
    // Another of its sessions ends while nobody watches: its notice is the agent's.
    let other = call(
        &agent,
        "exec_command",
        json!({"cmd": "sleep 1; exit 3", "login": false, "yield_time_ms": 250}),
    )
    .await;
    let other = structured(&other)["session_id"].as_i64().expect("running");
    let deadline = Instant::now() + Duration::from_secs(30);
    while state_of(&place, other).as_deref() != Some("exited") {
        assert!(Instant::now() < deadline, "session {other} never ended");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let killed = place.command(&["kill", &id.to_string()]).output().unwrap();
    assert_eq!(killed.status.code(), Some(0));
    let said = String::from_utf8_lossy(&killed.stdout);
    assert!(
        !said.contains(&other.to_string()),
        "the person took the agent's notice: {said}"
    );

    let next = call(&agent, "list_sessions", json!({})).await;
    let t = text(&next);
    assert!(
        t.contains(&format!(
            "Session {id} (exec sleep 60) was stopped by a person (uexec kill)"
        )),
        "{t}"
    );
    assert!(
        t.contains(&format!(
            "Session {other} (sleep 1; exit 3) exited with code 3"
        )),
        "{t}"
    );
    let notices = structured(&next)["exit_notices"].clone();
    assert!(
        notices
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["session_id"] == id && n["stopped_by"] == "a person (uexec kill)"),
        "{notices}"
    );
    // Not also listed as running in the result that says it ended: the killed one is gone,
    // the other one is listed as exited, its end for write_stdin to report.
    let listed = structured(&next)["sessions"].clone();
    let listed = listed.as_array().unwrap();
    assert!(!listed.iter().any(|s| s["session_id"] == id), "{listed:?}");
    let mine = listed
        .iter()
        .find(|s| s["session_id"] == other)
        .expect("listed");
    assert_eq!(mine["exited"], true, "{mine}");
    assert_eq!(mine["exit_code"], 3, "{mine}");
    assert!(t.contains("1 session(s), 0 running:"), "{t}");
    assert!(
        t.contains(&format!(
            "- session {other} (pipes, exited with code 3; write_stdin reports its end"
        )),
        "{t}"
    );
    // Its poll: no such process any more, and what became of it.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let poll = call(&agent, "write_stdin", json!({"session_id": id})).await;
        assert_eq!(poll.is_error, Some(true));
        let t = text(&poll);
        assert!(
            t.starts_with(&format!("write_stdin failed: Unknown process id {id}")),
            "{t}"
        );
        // Killed: its code says the signal (143 for TERM, 137 for KILL).
        if t.contains(&format!(": session {id} exited (code 1")) {
            assert!(t.ends_with(" s ago, and that was reported already"), "{t}");
            break;
        }
        assert!(Instant::now() < deadline, "{t}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    agent.cancel().await.unwrap();
}

#[tokio::test]
async fn a_poll_of_a_reported_session_says_how_it_ended() {
    let place = Place::new("told");
    let agent = place.client(&["--structured", "--owner", "agent-2"]).await;
    let done = call(
        &agent,
        "exec_command",
        json!({"cmd": "sleep 1; exit 5", "login": false, "yield_time_ms": 250}),
    )
    .await;
    let id = structured(&done)["session_id"].as_i64().expect("running");
    let reported = call(&agent, "write_stdin", json!({"session_id": id})).await;
    assert_eq!(structured(&reported)["exit_code"], 5, "{}", text(&reported));
    let again = call(&agent, "write_stdin", json!({"session_id": id})).await;
    let t = text(&again);
    assert!(
        t.starts_with(&format!(
            "write_stdin failed: Unknown process id {id}: session {id} exited (code 5) "
        )),
        "{t}"
    );
    agent.cancel().await.unwrap();
    // Codex's dialect keeps Codex's words.
    let codex = place
        .client(&["--codex-compat", "--owner", "agent-3"])
        .await;
    let gone = call(
        &codex,
        "exec_command",
        json!({"cmd": "sleep 1", "login": false, "yield_time_ms": 250}),
    )
    .await;
    let id = structured(&gone)["session_id"].as_i64().expect("running");
    call(&codex, "write_stdin", json!({"session_id": id})).await;
    let again = call(&codex, "write_stdin", json!({"session_id": id})).await;
    assert_eq!(
        text(&again),
        format!("write_stdin failed: Unknown process id {id}")
    );
    codex.cancel().await.unwrap();
}
