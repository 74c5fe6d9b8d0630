//! Cancelling a tool call (`notifications/cancelled`, or an HTTP client dropping the request)
//! ends the call only: the session lives on, and the output and exit the cancelled call did
//! not report go to the next call (SPEC §1, §6).

use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientRequest, Request};
use rmcp::service::{PeerRequestOptions, RequestHandle};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

use crate::helpers::{args, call, stdio_client, structured, text, Client, Recorder};
use crate::{mcp_http, mcp_listen};

async fn http_client(addr: &str, token: &str) -> Client {
    let config = StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp"))
        .auth_header(token.to_owned());
    Recorder::default()
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap()
}

async fn start_call(
    client: &Client,
    tool: &'static str,
    arguments: Value,
) -> RequestHandle<RoleClient> {
    let params = CallToolRequestParams::new(tool).with_arguments(args(arguments));
    client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(params)),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap()
}

/// A long poll cancelled while the command is still running: the next poll gets `DONE` and
/// the exit code.
async fn cancelled_poll_leaves_the_output(client: &Client) {
    let r = call(
        client,
        "exec_command",
        json!({"cmd": "sleep 2; echo DONE", "login": false, "yield_time_ms": 250}),
    )
    .await;
    let id = structured(&r)["session_id"].as_i64().expect("running");
    let poll = start_call(
        client,
        "write_stdin",
        json!({"session_id": id, "yield_time_ms": 300_000}),
    )
    .await;
    // The scenario of the report: the client gives up half a second into the poll.
    tokio::time::sleep(Duration::from_millis(500)).await;
    poll.cancel(Some("the user pressed Esc".into()))
        .await
        .unwrap();
    let next = tokio::time::timeout(
        Duration::from_secs(20),
        call(
            client,
            "write_stdin",
            json!({"session_id": id, "yield_time_ms": 300_000}),
        ),
    )
    .await
    .expect("the next poll is not stuck behind the cancelled one");
    assert_eq!(structured(&next)["exit_code"], 0, "{}", text(&next));
    assert_eq!(structured(&next)["output"], "DONE\n", "{}", text(&next));
}

/// An `exec_command` cancelled in its window: the session survives and the next poll gets
/// its output.
async fn cancelled_exec_leaves_the_session(client: &Client) {
    let exec = start_call(
        client,
        "exec_command",
        json!({"cmd": "sleep 1.5; echo LATE", "login": false, "yield_time_ms": 30_000}),
    )
    .await;
    let mut id = None;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while id.is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the session is never stored"
        );
        let list = call(client, "list_sessions", json!({})).await;
        id = structured(&list)["sessions"][0]["session_id"].as_i64();
    }
    exec.cancel(None).await.unwrap();
    let next = call(
        client,
        "write_stdin",
        json!({"session_id": id, "yield_time_ms": 300_000}),
    )
    .await;
    assert_eq!(structured(&next)["exit_code"], 0, "{}", text(&next));
    assert_eq!(structured(&next)["output"], "LATE\n", "{}", text(&next));
}

/// How the client reaches the server.
enum Transport {
    Stdio,
    /// Streamable HTTP with `initialize` and a session (DELETE ends it).
    Http,
    /// Streamable HTTP, 2026-07 protocol: no session; cancelling drops the request.
    StatelessHttp,
}

/// A client over `transport`, and the HTTP server it talks to, if any (killed on drop).
async fn client_over(transport: Transport) -> (Client, Option<mcp_http::Server>) {
    match transport {
        Transport::Stdio => (stdio_client(&["--codex-compat"]).await.0, None),
        Transport::Http => {
            let server = mcp_http::start(Some("s3cret"));
            (http_client(&server.addr, "s3cret").await, Some(server))
        }
        Transport::StatelessHttp => {
            let server = mcp_http::start(Some("s3cret"));
            let client = mcp_listen::connect_stateless(&server.addr, "s3cret").await;
            (client, Some(server))
        }
    }
}

async fn poll_scenario(transport: Transport) {
    let (client, _server) = client_over(transport).await;
    cancelled_poll_leaves_the_output(&client).await;
    client.cancel().await.unwrap();
}

async fn exec_scenario(transport: Transport) {
    let (client, _server) = client_over(transport).await;
    cancelled_exec_leaves_the_session(&client).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_cancelled_poll_loses_nothing_over_stdio() {
    poll_scenario(Transport::Stdio).await;
}

#[tokio::test]
async fn a_cancelled_exec_command_loses_nothing_over_stdio() {
    exec_scenario(Transport::Stdio).await;
}

#[tokio::test]
async fn a_cancelled_poll_loses_nothing_over_http() {
    poll_scenario(Transport::Http).await;
}

#[tokio::test]
async fn a_cancelled_exec_command_loses_nothing_over_http() {
    exec_scenario(Transport::Http).await;
}

#[tokio::test]
async fn a_cancelled_poll_loses_nothing_over_stateless_http() {
    poll_scenario(Transport::StatelessHttp).await;
}

#[tokio::test]
async fn a_cancelled_exec_command_loses_nothing_over_stateless_http() {
    exec_scenario(Transport::StatelessHttp).await;
}
