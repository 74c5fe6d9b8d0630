//! What MCP Tasks put on the wire beyond rmcp's model: a task's `pollIntervalMs` and
//! `ttlMs` change as its session does.

use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::scratch_dir;
use crate::raw_mcp::{meta, tasks_caps, Raw};

/// A gated command's task over `raw`; its id and the gate.
async fn gated_task(raw: &mut Raw) -> (String, std::path::PathBuf) {
    let gate = scratch_dir("tasks-wire-gate").join("go");
    let cmd = format!(
        "echo started; while [ ! -e '{}' ]; do sleep 0.02; done; echo opened",
        gate.display()
    );
    let created = raw
        .request(
            "tools/call",
            json!({"_meta": meta(tasks_caps()), "name": "exec_command",
                   "arguments": {"cmd": cmd, "login": false, "yield_time_ms": 250}}),
        )
        .await;
    let id = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned();
    (id, gate)
}

/// `tasks/get` of `task`.
async fn get(raw: &mut Raw, task: &str) -> Value {
    let got = raw
        .request(
            "tasks/get",
            json!({"_meta": meta(tasks_caps()), "taskId": task}),
        )
        .await;
    got["result"].clone()
}

#[tokio::test]
async fn the_poll_interval_follows_the_output_and_the_ttl_the_retention() {
    let mut raw = Raw::spawn(&[]);
    // Quiet: asked to poll less and less often.
    let (quiet, quiet_gate) = gated_task(&mut raw).await;
    // Printing all the time: asked to poll every second.
    let created = raw
        .request(
            "tools/call",
            json!({"_meta": meta(tasks_caps()), "name": "exec_command",
                   "arguments": {"cmd": "while true; do echo tick; sleep 0.1; done", "login": false, "yield_time_ms": 250}}),
        )
        .await;
    let busy = created["result"]["taskId"].as_str().unwrap().to_owned();
    let first = get(&mut raw, &quiet).await;
    let ttl = first["ttlMs"].as_u64().expect("ttlMs");
    assert!(ttl >= 3_600_000, "an hour after the end, at least: {first}");
    let mut last = Value::Null;
    for _ in 0..100 {
        last = get(&mut raw, &quiet).await;
        if last["pollIntervalMs"].as_u64().unwrap_or(0) > 1000 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        last["pollIntervalMs"].as_u64().unwrap_or(0) > 1000,
        "{last}"
    );
    // The run so far counts: the time to live grew with it.
    assert!(last["ttlMs"].as_u64().unwrap() > ttl, "{first} then {last}");
    let busy_now = get(&mut raw, &busy).await;
    assert_eq!(busy_now["pollIntervalMs"], 1000, "{busy_now}");

    // Ended: its time to live stops growing.
    std::fs::write(&quiet_gate, "").unwrap();
    let mut ended = Value::Null;
    for _ in 0..100 {
        ended = get(&mut raw, &quiet).await;
        if ended["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(ended["status"], "completed", "{ended}");
    let settled = ended["ttlMs"].clone();
    let again = get(&mut raw, &quiet).await;
    assert_eq!(again["ttlMs"], settled, "{ended} then {again}");
    raw.close().await;
}
