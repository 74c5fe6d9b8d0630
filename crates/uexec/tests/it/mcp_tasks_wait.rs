//! `wait` as a task: a `wait` whose window ends with its sessions still running, from a
//! client that declared the extension, becomes a task that completes when `wait` would have
//! returned with an endless window (the first session to exit, or with `all` every one),
//! with every session's output; `tasks/cancel` stops the waiting, not the sessions; a client
//! without the extension gets `wait`'s result as ever.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::scratch_dir;
use crate::raw_mcp::{meta, tasks_caps, text_of, Raw};

/// A session that prints `name`, waits for its gate, then prints `name done`.
async fn gated(raw: &mut Raw, name: &str) -> (i64, PathBuf) {
    let gate = scratch_dir("wait-gate").join(name);
    let cmd = format!(
        "echo {name}; while [ ! -e '{}' ]; do sleep 0.02; done; echo {name} done",
        gate.display()
    );
    let r = raw
        .request(
            "tools/call",
            json!({"_meta": meta(json!({})), "name": "exec_command",
                   "arguments": {"cmd": cmd, "login": false, "yield_time_ms": 250}}),
        )
        .await;
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    let id = text
        .split("session ID ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a running session: {r}"));
    (id, gate)
}

async fn wait(raw: &mut Raw, caps: Value, arguments: Value) -> Value {
    raw.request(
        "tools/call",
        json!({"_meta": meta(caps), "name": "wait", "arguments": arguments}),
    )
    .await["result"]
        .clone()
}

async fn get(raw: &mut Raw, task: &str) -> Value {
    raw.task(tasks_caps(), task).await
}

/// Polls `tasks/get` until the task is terminal.
async fn settled(raw: &mut Raw, task: &str) -> Value {
    raw.task_until(tasks_caps(), task, |got| {
        ["completed", "failed", "cancelled"].contains(&got["status"].as_str().unwrap_or(""))
    })
    .await
}

/// The ids of the sessions list_sessions shows.
async fn listed(raw: &mut Raw) -> Vec<i64> {
    let r = raw
        .request(
            "tools/call",
            json!({"_meta": meta(json!({})), "name": "list_sessions", "arguments": {}}),
        )
        .await;
    let text = text_of(&r["result"]);
    text.lines()
        .filter_map(|l| {
            l.strip_prefix("- session ")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

#[tokio::test]
async fn a_wait_left_unsatisfied_becomes_a_task_that_ends_when_the_first_session_exits() {
    let mut raw = Raw::spawn(&[]);
    let (a, gate_a) = gated(&mut raw, "alpha").await;
    let (b, _gate_b) = gated(&mut raw, "beta").await;
    let created = wait(
        &mut raw,
        tasks_caps(),
        json!({"session_ids": [a, b], "yield_time_ms": 300}),
    )
    .await;
    assert_eq!(created["resultType"], "task", "{created}");
    let task = created["taskId"].as_str().unwrap().to_owned();
    let working = get(&mut raw, &task).await;
    assert_eq!(working["status"], "working", "{working}");
    let said = working["statusMessage"].as_str().unwrap_or_default();
    assert!(said.contains(&format!("sessions {a}, {b}")), "{said}");

    std::fs::write(&gate_a, "").unwrap();
    let done = settled(&mut raw, &task).await;
    assert_eq!(done["status"], "completed", "{done}");
    let text = text_of(&done["result"]);
    // The window's result, then the rest: alpha's end and its output, beta still running.
    assert!(text.contains("alpha done"), "{text}");
    assert!(text.contains("Process exited with code 0"), "{text}");
    assert!(
        text.contains(&format!("Process running with session ID {b}")),
        "{text}"
    );
    assert!(listed(&mut raw).await.contains(&b), "beta runs on");
    raw.close().await;
}

#[tokio::test]
async fn with_all_the_task_ends_when_every_session_has() {
    let mut raw = Raw::spawn(&[]);
    let (a, gate_a) = gated(&mut raw, "alpha").await;
    let (b, gate_b) = gated(&mut raw, "beta").await;
    let created = wait(
        &mut raw,
        tasks_caps(),
        json!({"session_ids": [a, b], "all": true, "yield_time_ms": 300}),
    )
    .await;
    let task = created["taskId"].as_str().expect("a task").to_owned();
    std::fs::write(&gate_a, "").unwrap();
    // The task reports alpha's exit (it leaves the list) and waits on for beta.
    for _ in 0..200 {
        if !listed(&mut raw).await.contains(&a) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !listed(&mut raw).await.contains(&a),
        "alpha's exit was reported"
    );
    assert_eq!(get(&mut raw, &task).await["status"], "working");
    std::fs::write(&gate_b, "").unwrap();
    let done = settled(&mut raw, &task).await;
    let text = text_of(&done["result"]);
    assert!(
        text.contains("alpha done") && text.contains("beta done"),
        "{text}"
    );
    raw.close().await;
}

#[tokio::test]
async fn cancelling_a_wait_task_stops_the_waiting_not_the_sessions() {
    let mut raw = Raw::spawn(&[]);
    let (a, _gate) = gated(&mut raw, "alpha").await;
    let created = wait(
        &mut raw,
        tasks_caps(),
        json!({"session_ids": [a], "yield_time_ms": 300}),
    )
    .await;
    let task = created["taskId"].as_str().expect("a task").to_owned();
    raw.request(
        "tasks/cancel",
        json!({"_meta": meta(tasks_caps()), "taskId": task}),
    )
    .await;
    assert_eq!(settled(&mut raw, &task).await["status"], "cancelled");
    assert!(listed(&mut raw).await.contains(&a), "the session runs on");

    // Without the extension: wait's own result, its window ended.
    let plain = wait(
        &mut raw,
        json!({}),
        json!({"session_ids": [a], "yield_time_ms": 300}),
    )
    .await;
    assert!(plain.get("taskId").is_none(), "{plain}");
    assert!(text_of(&plain).contains("Reason: window"), "{plain}");
    raw.close().await;
}
