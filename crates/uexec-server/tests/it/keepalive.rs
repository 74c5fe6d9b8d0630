//! Pings keep a quiet but healthy connection open; a peer that answers nothing is dropped.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;
use uexec_server::ServerConfig;

use crate::helpers::{Client, TestServer};

fn fast_keepalive() -> ServerConfig {
    ServerConfig {
        ping_interval: Duration::from_millis(50),
        idle_timeout: Duration::from_millis(400),
        ..ServerConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_client_that_answers_pings_stays_connected() {
    // An idle timeout a busy machine's scheduler cannot come near (it once did at 400 ms).
    let config = ServerConfig {
        ping_interval: Duration::from_millis(25),
        idle_timeout: Duration::from_millis(1_000),
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(config, None).await;
    let client = server.session().await;
    // Three idle timeouts' worth of pings, each answered by the client library.
    client
        .wait_for("120 pings", |inbox| (inbox.pings >= 120).then_some(()))
        .await;
    assert!(!client.inbox().closed);
    client.call("environment/info", json!({})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_answers_nothing_is_dropped_and_its_session_detached() {
    let server = TestServer::start_with(fast_keepalive(), None).await;
    // Open a session, then stop reading the socket: pings go unanswered.
    let (mut mute, _) = tokio_tungstenite::connect_async(server.url())
        .await
        .unwrap();
    let init = json!({"id": 1, "method": "initialize", "params": {"clientName": "mute"}});
    mute.send(Message::Text(init.to_string().into()))
        .await
        .unwrap();
    let reply = loop {
        if let Some(Ok(Message::Text(text))) = mute.next().await {
            break serde_json::from_str::<serde_json::Value>(text.as_str()).unwrap();
        }
    };
    let sid = reply["result"]["sessionId"].as_str().unwrap().to_string();
    // While the mute connection is considered alive, its session cannot be taken; once the
    // server gives up on it (idle timeout), it can.
    let deadline = tokio::time::Instant::now() + crate::helpers::WAIT;
    loop {
        let other = Client::connect(&server.url()).await;
        let reply = other.handshake(Some(&sid)).await;
        if reply.get("result").is_some() {
            break;
        }
        assert_eq!(reply["error"]["code"], -32010);
        assert!(
            tokio::time::Instant::now() < deadline,
            "the mute peer was never dropped"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(mute);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_sends_but_never_reads_is_dropped_once_writes_stall() {
    let server = TestServer::start_with(fast_keepalive(), None).await;
    let (ws, _) = tokio_tungstenite::connect_async(server.url())
        .await
        .unwrap();
    let (mut sink, mut stream) = ws.split();
    let init = json!({"id": 1, "method": "initialize", "params": {"clientName": "hog"}});
    sink.send(Message::Text(init.to_string().into()))
        .await
        .unwrap();
    let reply = loop {
        if let Some(Ok(Message::Text(text))) = stream.next().await {
            break serde_json::from_str::<serde_json::Value>(text.as_str()).unwrap();
        }
    };
    let sid = reply["result"]["sessionId"].as_str().unwrap().to_string();
    sink.send(Message::Text(
        json!({"method": "initialized"}).to_string().into(),
    ))
    .await
    .unwrap();
    let flood = json!({"id": 2, "method": "process/start", "params": {
        "processId": "yes", "argv": ["yes"], "cwd": "file:///tmp",
        "env": {"PATH": "/usr/bin:/bin"}, "tty": false}});
    sink.send(Message::Text(flood.to_string().into()))
        .await
        .unwrap();
    // Keep the server's reader busy with requests (so silence is not what drops us) while
    // never reading a byte of the flood.
    let chatter = tokio::spawn(async move {
        let mut id = 10;
        loop {
            let request = json!({"id": id, "method": "environment/info"});
            if sink
                .send(Message::Text(request.to_string().into()))
                .await
                .is_err()
            {
                break;
            }
            id += 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let deadline = tokio::time::Instant::now() + crate::helpers::WAIT;
    loop {
        let other = Client::connect(&server.url()).await;
        let reply = other.handshake(Some(&sid)).await;
        if reply.get("result").is_some() {
            other
                .call("process/terminate", json!({"processId": "yes"}))
                .await;
            break;
        }
        assert_eq!(reply["error"]["code"], -32010);
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stalled peer was never dropped"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    chatter.abort();
    drop(stream);
}
