//! A `resources/subscribe` watcher lives exactly as long as it has something to watch for a
//! client that is still there: unsubscribing the last URI, or the client going away, ends it
//! and its event subscriber (a leaked one costs memory, and CPU on every later event).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{SubscribeRequestParams, UnsubscribeRequestParams};
use rmcp::ServiceExt;
use tokio::runtime::Handle;
use uexec_core::{LocalBackend, SessionStore, StoreConfig};
use uexec_mcp::server::Options;
use uexec_mcp::stores::Stores;
use uexec_mcp::UexecServer;

fn alive_tasks() -> usize {
    Handle::current().metrics().num_alive_tasks()
}

async fn eventually_alive_tasks(expected: usize, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive_tasks() != expected {
        assert!(
            Instant::now() < deadline,
            "{what}: {} tasks alive, expected {expected}",
            alive_tasks()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
#[allow(deprecated)] // resources/subscribe: the legacy path
async fn a_watcher_ends_with_its_last_uri_and_with_its_client() {
    let store = SessionStore::new(Arc::new(LocalBackend), StoreConfig::default());
    let server = UexecServer::new(
        Stores::Single(store.clone()),
        Default::default(),
        false,
        Options::default(),
    );
    let before = alive_tasks();
    let (server_end, client_end) = tokio::io::duplex(64 * 1024);
    let serving = tokio::spawn(async move {
        let running = server.serve(server_end).await.unwrap();
        let _ = running.waiting().await;
    });
    let client = ().serve(client_end).await.unwrap();
    // After a round trip: the server has handled `initialized` (and started what a client
    // of the handshake gets) before the baseline is taken.
    client.list_all_tools().await.unwrap();
    let connected = alive_tasks();

    for uri in ["uexec://sessions/1000", "uexec://sessions/1001"] {
        client
            .subscribe(SubscribeRequestParams::new(uri))
            .await
            .unwrap();
    }
    client
        .unsubscribe(UnsubscribeRequestParams::new("uexec://sessions/1000"))
        .await
        .unwrap();
    assert!(alive_tasks() > connected, "a URI is still watched");
    client
        .unsubscribe(UnsubscribeRequestParams::new("uexec://sessions/1001"))
        .await
        .unwrap();
    eventually_alive_tasks(connected, "no URI left to watch").await;

    client
        .subscribe(SubscribeRequestParams::new("uexec://sessions/1000"))
        .await
        .unwrap();
    client.cancel().await.unwrap();
    serving.await.unwrap();
    eventually_alive_tasks(before, "the client went away").await;
    store.shutdown();
}

/// Over streamable HTTP (legacy sessions), a client that subscribes and ends its session
/// (DELETE) leaves no watcher behind.
#[tokio::test]
#[allow(deprecated)]
async fn an_http_session_that_ends_leaves_no_watcher() {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    use rmcp::transport::StreamableHttpClientTransport;

    let make_store = || SessionStore::new(Arc::new(LocalBackend), StoreConfig::default());
    let stores = Stores::per_principal(make_store);
    let server = UexecServer::new(
        stores.clone(),
        Default::default(),
        false,
        Options::default(),
    );
    let service = StreamableHttpService::new(
        move || Ok(server.for_connection()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    let serving = alive_tasks();

    for _ in 0..3 {
        let config = StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp"));
        let client = ().serve(StreamableHttpClientTransport::from_config(config)).await.unwrap();
        client
            .subscribe(SubscribeRequestParams::new("uexec://sessions/1000"))
            .await
            .unwrap();
        client.cancel().await.unwrap(); // DELETE
    }
    eventually_alive_tasks(serving, "every client ended its session").await;
    stores.shutdown();
}
