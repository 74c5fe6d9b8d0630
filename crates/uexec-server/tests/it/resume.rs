//! Sessions outlive their connection: resume, -32010, expiry.

use std::time::Duration;

use serde_json::json;
use uexec_server::ServerConfig;

use crate::helpers::{eventually, pid_alive, unb64, Client, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_connection_can_be_resumed_and_gets_new_events() {
    let server = TestServer::start().await;
    let first = server.session().await;
    let sid = first.session_id();
    first
        .sh(
            "kept",
            "echo one; read line; echo two; sleep 30",
            json!({"pipeStdin": true}),
        )
        .await;
    first.wait_output("kept", b"one\n").await;
    first.close();
    first.wait_connection_closed().await;

    let second = resume(&server, &sid).await;
    let state = second
        .call("process/read", json!({"processId": "kept"}))
        .await;
    let chunks = state["chunks"].as_array().unwrap();
    assert_eq!(unb64(chunks[0]["chunk"].as_str().unwrap()), b"one\n");
    assert_eq!(second.write("kept", b"go\n", "w").await, "accepted");
    second.wait_output("kept", b"two\n").await;
    assert_eq!(
        second.inbox().events["kept"]
            .keys()
            .copied()
            .collect::<Vec<_>>(),
        vec![2]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attached_session_cannot_be_taken_and_unknown_ones_are_refused() {
    let server = TestServer::start().await;
    let owner = server.session().await;
    let thief = Client::connect(&server.url()).await;
    let reply = thief.handshake(Some(&owner.session_id())).await;
    assert_eq!(reply["error"]["code"], -32010, "{reply}");
    let reply = thief
        .handshake(Some("00000000-0000-4000-8000-000000000000"))
        .await;
    assert_eq!(reply["error"]["code"], -32600);
    assert!(reply["error"]["message"]
        .as_str()
        .unwrap()
        .contains("unknown session id"));
    // A refused resume does not use up the connection's one initialize.
    let reply = thief.handshake(None).await;
    assert!(reply["result"]["sessionId"].is_string(), "{reply}");
    owner.call("environment/info", json!({})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abrupt_disconnect_detaches_and_expiry_kills_the_processes() {
    let config = ServerConfig {
        detached_session_ttl: Duration::from_millis(300),
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(config, None).await;
    // A raw socket we can drop without a close handshake.
    let (ws, _) = tokio_tungstenite::connect_async(server.url())
        .await
        .unwrap();
    let client = Client::from_socket(ws);
    client.handshake(None).await;
    client
        .sh("victim", "echo $$; exec sleep 1000", json!({}))
        .await;
    let out = client.wait_output("victim", b"\n").await;
    let pid: u32 = String::from_utf8(out).unwrap().trim().parse().unwrap();
    assert!(pid_alive(pid));
    drop(client); // the client's tasks end; the socket is dropped without a close frame
    eventually("the detached session to expire", || {
        server.server.session_count() == 0
    })
    .await;
    eventually("the process to be killed", || !pid_alive(pid)).await;
}

async fn resume(server: &TestServer, sid: &str) -> Client {
    // The server may notice the old connection's end a moment after the client does.
    let deadline = tokio::time::Instant::now() + crate::helpers::WAIT;
    loop {
        let client = Client::connect(&server.url()).await;
        let reply = client.handshake(Some(sid)).await;
        if reply.get("result").is_some() {
            return client;
        }
        assert_eq!(reply["error"]["code"], -32010, "{reply}");
        assert!(
            tokio::time::Instant::now() < deadline,
            "session {sid} stayed attached"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
