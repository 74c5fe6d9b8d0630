//! The MCP details a client's SDK checks: an unknown tool is a JSON-RPC error, the
//! instructions name only the tools offered, and every tool has a title and its hints.

use rmcp::model::CallToolRequestParams;
use serde_json::json;

use crate::helpers::{args, stdio_client};

#[tokio::test]
async fn an_unknown_tool_is_an_invalid_params_error_not_a_result() {
    for flags in [&[][..], &["--codex-tools-only"]] {
        let (client, _, _) = stdio_client(flags).await;
        // Offered elsewhere (wait) or nowhere: neither runs, and the error says which tool.
        for name in ["no_such_tool", "wait", "send_input"] {
            if name == "wait" && flags.is_empty() {
                continue;
            }
            let params =
                CallToolRequestParams::new(name).with_arguments(args(json!({"session_ids": [1]})));
            let error = client
                .call_tool(params)
                .await
                .expect_err("an unknown tool is no result");
            let text = format!("{error:?}");
            assert!(
                text.contains("-32602") || text.contains("InvalidParams"),
                "{flags:?} {name}: {text}"
            );
            assert!(
                text.contains(&format!("unknown tool \\\"{name}\\\"")),
                "{flags:?} {name}: {text}"
            );
        }
        client.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn the_instructions_name_only_the_tools_offered() {
    let (client, _, _) = stdio_client(&["--codex-compat"]).await;
    let info = client.peer_info().expect("initialized");
    let said = info.instructions.clone().unwrap_or_default();
    for tool in [
        "exec_command",
        "write_stdin",
        "list_sessions",
        "terminate_session",
        "wait",
        "read_output",
    ] {
        assert!(said.contains(tool), "{tool}: {said}");
    }
    client.cancel().await.unwrap();
    let (client, _, _) = stdio_client(&["--codex-compat", "--codex-tools-only"]).await;
    let info = client.peer_info().expect("initialized");
    let said = info.instructions.clone().unwrap_or_default();
    assert!(
        said.contains("exec_command") && said.contains("write_stdin"),
        "{said}"
    );
    for tool in ["list_sessions", "terminate_session", "wait", "read_output"] {
        assert!(!said.contains(tool), "{tool} is not offered: {said}");
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn every_tool_has_a_title_and_its_hints() {
    let (client, _, _) = stdio_client(&["--codex-compat"]).await;
    let tools = client.list_all_tools().await.unwrap();
    for tool in &tools {
        assert!(
            tool.title.as_deref().is_some_and(|t| !t.is_empty()),
            "{}",
            tool.name
        );
        let hints = tool.annotations.as_ref().expect("annotations");
        let read_only = ["list_sessions", "read_output"].contains(&tool.name.as_ref());
        assert_eq!(hints.read_only_hint, Some(read_only), "{}", tool.name);
        if tool.name == "terminate_session" {
            assert_eq!(hints.destructive_hint, Some(true));
        }
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_client_of_the_initialize_handshake_hears_the_resource_list_change_it_was_promised() {
    let (client, recorder, _) = stdio_client(&[]).await;
    let info = client.peer_info().expect("initialized");
    let promised = info
        .capabilities
        .resources
        .as_ref()
        .and_then(|r| r.list_changed);
    assert_eq!(promised, Some(true));
    let heard = || {
        recorder
            .resources_changed
            .load(std::sync::atomic::Ordering::SeqCst)
    };
    assert_eq!(heard(), 0);
    crate::helpers::call(
        &client,
        "exec_command",
        json!({"cmd": "exec sleep 30", "login": false, "yield_time_ms": 250}),
    )
    .await;
    crate::helpers::eventually("a list change", std::time::Duration::from_secs(30), || {
        heard() > 0
    })
    .await;
    client.cancel().await.unwrap();
}
