//! `subscriptions/listen` (MCP 2026-07) over HTTP: a listener hears the session list change
//! and the sessions it subscribed to change, each change told once however many events make
//! it.

use std::time::Duration;

use rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::json;

use crate::helpers::{call, structured, Client, Recorder};
use crate::mcp_http;

/// A client of the stateless protocol (`server/discover`, no `initialize`).
pub async fn connect_stateless(addr: &str, token: &str) -> Client {
    let config = StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp"))
        .auth_header(token.to_owned());
    Recorder::default()
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_config(config),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .unwrap()
}

async fn next(subscription: &mut rmcp::service::Subscription) -> ServerNotification {
    tokio::time::timeout(Duration::from_secs(10), subscription.next())
        .await
        .expect("a notification")
        .unwrap()
        .expect("the subscription is open")
}

#[tokio::test]
async fn a_listener_hears_the_list_and_its_sessions_change() {
    let server = mcp_http::start(Some("s3cret"));
    let client = connect_stateless(&server.addr, "s3cret").await;
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "sleep 30", "login": false, "yield_time_ms": 250}),
    )
    .await;
    let id = structured(&r)["session_id"].as_i64().expect("running");
    let uri = format!("uexec://sessions/{id}");
    let filter = SubscriptionFilter::builder()
        .resources_list_changed()
        .resource_subscription(uri.clone())
        .build();
    let mut subscription = client.listen(filter).await.unwrap();

    let r = call(&client, "terminate_session", json!({"session_id": id})).await;
    assert_eq!(r.is_error, Some(false));
    let mut heard_list = false;
    let mut heard_session = false;
    while !(heard_list && heard_session) {
        match next(&mut subscription).await {
            ServerNotification::ResourceListChangedNotification(_) => heard_list = true,
            ServerNotification::ResourceUpdatedNotification(n) => {
                assert_eq!(n.params.uri, uri);
                heard_session = true;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    subscription.cancel().await.unwrap();
    client.cancel().await.unwrap();
}
