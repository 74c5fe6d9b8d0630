//! The HTTP side: Origin refused, /readyz, /metrics, bearer token.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Error as WsError;
use uexec_server::ServerConfig;

use crate::helpers::{Client, TestServer};

async fn upgrade_status(url: &str, header: Option<(&'static str, &str)>) -> Result<(), u16> {
    let mut request = url.into_client_request().unwrap();
    if let Some((name, value)) = header {
        request.headers_mut().insert(name, value.parse().unwrap());
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok(_) => Ok(()),
        Err(WsError::Http(response)) => Err(response.status().as_u16()),
        Err(e) => panic!("unexpected handshake failure: {e}"),
    }
}

async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    http_get_with(addr, path, "").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_header_is_refused_with_403() {
    let server = TestServer::start().await;
    for origin in ["http://evil.example", "http://127.0.0.1"] {
        assert_eq!(
            upgrade_status(&server.url(), Some(("origin", origin))).await,
            Err(403)
        );
    }
    // The server keeps serving ordinary clients.
    let client = server.session().await;
    client.call("environment/info", serde_json::json!({})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_is_200_and_other_paths_404() {
    let server = TestServer::start().await;
    assert!(http_get(server.addr, "/readyz")
        .await
        .starts_with("HTTP/1.1 200"));
    assert!(http_get(server.addr, "/nope")
        .await
        .starts_with("HTTP/1.1 404"));
    assert!(http_get(server.addr, "/").await.starts_with("HTTP/1.1 400"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_token_is_required() {
    let server = TestServer::start_with(ServerConfig::default(), Some("s3cret")).await;
    assert_eq!(upgrade_status(&server.url(), None).await, Err(401));
    assert_eq!(
        upgrade_status(&server.url(), Some(("authorization", "Bearer wrong"))).await,
        Err(401)
    );

    let mut request = server.url().into_client_request().unwrap();
    request
        .headers_mut()
        .insert("authorization", "Bearer s3cret".parse().unwrap());
    let (ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let client = Client::from_socket(ws);
    client.handshake(None).await;
    client.call("environment/info", serde_json::json!({})).await;
    // Health checks need no token.
    assert!(http_get(server.addr, "/readyz")
        .await
        .starts_with("HTTP/1.1 200"));
}

/// `GET path` with `header` (a whole header line, or none when empty).
async fn http_get_with(addr: std::net::SocketAddr, path: &str, header: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let header = if header.is_empty() {
        String::new()
    } else {
        format!("{header}\r\n")
    };
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{header}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_the_processes_for_a_client_with_the_token_and_no_web_page() {
    let server = TestServer::start_with(ServerConfig::default(), Some("s3cret")).await;
    let mut request = server.url().into_client_request().unwrap();
    request
        .headers_mut()
        .insert("authorization", "Bearer s3cret".parse().unwrap());
    let (ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let client = Client::from_socket(ws);
    client.handshake(None).await;
    client
        .sh(
            "p-secret-id",
            "echo metric-me; exit 2",
            serde_json::json!({}),
        )
        .await;
    client.wait_closed("p-secret-id").await;
    let bearer = "Authorization: Bearer s3cret";
    let text = http_get_with(server.addr, "/metrics", bearer).await;
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        text.contains("content-type: text/plain; version=0.0.4"),
        "{text}"
    );
    for line in [
        "\nuexec_spawns_total 1\n",
        "\nuexec_exits_total{cause=\"error\"} 1\n",
        "\nuexec_output_bytes_total 10\n",
        "\nuexec_call_duration_seconds_count{call=\"process/start\"} 1\n",
    ] {
        assert!(text.contains(line), "{line}: {text}");
    }
    assert!(!text.contains("p-secret-id") && !text.contains("metric-me"));
    // Without the token, or from a web page, nothing.
    assert!(http_get(server.addr, "/metrics")
        .await
        .starts_with("HTTP/1.1 401"));
    let page = format!("{bearer}\r\nOrigin: http://127.0.0.1");
    assert!(http_get_with(server.addr, "/metrics", &page)
        .await
        .starts_with("HTTP/1.1 403"));
}
