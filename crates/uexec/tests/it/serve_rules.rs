//! `uexec serve --rules`: a `process/start` a rule forbids is a JSON-RPC error naming the rule
//! (`data.kind = "refused"`), and nothing of it runs; a start no rule matches runs.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::helpers::{scratch_dir, UEXEC};

#[test]
fn a_forbidden_start_is_an_error_naming_the_rule_and_nothing_runs() {
    let dir = scratch_dir("serve-rules");
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let rules = dir.join("team.rules");
    std::fs::write(
        &rules,
        "prefix_rule(pattern = [\"git\", \"push\"], decision = \"forbidden\", justification = \"people push\")\n",
    )
    .unwrap();
    let mut server = Command::new(UEXEC)
        .args(["serve", "--listen", "stdio", "--rules"])
        .arg(&rules)
        .current_dir(&dir)
        .env("HOME", dir.join("home"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to = server.stdin.take().unwrap();
    let mut from = BufReader::new(server.stdout.take().unwrap()).lines();
    let mut answer = |id: i64| -> Value {
        for line in from.by_ref() {
            let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
            if v["id"] == id {
                return v;
            }
        }
        panic!("no answer to {id}");
    };
    let cwd = format!("file://{}", dir.display());
    let start = |id: i64, script: &str| {
        json!({"id": id, "method": "process/start", "params": {
            "processId": format!("p{id}"), "argv": ["/bin/bash", "-lc", script],
            "cwd": cwd, "env": {"PATH": "/usr/bin:/bin"}, "tty": false}})
    };
    for message in [
        json!({"id": 1, "method": "initialize", "params": {"clientName": "it"}}),
        json!({"method": "initialized", "params": {}}),
        start(2, "echo ran > marker; git push origin main"),
    ] {
        writeln!(to, "{message}").unwrap();
    }
    assert!(answer(1)["result"]["sessionId"].is_string());
    let refused = answer(2);
    let error = &refused["error"];
    assert_eq!(error["data"]["kind"], "refused", "{refused}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("team.rules") && message.contains("people push"),
        "{refused}"
    );
    assert!(!dir.join("marker").exists(), "nothing of it ran");
    writeln!(to, "{}", start(3, "echo fine")).unwrap();
    let started = answer(3);
    assert_eq!(started["result"]["processId"], "p3", "{started}");
    drop(to);
    server.wait().unwrap();
}
