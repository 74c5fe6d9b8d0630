//! What MCP Tasks put on the wire beyond rmcp's model, on every face: `exec_command` and
//! `wait` declare `execution.taskSupport: "optional"` (stdio, `--http`, the daemon; not
//! `--codex-compat`); a `subscriptions/listen` stream that names task ids hears
//! `notifications/tasks` at their end (stdio, the daemon and `--http`), also when it opened
//! after it;
//! and a task's `pollIntervalMs` and `ttlMs` change as its session does.

use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::scratch_dir;
use crate::place::DaemonPlace as Place;
use crate::raw_mcp::{meta, tasks_caps, Raw};

/// Each tool's `execution` in a `tools/list` result.
fn executions(result: &Value) -> Vec<(String, Value)> {
    result["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| {
            let name = t["name"].as_str().unwrap_or_default().to_owned();
            (name, t.get("execution").cloned().unwrap_or(Value::Null))
        })
        .collect()
}

/// exec_command and wait, and no other tool, say their calls may become tasks.
fn declares_task_support(result: &Value) {
    let optional = json!({"taskSupport": "optional"});
    for (name, execution) in executions(result) {
        if name == "exec_command" || name == "wait" {
            assert_eq!(execution, optional, "{name}: {result}");
        } else {
            assert_eq!(execution, Value::Null, "{name}: {result}");
        }
    }
}

async fn tools_over(raw: &mut Raw) -> Value {
    let answer = raw
        .request("tools/list", json!({"_meta": meta(tasks_caps())}))
        .await;
    answer["result"].clone()
}

#[tokio::test]
async fn the_task_tools_declare_task_support_over_stdio_and_through_the_daemon() {
    let mut raw = Raw::spawn(&[]);
    let tools = tools_over(&mut raw).await;
    declares_task_support(&tools);
    assert!(
        executions(&tools).iter().any(|(n, _)| n == "wait"),
        "{tools}"
    );
    raw.close().await;

    // Codex's exact surface offers no task.
    let mut raw = Raw::spawn(&["--codex-compat"]);
    let tools = tools_over(&mut raw).await;
    assert!(
        executions(&tools).iter().all(|(_, e)| e.is_null()),
        "{tools}"
    );
    raw.close().await;

    // Through the daemon, relayed byte for byte.
    let place = Place::new("tasks-wire");
    let mut cmd = tokio::process::Command::new(crate::helpers::UEXEC);
    cmd.args(["mcp", "--daemon"])
        .current_dir(&place.cwd)
        .env("XDG_RUNTIME_DIR", &place.runtime)
        .env("HOME", place.cwd.join("home"));
    let mut raw = Raw::of(cmd);
    declares_task_support(&tools_over(&mut raw).await);
    raw.close().await;
    place.stop();
}

/// A POST of `body` to the HTTP face at `url`, as a 2026-07-28 client sends it.
fn post(url: &str, method: &str, name: Option<&str>, body: &Value) -> reqwest::RequestBuilder {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", method)
        .body(body.to_string());
    if let Some(name) = name {
        request = request.header("Mcp-Name", name);
    }
    request
}

/// The JSON-RPC messages of a response (one JSON body, or an SSE stream's `data:` lines).
fn messages(body: &str) -> Vec<Value> {
    if let Ok(one) = serde_json::from_str(body) {
        return vec![one];
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect()
}

async fn answer_over_http(url: &str, method: &str, name: Option<&str>, body: Value) -> Value {
    let response = post(url, method, name, &body).send().await.unwrap();
    let text = response.text().await.unwrap();
    messages(&text)
        .into_iter()
        .find(|m| m.get("id") == body.get("id"))
        .unwrap_or_else(|| panic!("no answer in {text}"))
}

#[tokio::test]
async fn over_http_the_tools_declare_task_support_and_a_listener_hears_its_task_end() {
    let server = crate::mcp_http::start_with(None, &[]);
    let url = format!("http://{}/mcp", server.addr);
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta(tasks_caps())}});
    let tools = answer_over_http(&url, "tools/list", None, list).await;
    declares_task_support(&tools["result"]);

    let gate = scratch_dir("tasks-wire-gate").join("go");
    let cmd = format!(
        "while [ ! -e '{}' ]; do sleep 0.02; done; echo opened",
        gate.display()
    );
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "_meta": meta(tasks_caps()), "name": "exec_command",
        "arguments": {"background": true, "cmd": cmd, "login": false, "yield_time_ms": 250}}});
    let created = answer_over_http(&url, "tools/call", Some("exec_command"), call).await;
    let task = created["result"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();

    let listen = json!({"jsonrpc": "2.0", "id": 3, "method": "subscriptions/listen", "params": {
        "_meta": meta(tasks_caps()), "notifications": {"taskIds": [task]}}});
    let mut stream = post(&url, "subscriptions/listen", None, &listen)
        .send()
        .await
        .unwrap();
    let mut seen = String::new();
    let mut heard = Vec::new();
    let mut opened = false;
    while !heard
        .iter()
        .any(|m: &Value| m["method"] == "notifications/tasks")
    {
        let chunk = tokio::time::timeout(Duration::from_secs(20), stream.chunk())
            .await
            .expect("the stream goes on")
            .unwrap()
            .expect("the stream is open");
        seen.push_str(&String::from_utf8_lossy(&chunk));
        heard = messages(&seen);
        if !opened && !heard.is_empty() {
            // Acknowledged: now let the command end.
            std::fs::write(&gate, "").unwrap();
            opened = true;
        }
    }
    let ack = &heard[0];
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{seen}"
    );
    assert_eq!(
        ack["params"]["notifications"]["taskIds"],
        json!([task]),
        "{seen}"
    );
    let told = heard
        .iter()
        .find(|m| m["method"] == "notifications/tasks")
        .unwrap();
    assert_eq!(told["params"]["taskId"], task.as_str());
    assert_eq!(told["params"]["status"], "completed");
    assert_eq!(
        told["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        3
    );
    let text = told["params"]["result"]["content"].to_string();
    assert!(text.contains("opened"), "{text}");

    // Refused from a client that did not declare the extension.
    let refused = json!({"jsonrpc": "2.0", "id": 4, "method": "subscriptions/listen", "params": {
        "_meta": meta(json!({})), "notifications": {"taskIds": [task]}}});
    let response = post(&url, "subscriptions/listen", None, &refused)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], -32021, "{error}");
    drop(stream);
}

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
                   "arguments": {"background": true, "cmd": cmd, "login": false, "yield_time_ms": 250}}),
        )
        .await;
    let id = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned();
    (id, gate)
}

fn listen_params(caps: Value, ids: Value) -> Value {
    json!({"_meta": meta(caps), "notifications": {"taskIds": ids}})
}

#[tokio::test]
async fn a_stateless_listener_wakes_at_the_exit_even_when_it_listens_after() {
    wakes_at_the_exit(Raw::spawn(&[])).await;
    // Through the daemon (a plain `uexec mcp`), which relays the stream byte for byte.
    let place = Place::new("tasks-listen");
    let cmd = tokio::process::Command::from(place.command(&["mcp"]));
    wakes_at_the_exit(Raw::of(cmd)).await;
    assert!(place.status().is_some(), "answered by the daemon");
    place.stop();
}

async fn wakes_at_the_exit(mut raw: Raw) {
    let (task, gate) = gated_task(&mut raw).await;
    let listen = raw
        .ask(
            "subscriptions/listen",
            listen_params(tasks_caps(), json!([task])),
        )
        .await;
    let ack = raw
        .heard(|m| m["method"] == "notifications/subscriptions/acknowledged")
        .await;
    assert_eq!(
        ack["params"]["notifications"]["taskIds"],
        json!([task]),
        "{ack}"
    );
    std::fs::write(&gate, "").unwrap();
    let told = raw.heard(|m| m["method"] == "notifications/tasks").await;
    assert_eq!(
        told["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        listen
    );
    assert_eq!(told["params"]["status"], "completed", "{told}");
    let text = told["params"]["result"]["content"].to_string();
    assert!(
        text.contains("started") && text.contains("opened"),
        "{text}"
    );
    // No notification outside the stream: a stateless client has no connection to hear it.
    assert!(
        raw.heard
            .iter()
            .all(|m| m["method"] != "notifications/tasks"),
        "{:?}",
        raw.heard
    );

    // A listener that comes after the end is told at once.
    let late = raw
        .ask(
            "subscriptions/listen",
            listen_params(tasks_caps(), json!([task])),
        )
        .await;
    let told = raw
        .heard(|m| {
            m["method"] == "notifications/tasks"
                && m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == late
        })
        .await;
    assert_eq!(told["params"]["status"], "completed", "{told}");

    // Without the extension, or with task ids that are no list: refused, naming why.
    let refused = raw
        .request(
            "subscriptions/listen",
            listen_params(json!({}), json!([task])),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    let malformed = raw
        .request(
            "subscriptions/listen",
            listen_params(tasks_caps(), json!("x")),
        )
        .await;
    assert_eq!(malformed["error"]["code"], -32602, "{malformed}");
    assert!(
        malformed["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("notifications.taskIds")),
        "{malformed}"
    );
    raw.close().await;
}

/// A client that closes its stdin while its listen stream is open and its command runs lets
/// the server go at once: nothing is left for rmcp's 5 s drain of the handlers that outlive
/// the conversation, which it logs when it times out (in-process, that held the exit, and
/// with it the end of the sessions).
#[tokio::test]
async fn a_client_that_hangs_up_while_listening_is_let_go_at_once() {
    let dir = scratch_dir("tasks-hangup");
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let stderr = dir.join("stderr");
    let mut cmd = tokio::process::Command::new(crate::helpers::UEXEC);
    cmd.args(["mcp", "--in-process"])
        .current_dir(&dir)
        .env("HOME", dir.join("home"))
        .env("UEXEC_LOG", "warn")
        .stderr(std::fs::File::create(&stderr).unwrap());
    hang_up_listening(Raw::of(cmd)).await;
    let said = std::fs::read_to_string(&stderr).unwrap();
    assert!(!said.contains("timed out draining"), "{said}");

    // Through the daemon: its connection ends as soon (the front exits when it does).
    let place = Place::new("tasks-hangup");
    let state = place.cwd.join("state");
    let mut cmd = tokio::process::Command::from(place.command(&["mcp"]));
    cmd.env("XDG_STATE_HOME", &state).env("UEXEC_LOG", "warn");
    hang_up_listening(Raw::of(cmd)).await;
    assert!(place.status().is_some(), "answered by the daemon");
    place.stop();
    let logged = std::fs::read_to_string(state.join("uexec").join("daemon.log")).unwrap();
    assert!(!logged.contains("timed out draining"), "{logged}");
}

async fn hang_up_listening(mut raw: Raw) {
    let (task, _gate) = gated_task(&mut raw).await;
    raw.ask(
        "subscriptions/listen",
        listen_params(tasks_caps(), json!([task])),
    )
    .await;
    raw.heard(|m| m["method"] == "notifications/subscriptions/acknowledged")
        .await;
    raw.close().await;
}

/// `tasks/get` of `task`.
async fn get(raw: &mut Raw, task: &str) -> Value {
    raw.task(tasks_caps(), task).await
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
                   "arguments": {"background": true, "cmd": "while true; do echo tick; sleep 0.1; done", "login": false, "yield_time_ms": 250}}),
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
