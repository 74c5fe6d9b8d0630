//! The CLI for people, against a real daemon: run, ls, logs, send, poll, wait, kill.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Output};

use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::{json, Value};

use crate::helpers::{call, rand_suffix, structured, text, Client, Recorder, UEXEC};

struct Place {
    runtime: PathBuf,
    cwd: PathBuf,
}

impl Place {
    fn new() -> Self {
        let root = std::env::temp_dir().join(format!("uexec-it-cli-{}", rand_suffix()));
        let runtime = root.join("run");
        let cwd = root.join("work");
        std::fs::create_dir_all(&runtime).unwrap();
        std::fs::create_dir_all(cwd.join("home")).unwrap();
        std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
        Self { runtime, cwd }
    }

    fn uexec(&self, args: &[&str]) -> Output {
        Command::new(UEXEC)
            .args(args)
            .current_dir(&self.cwd)
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .env("HOME", self.cwd.join("home"))
            .env_remove("UEXEC_DAEMON")
            .output()
            .unwrap()
    }

    async fn agent(&self) -> Client {
        let mut cmd = tokio::process::Command::new(UEXEC);
        cmd.args(["mcp", "--daemon", "--owner", "agent-1"])
            .current_dir(&self.cwd)
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .env("HOME", self.cwd.join("home"));
        Recorder::default()
            .serve(TokioChildProcess::new(cmd).unwrap())
            .await
            .unwrap()
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let _ = self.uexec(&["daemon", "--stop"]);
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json_of(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

#[test]
fn run_exits_with_the_commands_code_or_leaves_a_session() {
    let place = Place::new();
    let done = place.uexec(&["run", "--", "sh", "-c", "echo out; echo err >&2; exit 7"]);
    assert_eq!(done.status.code(), Some(7), "{}", stderr(&done));
    // Two pipes, one stream: their order is the kernel's.
    let mut lines: Vec<String> = stdout(&done).lines().map(str::to_owned).collect();
    lines.sort();
    assert_eq!(lines, ["err", "out"]);

    let json = place.uexec(&["run", "--json", "--", "echo", "it's quoted"]);
    assert_eq!(json_of(&json)["output"], "it's quoted\n");

    let long = place.uexec(&[
        "run",
        "--yield",
        "300",
        "--",
        "echo first; sleep 1; echo second; exit 5",
    ]);
    assert_eq!(long.status.code(), Some(0));
    assert_eq!(stdout(&long), "first\n");
    let err = stderr(&long);
    let id: String = err
        .split("session ")
        .nth(1)
        .unwrap_or_default()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    assert!(!id.is_empty(), "{err}");

    let listed = json_of(&place.uexec(&["ls", "--json"]));
    let me = &listed["sessions"][0];
    assert_eq!(me["session_id"].to_string(), id);
    assert_eq!(me["owner"], "@person");

    // logs -f prints everything, to the end, without taking it from the session.
    let logs = place.uexec(&["logs", "-f", &id]);
    assert_eq!(stdout(&logs), "first\nsecond\n", "{}", stderr(&logs));
    let waited = place.uexec(&["wait", &id]);
    assert_eq!(waited.status.code(), Some(5), "{}", stderr(&waited));
    let tail = place.uexec(&["logs", "--tail", "1", &id]);
    assert_eq!(stdout(&tail), "second\n");
}

#[tokio::test]
async fn a_person_sees_types_into_and_kills_an_agents_session() {
    let place = Place::new();
    let agent = place.agent().await;
    let r = call(
        &agent,
        "exec_command",
        json!({"cmd": "echo ready; read -r line; echo \"got $line\"; exec sleep 30", "tty": true,
               "login": false, "yield_time_ms": 500}),
    )
    .await;
    let id = structured(&r)["session_id"].as_i64().expect("running");
    let listed = json_of(&place.uexec(&["ls", "--json"]));
    let row = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["session_id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(row["owner"], "agent-1");
    assert_eq!(row["tty"], true);

    let sent = place.uexec(&["send", &id.to_string(), "hello from a person"]);
    assert!(sent.status.success(), "{}", stderr(&sent));
    // The agent still gets what the session printed: the person took nothing.
    let mut seen = String::new();
    for _ in 0..20 {
        let p = call(
            &agent,
            "write_stdin",
            json!({"session_id": id, "yield_time_ms": 5000}),
        )
        .await;
        seen.push_str(structured(&p)["output"].as_str().unwrap_or_default());
        if seen.contains("got hello from a person") {
            break;
        }
    }
    assert!(seen.contains("got hello from a person"), "{seen:?}");
    let logs = place.uexec(&["logs", &id.to_string()]);
    assert!(
        stdout(&logs).contains("got hello from a person"),
        "{}",
        stdout(&logs)
    );

    let killed = place.uexec(&["kill", &id.to_string()]);
    assert!(killed.status.success(), "{}", stderr(&killed));
    let after = call(&agent, "write_stdin", json!({"session_id": id})).await;
    assert!(
        text(&after).contains("Unknown process id")
            || structured(&after).get("exit_code").is_some(),
        "{}",
        text(&after)
    );
    agent.cancel().await.unwrap();
}

#[test]
fn bad_input_is_refused_with_a_clear_error_and_a_meaningful_code() {
    let place = Place::new();
    let cases: [(&[&str], i32, &str); 5] = [
        (&["logs", "not-a-number"], 2, "invalid value 'not-a-number'"),
        (&["run", "--yield", "10", "--", "true"], 2, "--yield"),
        (&["send", "1000"], 2, "required"),
        (&["kill", "99999"], 3, "Unknown process id 99999"),
        (&["wait", "99999"], 3, "Unknown process id 99999"),
    ];
    for (args, code, says) in cases {
        let out = place.uexec(args);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
        assert!(stdout(&out).is_empty(), "{args:?}: errors go to stderr");
    }
}

#[test]
fn completions_are_printed_for_the_usual_shells() {
    let place = Place::new();
    for shell in ["bash", "zsh", "fish"] {
        let out = place.uexec(&["completions", shell]);
        assert!(out.status.success());
        assert!(stdout(&out).contains("logs"), "{shell}");
    }
    let bad = place.uexec(&["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2));
}
