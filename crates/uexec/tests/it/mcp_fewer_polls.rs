//! Fewer polls over MCP: uexec's own arguments and result fields, exit notices, `wait`
//! with progress, and the Codex dialect left exactly as it was without the flag.

use std::time::Duration;

use rmcp::model::SubscribeRequestParams;
use serde_json::{json, Value};

use crate::helpers::{call, eventually, stdio_client, structured, text};

fn properties(tool: &rmcp::model::Tool) -> Vec<String> {
    let mut names: Vec<String> = tool
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    names.sort();
    names
}

#[tokio::test]
async fn without_the_flag_the_arguments_are_codexs_and_until_is_refused() {
    let (client, _, _) = stdio_client(&["--codex-compat"]).await;
    let tools = client.list_all_tools().await.unwrap();
    let exec = tools.iter().find(|t| t.name == "exec_command").unwrap();
    assert_eq!(
        properties(exec),
        [
            "cmd",
            "login",
            "max_output_tokens",
            "shell",
            "tty",
            "workdir",
            "yield_time_ms"
        ]
    );
    assert!(tools.iter().any(|t| t.name == "wait"));
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "true", "until": {"exit": true}}),
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    assert!(
        text(&r).starts_with("exec_command failed: invalid arguments: until: unknown field"),
        "{}",
        text(&r)
    );
    let ok = call(
        &client,
        "exec_command",
        json!({"cmd": "echo hi", "login": false}),
    )
    .await;
    let fields = structured(&ok);
    assert!(
        fields.get("reason").is_none(),
        "Codex's structured form: {fields}"
    );
    assert!(!text(&ok).contains("Reason:"), "{}", text(&ok));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn extended_calls_return_at_the_match_and_say_why() {
    let (client, _, _) = stdio_client(&["--structured"]).await;
    let tools = client.list_all_tools().await.unwrap();
    let exec = tools.iter().find(|t| t.name == "exec_command").unwrap();
    for name in ["until", "timeout_ms", "stdin", "strip_ansi", "collapse_cr"] {
        assert!(properties(exec).contains(&name.to_owned()), "{name}");
    }
    let write = tools.iter().find(|t| t.name == "write_stdin").unwrap();
    assert!(properties(write).contains(&"eof".to_owned()));

    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "sleep 0.3; echo 'ready on :3000'; exec sleep 30", "login": false,
               "yield_time_ms": 30000, "until": {"pattern": "ready on :[0-9]+"}}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(s["reason"], "matched", "{s}");
    assert_eq!(s["match"]["text"], "ready on :3000");
    assert_eq!(s["match"]["offset"], 0);
    assert!(
        text(&r).contains("Reason: matched \"ready on :3000\" at output byte 0\n"),
        "{}",
        text(&r)
    );
    // Nothing was left out: the transcript is named in the data, not in the text.
    assert!(s["transcript"].is_string(), "{s}");
    assert!(!text(&r).contains("Transcript:"), "{}", text(&r));
    let id = s["session_id"].as_i64().expect("running");
    call(&client, "terminate_session", json!({"session_id": id})).await;

    let t = call(
        &client,
        "exec_command",
        json!({"cmd": "echo started; exec sleep 30", "login": false,
               "yield_time_ms": 10000, "timeout_ms": 400}),
    )
    .await;
    let s = structured(&t);
    assert_eq!(
        (s["exit_code"].clone(), s["timed_out_ms"].clone()),
        (json!(124), json!(400))
    );
    assert!(
        text(&t).contains("Process timed out after 400 ms"),
        "{}",
        text(&t)
    );

    let p = call(
        &client,
        "exec_command",
        json!({"cmd": "sort", "login": false, "stdin": "pipe", "yield_time_ms": 250}),
    )
    .await;
    let id = structured(&p)["session_id"]
        .as_i64()
        .expect("waiting for input");
    let done = call(
        &client,
        "write_stdin",
        json!({"session_id": id, "chars": "b\na\n", "eof": true, "yield_time_ms": 5000}),
    )
    .await;
    assert_eq!(structured(&done)["output"], "a\nb\n", "{}", text(&done));
    assert_eq!(structured(&done)["exit_code"], 0);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn extended_bad_input_names_the_field_and_starts_nothing() {
    let (client, _, _) = stdio_client(&["--structured"]).await;
    for (arguments, want) in [
        (
            json!({"cmd": "true", "until": {"bogus": 1}}),
            "until.bogus: unknown field",
        ),
        (
            json!({"cmd": "true", "until": {"pattern": "("}}),
            "until.pattern: not a valid regex",
        ),
        (
            json!({"cmd": "true", "until": {"idle_ms": 0}}),
            "until.idle_ms: 0 is out of range",
        ),
        (
            json!({"cmd": "true", "timeout_ms": 5}),
            "timeout_ms: 5 is out of range",
        ),
        (
            json!({"cmd": "true", "stdin": "tty"}),
            "stdin: \"tty\" is not one of",
        ),
    ] {
        let r = call(&client, "exec_command", arguments.clone()).await;
        assert_eq!(r.is_error, Some(true), "{arguments}");
        assert!(
            text(&r).contains(&format!("invalid arguments: {want}")),
            "{arguments}: {}",
            text(&r)
        );
    }
    let running = call(
        &client,
        "exec_command",
        json!({"cmd": "exec sleep 30", "login": false, "yield_time_ms": 250}),
    )
    .await;
    let id = structured(&running)["session_id"].as_i64().unwrap();
    let r = call(
        &client,
        "write_stdin",
        json!({"session_id": id, "eof": true}),
    )
    .await;
    assert!(
        text(&r).contains("invalid arguments: eof: session"),
        "{}",
        text(&r)
    );
    let listed = call(&client, "list_sessions", json!({})).await;
    assert_eq!(
        structured(&listed)["sessions"].as_array().map(Vec::len),
        Some(1)
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
#[allow(deprecated)] // resources/subscribe: the legacy path, still what most clients use
async fn an_unwatched_exit_is_announced_once_in_the_next_result() {
    let (client, recorder, _) = stdio_client(&["--structured"]).await;
    // It exits when the test says so: after the subscription.
    let (id, gate) = crate::helpers::gated_session(&client, "exit 3").await;
    let uri = format!("uexec://sessions/{id}");
    client
        .subscribe(SubscribeRequestParams::new(uri.clone()))
        .await
        .unwrap();
    std::fs::write(&gate, "").unwrap();
    let updated = recorder.updated.clone();
    eventually(
        "resources/updated for a silent session's exit",
        Duration::from_secs(10),
        || updated.lock().unwrap().contains(&uri),
    )
    .await;
    // The notice comes with the next result of any tool, here list_sessions.
    let mut notices = Value::Null;
    let mut listed_text = String::new();
    for _ in 0..100 {
        let listed = call(&client, "list_sessions", json!({})).await;
        notices = structured(&listed)["exit_notices"].clone();
        listed_text = text(&listed);
        if !notices.is_null() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(notices[0]["session_id"], id, "{notices}");
    assert_eq!(notices[0]["exit_code"], 3);
    assert!(
        listed_text.contains(&format!("Session {id} (while [ ! -e "))
            && listed_text.contains(") exited with code 3, "),
        "{listed_text}"
    );
    let again = call(&client, "list_sessions", json!({})).await;
    assert!(structured(&again).get("exit_notices").is_none(), "once");
    client.cancel().await.unwrap();
    let _ = std::fs::remove_file(&gate);
}

#[tokio::test]
async fn wait_returns_when_every_session_is_done_with_progress_meanwhile() {
    let (client, recorder, _) = stdio_client(&["--codex-compat"]).await;
    let mut ids = Vec::new();
    for cmd in ["sleep 2.5; exit 1", "sleep 3; echo two"] {
        let r = call(
            &client,
            "exec_command",
            json!({"cmd": cmd, "login": false, "yield_time_ms": 250}),
        )
        .await;
        ids.push(structured(&r)["session_id"].as_i64().expect("running"));
    }
    let r = call(
        &client,
        "wait",
        json!({"session_ids": ids, "all": true, "yield_time_ms": 60000}),
    )
    .await;
    let s = structured(&r);
    let sessions = s["sessions"].as_array().expect("sessions");
    assert_eq!(sessions[0]["exit_code"], 1, "{s}");
    assert_eq!(sessions[1]["exit_code"], 0);
    assert_eq!(sessions[1]["output"], "two\n");
    assert_eq!(sessions[1]["reason"], "exited");
    assert!(text(&r).contains(&format!("=== Session {} ===", ids[1])));
    assert!(
        !recorder.progress.lock().unwrap().is_empty(),
        "a heartbeat while the sessions were quiet"
    );
    let bad = call(&client, "wait", json!({"session_ids": []})).await;
    assert!(
        text(&bad).contains("invalid arguments: session_ids"),
        "{}",
        text(&bad)
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_cut_result_points_into_the_transcript_and_read_output_has_it() {
    let dir = std::env::temp_dir().join(format!("uexec-it-tr-{}", crate::helpers::rand_suffix()));
    let root = dir.join("sessions");
    let root_arg = root.display().to_string();
    let (client, _, _) = stdio_client(&["--structured", "--transcripts-dir", &root_arg]).await;
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "read_output"));
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "seq 1 1100000", "login": false, "yield_time_ms": 30000}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(s["exit_code"], 0, "{}", text(&r));
    let transcript = s["transcript"].as_str().expect("a transcript path");
    assert!(transcript.starts_with(&root_arg), "{transcript}");
    let start = s["omitted_range"]["start"]
        .as_u64()
        .expect("bytes were left out");
    assert!(
        text(&r).contains(&format!("Transcript: {transcript} (bytes {start}..")),
        "{}",
        &text(&r)[..400]
    );
    // What the result left out, read back: the line that starts there.
    let page = call(
        &client,
        "read_output",
        json!({"transcript": transcript, "offset": start, "limit": 100}),
    )
    .await;
    let p = structured(&page);
    assert_eq!(p["offset"], start, "{}", text(&page));
    let mut want = String::new();
    for i in 1..=1_100_000 {
        want.push_str(&format!("{i}\n"));
    }
    let start = start as usize;
    assert_eq!(p["text"], want[start..start + 100]);
    let tail = call(
        &client,
        "read_output",
        json!({"transcript": transcript, "tail_lines": 1}),
    )
    .await;
    assert_eq!(structured(&tail)["text"], "1100000\n");
    let bad = call(
        &client,
        "read_output",
        json!({"transcript": transcript, "limit": -5}),
    )
    .await;
    assert!(
        text(&bad).contains("invalid arguments: limit: -5 is out of range"),
        "{}",
        text(&bad)
    );
    client.cancel().await.unwrap();

    let (client, _, _) = stdio_client(&["--codex-compat", "--no-transcripts"]).await;
    let tools = client.list_all_tools().await.unwrap();
    assert!(!tools.iter().any(|t| t.name == "read_output"));
    client.cancel().await.unwrap();
}

#[test]
fn a_transcripts_dir_open_to_others_stops_the_server() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!(
        "uexec-it-tr-open-{}",
        crate::helpers::rand_suffix()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = std::process::Command::new(crate::helpers::UEXEC)
        .args(["mcp", "--transcripts-dir"])
        .arg(&dir)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--transcripts-dir") && err.contains("mode 0700"),
        "{err}"
    );
}
