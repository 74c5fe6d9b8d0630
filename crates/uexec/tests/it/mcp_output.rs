//! What a model reads of a pipe session in uexec's dialect (the default): stdout and stderr
//! in the order the program wrote them, Python's output as it goes, and a line saying why a
//! session that printed nothing may be silent. Codex's dialect keeps Codex's bytes.

use serde_json::json;

use crate::helpers::{call, stdio_client, structured, text};

#[tokio::test]
async fn stdout_and_stderr_keep_the_programs_order() {
    let (client, _, _) = stdio_client(&["--structured"]).await;
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "for i in $(seq 40); do echo out$i; echo err$i >&2; done", "login": false}),
    )
    .await;
    let expected: String = (1..=40).map(|i| format!("out{i}\nerr{i}\n")).collect();
    assert_eq!(structured(&r)["output"], expected.as_str());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_python_program_on_a_pipe_prints_as_it_goes() {
    let (client, _, _) = stdio_client(&["--codex-compat"]).await;
    // No flush: on a pipe Python would keep the line until exit, 30 s away.
    let r = call(
        &client,
        "exec_command",
        json!({
            "cmd": "python3 -c 'import time; print(\"Serving HTTP on 0.0.0.0 port 8000\"); time.sleep(30)'",
            "login": false,
            "yield_time_ms": 3000
        }),
    )
    .await;
    assert!(structured(&r)["session_id"].is_i64(), "{}", text(&r));
    assert!(
        text(&r).contains("Serving HTTP on 0.0.0.0 port 8000"),
        "{}",
        text(&r)
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_silent_pipe_session_is_told_why_it_may_be() {
    let (client, _, _) = stdio_client(&["--structured"]).await;
    let hint = "No output yet: on a pipe many programs hold their output back";
    let quiet = call(
        &client,
        "exec_command",
        json!({"cmd": "exec sleep 30", "login": false, "yield_time_ms": 250}),
    )
    .await;
    assert!(text(&quiet).contains(hint), "{}", text(&quiet));
    assert!(text(&quiet).contains("tty: true"), "{}", text(&quiet));
    // Not for a terminal, nor once something was printed, nor at an exit.
    for cmd in [
        json!({"cmd": "exec sleep 30", "tty": true}),
        json!({"cmd": "echo hi; exec sleep 30"}),
        json!({"cmd": "true"}),
    ] {
        let mut args = cmd.clone();
        args["login"] = json!(false);
        args["yield_time_ms"] = json!(250);
        let r = call(&client, "exec_command", args).await;
        assert!(!text(&r).contains(hint), "{cmd}: {}", text(&r));
    }
    client.cancel().await.unwrap();
    // Codex's dialect: Codex's lines only.
    let (client, _, _) = stdio_client(&["--codex-compat"]).await;
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "exec sleep 30", "login": false, "yield_time_ms": 250}),
    )
    .await;
    assert!(!text(&r).contains(hint), "{}", text(&r));
    client.cancel().await.unwrap();
}
