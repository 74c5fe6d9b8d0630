//! `process/write`: closed stdin, pipes, PTYs, writeId idempotency.

use std::time::Duration;

use serde_json::{json, Value};
use uexec_server::ServerConfig;

use crate::helpers::{b64, eventually, pid_alive, Client, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_pipe_stdin_stdin_is_closed() {
    let server = TestServer::start().await;
    let client = server.session().await;
    client.sh("n", "cat; echo rc=$?; sleep 30", json!({})).await;
    client.wait_output("n", b"rc=0\n").await;
    assert_eq!(client.write("n", b"x", "w").await, "stdinClosed");
    assert_eq!(client.write("ghost", b"x", "w").await, "unknownProcess");
    client
        .call("process/terminate", json!({"processId": "n"}))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_write_id_is_written_once() {
    let server = TestServer::start().await;
    let client = server.session().await;
    client
        .start("cat", &["cat"], json!({"pipeStdin": true}))
        .await;
    assert_eq!(client.write("cat", b"one\n", "w-1").await, "accepted");
    assert_eq!(client.write("cat", b"one\n", "w-1").await, "accepted");
    assert_eq!(client.write("cat", b"two\n", "w-2").await, "accepted");
    let out = client.wait_output("cat", b"two\n").await;
    assert_eq!(out, b"one\ntwo\n");

    let err = client
        .call_error(
            "process/write",
            json!({"processId": "cat", "chunk": b64(b"x"), "writeId": ""}),
        )
        .await;
    assert_eq!(err["code"], -32602);
    let err = client
        .call_error(
            "process/write",
            json!({"processId": "cat", "chunk": "%%", "writeId": "w-3"}),
        )
        .await;
    assert_eq!(err["code"], -32602);
    client
        .call("process/terminate", json!({"processId": "cat"}))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tty_echoes_and_ends_on_ctrl_d() {
    let server = TestServer::start().await;
    let client = server.session().await;
    client.start("tty", &["cat"], json!({"tty": true})).await;
    assert_eq!(client.write("tty", b"ping\n", "w1").await, "accepted");
    client.wait_output("tty", b"ping\r\nping\r\n").await;
    assert_eq!(client.write("tty", b"\x04", "w2").await, "accepted");
    client.wait_closed("tty").await;
    let inbox = client.inbox();
    assert!(inbox.events["tty"]
        .values()
        .filter(|e| e["method"] == "process/output")
        .all(|e| e["params"]["stream"] == "pty"));
    assert_eq!(inbox.exited("tty").unwrap()["exitCode"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_queue_in_order_behind_a_full_pipe() {
    // The process reads nothing until a flag file exists: the first big write fills the pipe
    // and waits; the write behind it must land after it, and the connection stays responsive.
    let server = TestServer::start().await;
    let client = server.session().await;
    let dir = std::env::temp_dir().join(format!("uexec-it-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let flag = dir.join("go");
    let _ = std::fs::remove_file(&flag);
    let script = format!(
        "while [ ! -e '{}' ]; do sleep 0.02; done; cat",
        flag.display()
    );
    client.sh("slow", &script, json!({"pipeStdin": true})).await;
    let big = vec![b'a'; 512 * 1024];
    let first = client.send_request(
        "process/write",
        json!({"processId": "slow", "chunk": b64(&big), "writeId": "big"}),
    );
    let second = client.send_request(
        "process/write",
        json!({"processId": "slow", "chunk": b64(b"END"), "writeId": "end"}),
    );
    client.call("environment/info", json!({})).await;
    assert!(
        !client.inbox().responses.contains_key(&first.to_string()),
        "the pipe cannot hold 512 KiB"
    );
    std::fs::write(&flag, b"").unwrap();
    let out = client.wait_output("slow", b"END").await;
    assert_eq!(
        client.response(&first).await["result"]["status"],
        "accepted"
    );
    assert_eq!(
        client.response(&second).await["result"]["status"],
        "accepted"
    );
    assert_eq!(out.len(), big.len() + 3);
    assert!(out.starts_with(&big) && out.ends_with(b"END"));
    client
        .call("process/terminate", json!({"processId": "slow"}))
        .await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Starts `sleep 600` with an open stdin pipe it never reads and floods that stdin with
/// `writes` pipelined 64 KiB writes; returns the sleep's pid and the writes' request ids.
async fn flood_a_stdin_nobody_reads(client: &Client, writes: usize) -> (u32, Vec<Value>) {
    client
        .sh(
            "deaf",
            "echo pid=$$; exec sleep 600",
            json!({"pipeStdin": true}),
        )
        .await;
    let out = client.wait_output("deaf", b"\n").await;
    let pid = String::from_utf8(out).unwrap();
    let pid: u32 = pid.trim().trim_start_matches("pid=").parse().unwrap();
    let chunk = b64(&vec![b'x'; 64 * 1024]);
    let ids = (0..writes)
        .map(|i| {
            client.send_request(
                "process/write",
                json!({"processId": "deaf", "chunk": chunk, "writeId": format!("w{i}")}),
            )
        })
        .collect();
    (pid, ids)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_that_never_reads_its_stdin_does_not_wedge_the_connection() {
    let server = TestServer::start().await;
    let client = server.session().await;
    let (pid, writes) = flood_a_stdin_nobody_reads(&client, 200).await;
    // Read and answered behind 200 writes the process will never take.
    let terminated = client
        .call("process/terminate", json!({"processId": "deaf"}))
        .await;
    assert_eq!(terminated["running"], true);
    eventually(&format!("pid {pid} to die"), || !pid_alive(pid)).await;
    // Every write got an answer: written, refused as the queue was full, or stdin closed by
    // the kill; none was written twice nor silently dropped.
    let mut full = 0;
    for id in &writes {
        let reply = client.response(id).await;
        match (&reply["result"]["status"], &reply["error"]) {
            (Value::String(s), Value::Null) if s == "accepted" || s == "stdinClosed" => {}
            (Value::Null, error) if error["data"]["kind"] == "stdinFull" => {
                assert_eq!(error["code"], -32603, "{reply}");
                full += 1;
            }
            _ => panic!("unexpected answer to a write: {reply}"),
        }
    }
    assert!(full > 0, "200 writes of 64 KiB cannot all be queued");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_behind_a_full_stdin_is_noticed_and_its_session_expires() {
    let config = ServerConfig {
        detached_session_ttl: Duration::from_millis(200),
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(config, None).await;
    let client = server.session().await;
    let (pid, _) = flood_a_stdin_nobody_reads(&client, 200).await;
    client.call("environment/info", json!({})).await;
    drop(client);
    // The server sees the socket go, detaches the session, and expires it with its process.
    eventually(&format!("pid {pid} to die"), || !pid_alive(pid)).await;
    eventually("the session to expire", || {
        server.server.session_count() == 0
    })
    .await;
}
