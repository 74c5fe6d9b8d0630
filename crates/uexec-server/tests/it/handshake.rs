//! `initialize` / `initialized` and the guard before them.

use serde_json::json;

use crate::helpers::{Client, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_returns_a_session_and_the_environment() {
    let server = TestServer::start().await;
    let client = Client::connect(&server.url()).await;
    let reply = client.handshake(None).await;
    let result = &reply["result"];
    assert!(
        result["sessionId"].as_str().is_some_and(|s| !s.is_empty()),
        "{reply}"
    );
    let shell = &result["environmentInfo"]["shell"];
    assert!(
        shell["path"].as_str().is_some_and(|p| p.starts_with('/')),
        "{reply}"
    );
    let info = client.call("environment/info", json!({})).await;
    assert_eq!(info, result["environmentInfo"]);
    assert!(info["cwd"]
        .as_str()
        .is_some_and(|c| c.starts_with("file:///")));

    let other = server.session().await;
    assert_ne!(other.session_id(), client.session_id());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_before_the_handshake_are_refused_and_start_nothing() {
    let server = TestServer::start().await;
    let client = Client::connect(&server.url()).await;
    let start = json!({"processId": "early", "argv": ["true"], "cwd": "file:///tmp", "env": {},
                       "tty": false});
    let err = client.call_error("process/start", start.clone()).await;
    assert_eq!(err["code"], -32600);
    assert_eq!(
        err["message"],
        "client must call initialize before using exec methods"
    );
    let err = client.call_error("environment/info", json!({})).await;
    assert_eq!(
        err["message"],
        "client must call initialize before using environment info methods"
    );

    client.call("initialize", json!({"clientName": "it"})).await;
    let err = client.call_error("process/start", start).await;
    assert_eq!(
        err["message"],
        "client must send initialized before using exec methods"
    );
    let err = client
        .call_error("initialize", json!({"clientName": "again"}))
        .await;
    assert!(err["message"].as_str().unwrap().contains("once"), "{err}");

    client.notify("initialized", json!({}));
    let err = client
        .call_error("process/read", json!({"processId": "early"}))
        .await;
    assert_eq!(err["message"], "unknown process id early");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_methods_are_method_not_found_even_before_initialize() {
    let server = TestServer::start().await;
    let client = Client::connect(&server.url()).await;
    let err = client.call_error("process/teleport", json!({})).await;
    assert_eq!(err["code"], -32601);
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("`process/teleport`"),
        "{err}"
    );
}
