//! A password prompt (echo off) through a client on this machine that declared URL-mode
//! elicitation: the task asks for a one-time loopback page, the person types the password
//! there (here, a real HTTP client), and it goes to the terminal; the page refuses another
//! host or origin, works once, and the password is in no result.

use serde_json::{json, Value};

use crate::helpers::{scratch_dir, UEXEC};
use crate::raw_mcp::{meta, Raw};

fn caps() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {"url": {}}})
}

async fn until(raw: &mut Raw, task: &str, holds: impl Fn(&Value) -> bool) -> Value {
    raw.task_until(caps(), task, holds).await
}

#[tokio::test]
async fn a_password_prompt_is_a_one_time_loopback_page_the_model_never_sees() {
    // Logging everything it can, to show the password is in no log either.
    let dir = scratch_dir("tasks-page");
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let log = dir.join("trace.log");
    let mut cmd = tokio::process::Command::new(UEXEC);
    cmd.args(["mcp", "--in-process"])
        .current_dir(&dir)
        .env("HOME", dir.join("home"))
        .env("UEXEC_LOG", "trace")
        .stderr(std::fs::File::create(&log).unwrap());
    let mut raw = Raw::of(cmd);
    let cmd = "read -s -p 'Password: ' p; echo; [ \"$p\" = \"$(printf 'hunter%d x' 2)\" ] && echo match || echo \"mismatch ${#p}\"";
    let created = raw
        .request(
            "tools/call",
            json!({"_meta": meta(caps()), "name": "exec_command",
                   "arguments": {"background": true, "cmd": cmd, "login": false, "tty": true, "yield_time_ms": 300}}),
        )
        .await;
    let task = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned();
    let asking = until(&mut raw, &task, |t| t["status"] == "input_required").await;
    let requests = asking["inputRequests"].as_object().expect("inputRequests");
    let (key, request) = requests.iter().next().expect("one request");
    assert_eq!(request["method"], "elicitation/create", "{request}");
    assert_eq!(request["params"]["mode"], "url", "{request}");
    let url = request["params"]["url"].as_str().unwrap().to_owned();
    let port = url
        .strip_prefix("http://127.0.0.1:")
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("a loopback page: {url}"));
    let own = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();

    // Another host (a DNS-rebinding page) and another site's form are refused.
    let rebound = http
        .get(&url)
        .header("Host", format!("evil.example:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
    let forged = http
        .post(&url)
        .header("Origin", "http://evil.example")
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("password=stolen")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
    // The page itself: the prompt and a password field.
    let page = http.get(&url).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(
        page.headers()["cache-control"].to_str().unwrap(),
        "no-store"
    );
    let html = page.text().await.unwrap();
    assert!(
        html.contains("type=\"password\"") && html.contains("Password:"),
        "{html}"
    );

    // The client opened it (URL mode's accept); the task works on while the person types.
    raw.request(
        "tasks/update",
        json!({"_meta": meta(caps()), "taskId": task,
               "inputResponses": {key.clone(): {"action": "accept"}}}),
    )
    .await;
    let waiting = until(&mut raw, &task, |t| {
        t["statusMessage"]
            .as_str()
            .is_some_and(|m| m.contains("one-time page"))
    })
    .await;
    assert_eq!(waiting["status"], "working", "{waiting}");

    let sent = http
        .post(&url)
        .header("Origin", &own)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("password=hunter2+x")
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 200, "{}", sent.text().await.unwrap());
    // It works once.
    let again = http
        .post(&url)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("password=hunter2+x")
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 404);

    let done = until(&mut raw, &task, |t| t["status"] == "completed").await;
    let all = done.to_string();
    // What it printed (the result's first line names the command, which says "mismatch").
    let printed = all.rsplit("Output:").next().unwrap_or_default();
    assert!(
        printed.contains("match") && !printed.contains("mismatch"),
        "{all}"
    );
    assert!(
        !all.contains("hunter2"),
        "the password is in no result: {all}"
    );
    assert!(!asking.to_string().contains("hunter2") && !waiting.to_string().contains("hunter2"));
    raw.close().await;
    // Nor in the server's log, at its most verbose (which did log the exchange).
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("received request"), "a trace log: {logged}");
    assert!(!logged.contains("hunter2"), "the password is in no log");
}

#[tokio::test]
async fn without_elicitation_a_password_prompt_is_left_to_the_person() {
    let mut raw = Raw::spawn(&[]);
    let tasks_only = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let created = raw
        .request(
            "tools/call",
            json!({"_meta": meta(tasks_only.clone()), "name": "exec_command",
                   "arguments": {"background": true, "cmd": "read -s -p 'Password: ' p; echo done", "login": false,
                                 "tty": true, "yield_time_ms": 300}}),
        )
        .await;
    let task = created["result"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    let waiting = raw
        .task_until(tasks_only, &task, |t| {
            t["statusMessage"]
                .as_str()
                .is_some_and(|m| m.contains("password prompt"))
        })
        .await;
    assert_eq!(waiting["status"], "working", "no form, no page: {waiting}");
    let said = waiting["statusMessage"].as_str().unwrap();
    assert!(
        said.contains("ask the person") && said.contains("uexec attach --write"),
        "{said}"
    );
    raw.close().await;
}

/// A client with form elicitation only (Codex's default): the page is offered all the same,
/// its link in a form's message that asks the person to say when they are done; filled in
/// with a real HTTP client, the command gets the password, and no result has it.
#[tokio::test]
async fn with_form_elicitation_only_the_page_is_offered_in_a_form() {
    let mut raw = Raw::spawn(&[]);
    let form_only =
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {"form": {}}});
    let cmd = "read -s -p 'Password: ' p; echo; [ \"$p\" = \"$(printf 'open%s' sesame)\" ] && echo right || echo wrong";
    let created = raw
        .request(
            "tools/call",
            json!({"_meta": meta(form_only.clone()), "name": "exec_command",
                   "arguments": {"background": true, "cmd": cmd, "login": false,
                                 "tty": true, "yield_time_ms": 300}}),
        )
        .await;
    let task = created["result"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    let asking = raw
        .task_until(form_only.clone(), &task, |t| {
            t["status"] == "input_required"
        })
        .await;
    let requests = asking["inputRequests"].as_object().expect("inputRequests");
    let (key, request) = requests.iter().next().expect("one request");
    assert_eq!(request["params"]["mode"], "form", "{request}");
    let message = request["params"]["message"].as_str().unwrap();
    // No field: the password is typed on the page, never into the client.
    assert_eq!(
        request["params"]["requestedSchema"]["properties"],
        json!({}),
        "{request}"
    );
    let url = message
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("the page's link: {message}"))
        .to_owned();
    let port = url
        .strip_prefix("http://127.0.0.1:")
        .and_then(|rest| rest.split('/').next())
        .unwrap();
    let sent = reqwest::Client::new()
        .post(&url)
        .header("Origin", format!("http://127.0.0.1:{port}"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("password=opensesame")
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 200, "{}", sent.text().await.unwrap());
    // The person says they are done.
    raw.request(
        "tasks/update",
        json!({"_meta": meta(form_only.clone()), "taskId": task,
               "inputResponses": {key.clone(): {"action": "accept", "content": {}}}}),
    )
    .await;
    let done = raw
        .task_until(form_only, &task, |t| t["status"] == "completed")
        .await;
    let all = done.to_string();
    let printed = all.rsplit("Output:").next().unwrap_or_default();
    assert!(
        printed.contains("right") && !printed.contains("wrong"),
        "{all}"
    );
    assert!(!all.contains("opensesame") && !asking.to_string().contains("opensesame"));
    raw.close().await;
}
