//! `uexec mcp --environment NAME=URL`: commands run on an exec server (`uexec serve`).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rmcp::model::CallToolResult;
use serde_json::json;

use crate::helpers::{call, scratch_dir, stdio_client, structured, text, Client, UEXEC};

/// A running exec server and the URL it printed; killed when dropped.
pub(crate) struct ExecServer {
    child: Child,
    pub(crate) url: String,
}

impl Drop for ExecServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn exec_server() -> ExecServer {
    exec_server_at("ws://127.0.0.1:0")
}

fn exec_server_at(listen: &str) -> ExecServer {
    let mut cmd = Command::new(UEXEC);
    cmd.args(["serve", "--listen", listen]);
    spawn_exec_server(cmd)
}

/// Starts `cmd`, a `uexec serve`, and reads the URL it prints.
pub(crate) fn spawn_exec_server(mut cmd: Command) -> ExecServer {
    let mut child = cmd
        .env_remove("UEXEC_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    ExecServer {
        child,
        url: line.trim().to_owned(),
    }
}

#[tokio::test]
async fn commands_run_in_a_named_environment() {
    let server = exec_server();
    let env_arg = format!("remote={}", server.url);
    let (client, _, _) = stdio_client(&["--codex-compat", "--environment", &env_arg]).await;
    let tools = client.list_all_tools().await.unwrap();
    let exec = tools.iter().find(|t| t.name == "exec_command").unwrap();
    assert_eq!(
        exec.input_schema["properties"]["environment_id"]["enum"],
        json!(["remote"])
    );

    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "echo remote-$UEXEC; sleep 1; echo done", "login": false, "yield_time_ms": 250, "environment_id": "remote"}),
    )
    .await;
    let id = structured(&r)["session_id"]
        .as_i64()
        .unwrap_or_else(|| panic!("still running after 250 ms: {}", text(&r)));
    let mut out = structured(&r)["output"].as_str().unwrap().to_owned();
    let p = call(&client, "write_stdin", json!({"session_id": id})).await;
    out.push_str(structured(&p)["output"].as_str().unwrap());
    assert_eq!(structured(&p)["exit_code"], 0, "{}", text(&p));
    assert_eq!(out, "remote-1\ndone\n");

    let e = call(
        &client,
        "exec_command",
        json!({"cmd": "true", "environment_id": "nowhere"}),
    )
    .await;
    assert_eq!(e.is_error, Some(true));
    assert!(
        text(&e).contains("invalid arguments: environment_id: unknown environment"),
        "{}",
        text(&e)
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn without_environments_the_argument_does_not_exist() {
    let (client, _, _) = stdio_client(&["--codex-compat"]).await;
    let e = call(
        &client,
        "exec_command",
        json!({"cmd": "true", "environment_id": "remote"}),
    )
    .await;
    assert!(
        text(&e)
            .starts_with("exec_command failed: invalid arguments: environment_id: unknown field"),
        "{}",
        text(&e)
    );
    client.cancel().await.unwrap();
}

/// Wait conditions, the timeout and piped stdin work the same on a remote environment: the
/// engine watches the output, wherever the process runs.
#[tokio::test]
async fn conditions_timeouts_and_piped_stdin_on_a_remote_environment() {
    let server = exec_server();
    let env_arg = format!("remote={}", server.url);
    let (client, _, _) = stdio_client(&["--structured", "--environment", &env_arg]).await;
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "sleep 0.3; echo 'listening on 8080'; exec sleep 30", "login": false,
               "yield_time_ms": 30000, "environment_id": "remote",
               "until": {"pattern": "listening on [0-9]+"}}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(s["reason"], "matched", "{}", text(&r));
    let id = s["session_id"].as_i64().expect("running");
    call(&client, "terminate_session", json!({"session_id": id})).await;

    let t = call(
        &client,
        "exec_command",
        json!({"cmd": "exec sleep 30", "login": false, "yield_time_ms": 10000,
               "environment_id": "remote", "timeout_ms": 300}),
    )
    .await;
    assert_eq!(structured(&t)["exit_code"], 124, "{}", text(&t));

    let p = call(
        &client,
        "exec_command",
        json!({"cmd": "head -n1", "login": false, "yield_time_ms": 250,
               "environment_id": "remote", "stdin": "pipe"}),
    )
    .await;
    let id = structured(&p)["session_id"]
        .as_i64()
        .expect("waiting for input");
    let w = call(
        &client,
        "write_stdin",
        json!({"session_id": id, "chars": "first\nsecond\n", "yield_time_ms": 5000}),
    )
    .await;
    assert_eq!(structured(&w)["output"], "first\n", "{}", text(&w));
    assert_eq!(structured(&w)["exit_code"], 0);
    client.cancel().await.unwrap();
}

/// A loopback port nothing listens on (bound, then closed).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

pub(crate) async fn exec_on(client: &Client, env: Option<&str>, cmd: &str) -> CallToolResult {
    let mut arguments = json!({"cmd": cmd, "login": false, "yield_time_ms": 5000});
    if let Some(env) = env {
        arguments["environment_id"] = json!(env);
    }
    call(client, "exec_command", arguments).await
}

/// Regression: one `--environment` that could not be reached at start-up made `uexec mcp`
/// exit, local commands and the other environments with it.
#[tokio::test]
async fn an_unreachable_environment_fails_only_its_own_sessions_and_is_dialled_again() {
    let port = closed_port();
    let down = format!("ws://127.0.0.1:{port}");
    let up = exec_server();
    let log = scratch_dir("envdown").join("mcp.log");
    let (client, _, _) = stdio_client(&[
        "--codex-compat",
        "--log-file",
        log.to_str().unwrap(),
        "--environment",
        &format!("a={down}"),
        "--environment",
        &format!("b={}", up.url),
    ])
    .await;
    let tools = client.list_all_tools().await.unwrap();
    let exec = tools.iter().find(|t| t.name == "exec_command").unwrap();
    assert_eq!(
        exec.input_schema["properties"]["environment_id"]["enum"],
        json!(["a", "b"])
    );

    // The start-up warning names the environment and its URL.
    let warned = format!("environment a: cannot reach {down}: ");
    let deadline = Instant::now() + Duration::from_secs(20);
    let logged = loop {
        let logged = std::fs::read_to_string(&log).unwrap_or_default();
        if logged.contains(&warned) {
            break logged;
        }
        assert!(Instant::now() < deadline, "no warning logged: {logged}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        logged.contains("it is dialled again at its next command"),
        "{logged}"
    );

    // Local commands and the other environment work; a's sessions fail, naming it.
    let local = exec_on(&client, None, "echo local").await;
    assert_eq!(structured(&local)["output"], "local\n", "{}", text(&local));
    let on_b = exec_on(&client, Some("b"), "echo on-b").await;
    assert_eq!(structured(&on_b)["output"], "on-b\n", "{}", text(&on_b));
    let on_a = exec_on(&client, Some("a"), "echo on-a").await;
    assert_eq!(on_a.is_error, Some(true), "{}", text(&on_a));
    let refused = format!(
        "exec_command failed: Failed to create process: environment a: cannot reach {down}: "
    );
    assert!(text(&on_a).starts_with(&refused), "{}", text(&on_a));
    assert!(
        text(&on_a).contains("Connection refused"),
        "{}",
        text(&on_a)
    );

    // Once a server listens there, the next command dials it again and runs.
    let _late = exec_server_at(&down);
    let on_a = exec_on(&client, Some("a"), "echo on-a").await;
    assert_eq!(structured(&on_a)["output"], "on-a\n", "{}", text(&on_a));
    client.cancel().await.unwrap();
}
