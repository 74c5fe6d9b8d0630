//! `uexec mcp` over stdio with rmcp's client.

use rmcp::model::{CallToolRequestParams, ClientRequest, ReadResourceRequestParams, Request};
use rmcp::service::PeerRequestOptions;
use serde_json::json;

use crate::helpers::{
    args, call, hear_the_end_of, send_signal, start_sleepers, stdio_client, structured, text,
    wait_all_gone,
};

#[tokio::test]
async fn tools_and_server_info() {
    let (client, _, _) = stdio_client(&["--codex-compat"]).await;
    let info = client.peer_info().expect("initialized");
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("uexec")
    );
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    assert_eq!(
        names,
        [
            "exec_command",
            "write_stdin",
            "list_sessions",
            "terminate_session",
            "wait",
            "read_output"
        ]
    );
    assert!(tools.iter().take(2).all(|t| t.output_schema.is_some()));
    client.cancel().await.unwrap();

    let (client, _, _) = stdio_client(&["--codex-compat", "--codex-tools-only"]).await;
    let names: Vec<_> = client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names, ["exec_command", "write_stdin"]);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn exec_poll_and_errors_as_tool_results() {
    let (client, _, _) = stdio_client(&["--codex-compat"]).await;
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "echo hello", "login": false}),
    )
    .await;
    assert_eq!(r.is_error, Some(false));
    assert!(text(&r).ends_with("Output:\nhello\n"), "{}", text(&r));
    assert_eq!(structured(&r)["exit_code"], 0);

    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "sleep 0.5; echo late", "login": false, "yield_time_ms": 250}),
    )
    .await;
    let id = structured(&r)["session_id"].as_i64().expect("running");
    let p = call(&client, "write_stdin", json!({"session_id": id})).await;
    assert_eq!(structured(&p)["exit_code"], 0, "{}", text(&p));
    assert!(text(&p).contains("late"));

    let e = call(&client, "write_stdin", json!({"session_id": id})).await;
    assert_eq!(e.is_error, Some(true));
    assert_eq!(
        text(&e),
        format!("write_stdin failed: Unknown process id {id}")
    );
    let e = call(&client, "exec_command", json!({"cmd": "x", "tty": "yes"})).await;
    assert!(
        text(&e).starts_with("exec_command failed: invalid arguments: tty: "),
        "{}",
        text(&e)
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn output_during_the_window_arrives_as_progress() {
    let (client, recorder, _) = stdio_client(&["--codex-compat"]).await;
    let params = CallToolRequestParams::new("exec_command").with_arguments(args(json!({
        "cmd": "for i in 1 2 3; do echo progress-$i; sleep 0.2; done",
        "login": false,
        "yield_time_ms": 5000
    })));
    let handle = client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(params)),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    handle.await_response().await.unwrap();
    let progress = recorder.progress.lock().unwrap().clone();
    let text: String = progress.iter().filter_map(|p| p.message.clone()).collect();
    assert_eq!(text, "progress-1\nprogress-2\nprogress-3\n", "{progress:?}");
    assert!(progress.windows(2).all(|w| w[0].progress < w[1].progress));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn sessions_are_resources_and_subscribers_hear_the_end() {
    let (client, recorder, _) = stdio_client(&["--codex-compat"]).await;
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "echo resource-output; sleep 1", "login": false, "yield_time_ms": 250}),
    )
    .await;
    let id = structured(&r)["session_id"].as_i64().expect("running");
    let uri = format!("uexec://sessions/{id}");
    let listed = client.list_all_resources().await.unwrap();
    assert!(listed.iter().any(|res| res.uri == uri), "{listed:?}");
    let read = client
        .read_resource(ReadResourceRequestParams::new(uri.clone()))
        .await
        .unwrap();
    let body = serde_json::to_string(&read).unwrap();
    assert!(
        body.contains("resource-output") && body.contains("state: running"),
        "{body}"
    );
    // No such session: -32002 (resource not found), naming the URI in `data` too.
    for missing in ["uexec://sessions/999999", "test://elsewhere"] {
        let error = client
            .read_resource(ReadResourceRequestParams::new(missing))
            .await
            .expect_err("no such resource");
        let rmcp::ServiceError::McpError(error) = error else {
            panic!("{missing}: {error:?}");
        };
        assert_eq!(error.code.0, -32002, "{missing}: {error:?}");
        assert_eq!(error.data, Some(json!({"uri": missing})), "{missing}");
    }
    hear_the_end_of(&client, &recorder, id, async {}).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn closing_stdin_kills_every_session() {
    let (client, _, _) = stdio_client(&["--codex-compat"]).await;
    let markers = start_sleepers(&client, &[("sleep {}", false), ("sleep {}", true)]).await;
    client.cancel().await.unwrap(); // closes the server's stdin
    wait_all_gone(&markers, "sessions to die with their server").await;
}

#[tokio::test]
async fn sigterm_to_the_server_kills_every_session() {
    let (client, _, pid) = stdio_client(&["--codex-compat"]).await;
    let markers = start_sleepers(&client, &[("sleep {0} & sleep {0}", false)]).await;
    send_signal(pid, "TERM");
    wait_all_gone(&markers, "sessions to die on SIGTERM").await;
    drop(client);
}

#[tokio::test]
async fn children_die_when_the_server_is_killed() {
    let (client, _, pid) = stdio_client(&["--codex-compat"]).await;
    let markers = start_sleepers(
        &client,
        &[("exec sleep {}", false), ("exec sleep {}", true)],
    )
    .await;
    // SIGKILL: no shutdown code runs; only the parent-death signal can take the children.
    send_signal(pid, "KILL");
    wait_all_gone(&markers, "children to die with their killed server").await;
    drop(client);
}

#[tokio::test]
async fn background_jobs_die_when_the_server_is_killed() {
    let (client, _, pid) = stdio_client(&["--codex-compat"]).await;
    // The background sleep is a grandchild: no parent-death signal reaches it. The last-will
    // watchdog must.
    let markers = start_sleepers(&client, &[("sleep {0} & sleep {0}; true", false)]).await;
    send_signal(pid, "KILL");
    wait_all_gone(&markers, "the session's whole process group to die").await;
    drop(client);
}

/// `printf REQUESTS | uexec mcp`: a client that closes its stdin at once still reads the
/// answer to each call it made, and a call still running `CLOSING` (5 s) after the end of
/// its input is cancelled and says so: the server exits then, without rmcp's own 5 s drain
/// after it (which it would log).
#[test]
fn a_piped_conversation_reads_its_answers_and_a_call_left_running_is_cancelled() {
    let dir = crate::helpers::scratch_dir("mcp-piped");
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let call = |id: u32, cmd: &str, yield_ms: u32| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "exec_command",
            "arguments": {"cmd": cmd, "login": false, "yield_time_ms": yield_ms}}})
    };
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "piped", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        call(2, "sleep 1; echo slow-$((6*7))", 10_000),
        call(3, "sleep 600", 30_000),
    ];
    let mut cmd = std::process::Command::new(crate::helpers::UEXEC);
    cmd.args(["mcp", "--in-process", "--no-transcripts"])
        .current_dir(&dir)
        .env("HOME", dir.join("home"))
        .env("UEXEC_LOG", "warn");
    let (said, logged) = crate::helpers::piped(cmd, &lines);
    let answer = |id: u32| {
        said.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|m| m["id"] == id)
            .unwrap_or_else(|| panic!("no answer to {id}: {said}"))
            .to_string()
    };
    assert!(answer(2).contains("slow-42"), "{said}");
    assert!(answer(3).contains("cancelled by the client"), "{said}");
    assert!(!logged.contains("timed out draining"), "{logged}");
}
