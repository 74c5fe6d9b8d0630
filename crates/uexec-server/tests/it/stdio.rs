//! The dialect over newline-delimited JSON (an in-memory pipe standing in for stdin/stdout).

use std::sync::Arc;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use uexec_core::LocalBackend;
use uexec_server::transport::stdio;
use uexec_server::{ExecServer, ServerConfig};

use crate::helpers::{eventually, pid_alive, unb64, WAIT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_runs_processes_and_eof_ends_everything() {
    let server = ExecServer::new(ServerConfig::default(), Arc::new(LocalBackend));
    let (mut to_server, server_in) = tokio::io::duplex(64 * 1024);
    let (server_out, from_server) = tokio::io::duplex(64 * 1024);
    let serving = tokio::spawn(stdio::serve_on(server.clone(), server_in, server_out));
    let mut lines = BufReader::new(from_server).lines();

    let send = |v: Value| format!("{v}\n");
    to_server
        .write_all(
            send(json!({"id": 1, "method": "initialize", "params": {"clientName": "it"}}))
                .as_bytes(),
        )
        .await
        .unwrap();
    assert!(next(&mut lines).await["result"]["sessionId"].is_string());
    let start = json!({"id": 2, "method": "process/start", "params": {
        "processId": "p", "argv": ["/bin/sh", "-c", "echo $$; exec sleep 1000"],
        "cwd": "file:///tmp", "env": {"PATH": "/usr/bin:/bin"}, "tty": false}});
    let script = format!(
        "{}\n\n{{not json\r\n{}",
        json!({"method": "initialized", "params": {}}),
        send(start)
    );
    to_server.write_all(script.as_bytes()).await.unwrap();
    let malformed = next(&mut lines).await;
    assert_eq!(malformed["id"], -1);
    assert_eq!(
        next(&mut lines).await,
        json!({"id": 2, "result": {"processId": "p", "sandboxType": "none"}})
    );
    let output = next(&mut lines).await;
    assert_eq!(output["method"], "process/output");
    let pid: u32 = String::from_utf8(unb64(output["params"]["chunk"].as_str().unwrap()))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(pid_alive(pid));

    drop(to_server); // EOF
    tokio::time::timeout(WAIT, serving)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    server.shutdown();
    eventually("the process to die with the stdio server", || {
        !pid_alive(pid)
    })
    .await;
}

async fn next<R: tokio::io::AsyncBufRead + Unpin>(lines: &mut tokio::io::Lines<R>) -> Value {
    let line = tokio::time::timeout(WAIT, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    serde_json::from_str(&line).unwrap()
}
