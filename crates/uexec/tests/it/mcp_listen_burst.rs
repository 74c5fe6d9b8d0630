//! A burst of `subscriptions/listen` requests on one JSON-lines connection: each one is
//! either acknowledged with the task ids it asked for, or refused with a JSON-RPC error
//! that says why; never acknowledged as if it had asked for none (issue 38 §5: 960 of
//! 1,000 acknowledgments forgot their task ids).

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::helpers::{scratch_dir, UEXEC};
use crate::raw_mcp::{meta, tasks_caps};

const BURST: usize = 1000;

#[tokio::test]
async fn a_burst_of_listen_requests_is_acknowledged_whole_or_refused() {
    let dir = scratch_dir("listen-burst");
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let mut server = tokio::process::Command::new(UEXEC)
        .args(["mcp", "--in-process"])
        .current_dir(&dir)
        .env("HOME", dir.join("home"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = server.stdin.take().unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let mut burst = Vec::new();
    for id in 1..=BURST {
        let listen = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
            "params": {"_meta": meta(tasks_caps()),
                       "notifications": {"taskIds": [format!("task-{id}")]}}});
        burst.extend_from_slice(format!("{listen}\n").as_bytes());
    }
    // All at once (read meanwhile: the answers would fill the pipe): the server reads them
    // faster than it acknowledges them.
    let writing = tokio::spawn(async move {
        stdin.write_all(&burst).await.unwrap();
        stdin
    });
    let mut outcome: HashMap<u64, Value> = HashMap::new();
    while outcome.len() < BURST {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("a message within 20 s")
            .unwrap()
            .expect("the server is still there");
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["method"] == "notifications/subscriptions/acknowledged" {
            let id = message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]
                .as_u64()
                .expect("the subscription's id");
            outcome.insert(id, message["params"]["notifications"]["taskIds"].clone());
        } else if message.get("error").is_some() {
            let id = message["id"].as_u64().expect("the request's id");
            outcome.insert(id, message["error"].clone());
        }
    }
    let mut refused = 0;
    for id in 1..=BURST as u64 {
        let said = &outcome[&id];
        if said.get("code").is_some() {
            refused += 1;
            assert_eq!(said["code"], -32000, "{said}");
            let why = said["message"].as_str().unwrap_or_default();
            assert!(why.contains("subscriptions/listen"), "{why}");
        } else {
            assert_eq!(said, &json!([format!("task-{id}")]), "listen {id}: {said}");
        }
    }
    assert!(refused < BURST, "every one refused");
    drop(writing.await.unwrap());
    let _ = tokio::time::timeout(Duration::from_secs(20), server.wait()).await;
}
