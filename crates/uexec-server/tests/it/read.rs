//! `process/read`: afterSeq, maxBytes, nextSeq and the long poll.

use std::time::{Duration, Instant};

use serde_json::json;
use uexec_server::config::MAX_PENDING_ANSWERS;

use crate::helpers::{unb64, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_returns_what_was_pushed_and_pages_with_max_bytes() {
    let server = TestServer::start().await;
    let client = server.session().await;
    client
        .sh(
            "r",
            "printf one; sleep 0.1; printf two >&2; sleep 0.1; printf three",
            json!({}),
        )
        .await;
    let events = client.wait_closed("r").await;
    let closed_seq = events.last().unwrap().0;

    let state = client.call("process/read", json!({"processId": "r"})).await;
    assert_eq!(state["nextSeq"], closed_seq + 1);
    assert_eq!(state["exited"], true);
    assert_eq!(state["closed"], true);
    assert_eq!(state["failure"], json!(null));
    let text: Vec<u8> = state["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| unb64(c["chunk"].as_str().unwrap()))
        .collect();
    assert_eq!(text, b"onetwothree");

    let mut cursor = 0;
    let mut paged = Vec::new();
    loop {
        let state = client
            .call(
                "process/read",
                json!({"processId": "r", "afterSeq": cursor, "maxBytes": 1}),
            )
            .await;
        let chunks = state["chunks"].as_array().unwrap();
        if chunks.is_empty() {
            break;
        }
        assert_eq!(
            chunks.len(),
            1,
            "maxBytes below a chunk still returns one chunk"
        );
        assert_eq!(state["nextSeq"], chunks[0]["seq"].as_u64().unwrap() + 1);
        paged.extend(unb64(chunks[0]["chunk"].as_str().unwrap()));
        cursor = state["nextSeq"].as_u64().unwrap() - 1;
    }
    assert_eq!(paged, b"onetwothree");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_returns_early_on_output_and_does_not_block_the_connection() {
    let server = TestServer::start().await;
    let client = server.session().await;
    client
        .sh(
            "late",
            "read line; echo late; sleep 30",
            json!({"pipeStdin": true}),
        )
        .await;
    let poll = client.send_request(
        "process/read",
        json!({"processId": "late", "waitMs": 20_000}),
    );
    // Later requests are served while the poll waits: this write is what ends it.
    assert_eq!(client.write("late", b"go\n", "w").await, "accepted");
    let started = Instant::now();
    let state = client.response(&poll).await["result"].clone();
    assert!(started.elapsed() < Duration::from_secs(10));
    let chunks = state["chunks"].as_array().unwrap();
    assert_eq!(unb64(chunks[0]["chunk"].as_str().unwrap()), b"late\n");
    assert_eq!(state["exited"], false);
    client
        .call("process/terminate", json!({"processId": "late"}))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_answers_after_wait_ms_or_on_exit() {
    let server = TestServer::start().await;
    let client = server.session().await;
    client
        .sh("quiet", "read line; exit 7", json!({"pipeStdin": true}))
        .await;
    let started = Instant::now();
    let state = client
        .call("process/read", json!({"processId": "quiet", "waitMs": 300}))
        .await;
    assert!(started.elapsed() >= Duration::from_millis(290));
    assert_eq!(state["chunks"], json!([]));
    assert_eq!(state["nextSeq"], 1);

    let poll = client.send_request(
        "process/read",
        json!({"processId": "quiet", "waitMs": 20_000}),
    );
    client.write("quiet", b"\n", "w").await;
    let state = client.response(&poll).await["result"].clone();
    assert_eq!(state["exited"], true);
    assert_eq!(state["exitCode"], 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_requests_per_connection_are_bounded() {
    let server = TestServer::start().await;
    let client = server.session().await;
    client.sh("idle", "exec sleep 600", json!({})).await;
    let n = MAX_PENDING_ANSWERS + 10;
    let ids: Vec<_> = (0..n)
        .map(|_| {
            client.send_request(
                "process/read",
                json!({"processId": "idle", "afterSeq": 0, "waitMs": 600_000}),
            )
        })
        .collect();
    // Those past the bound are refused at once; the connection still answers.
    let refused = client.response(&ids[n - 1]).await;
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("waiting"),
        "{refused}"
    );
    let terminated = client
        .call("process/terminate", json!({"processId": "idle"}))
        .await;
    assert_eq!(terminated["running"], true);
    // The long polls end with the process.
    let answered = client.response(&ids[0]).await;
    assert_eq!(answered["result"]["exited"], true, "{answered}");
}
