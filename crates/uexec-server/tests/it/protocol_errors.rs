//! Malformed frames, binary frames, string ids, oversized messages.

use serde_json::json;
use tokio_tungstenite::tungstenite::Message;
use uexec_server::ServerConfig;

use crate::helpers::{Client, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_is_answered_with_id_minus_one_and_the_connection_lives() {
    let server = TestServer::start().await;
    let client = server.session().await;
    for (i, bad) in [
        "{not json",
        "[1,2]",
        r#"{"foo":1}"#,
        r#"{"id":null,"method":"x"}"#,
    ]
    .into_iter()
    .enumerate()
    {
        client.send_raw(Message::Text(bad.into()));
        let reply = client
            .wait_for("the answer to a malformed frame", |inbox| {
                inbox.malformed.get(i).cloned()
            })
            .await;
        assert_eq!(reply["error"]["code"], -32600, "{bad}: {reply}");
        assert!(reply.get("jsonrpc").is_none());
        client.call("environment/info", json!({})).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_frames_and_string_ids_work() {
    let server = TestServer::start().await;
    let client = server.session().await;
    let request = json!({"id": "bin-1", "method": "environment/info"}).to_string();
    client.send_raw(Message::Binary(request.into_bytes().into()));
    let reply = client.response(&json!("bin-1")).await;
    assert!(reply["result"]["shell"].is_object(), "{reply}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_message_drops_only_its_connection() {
    let config = ServerConfig {
        max_message_bytes: 64 * 1024,
        max_frame_bytes: 64 * 1024,
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(config, None).await;
    let victim = server.session().await;
    victim.sh("p", "sleep 30", json!({})).await;
    let huge = "x".repeat(128 * 1024);
    victim.send_json(&json!({"id": 9, "method": "environment/info", "params": {"pad": huge}}));
    victim.wait_connection_closed().await;
    // The server and other connections are unaffected; the session can be resumed.
    let other = Client::connect(&server.url()).await;
    let sid = victim.session_id();
    let deadline = tokio::time::Instant::now() + crate::helpers::WAIT;
    loop {
        let reply = other.handshake(Some(&sid)).await;
        if reply.get("result").is_some() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{reply}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let state = other.call("process/read", json!({"processId": "p"})).await;
    assert_eq!(state["exited"], false);
}
