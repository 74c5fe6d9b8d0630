//! What a hostile peer costs in memory: one huge frame to the server, a flood of
//! notifications to the remote backend. The side under test runs in a child process (this
//! test binary again, running [`child_exec_server`] or [`child_remote_client`]), so its peak
//! RSS (`VmHWM`) is its own.

use std::process::Stdio;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::Message;
use uexec_client::RemoteBackend;
use uexec_core::backend::Backend;
use uexec_server::config::{MAX_FRAME_BYTES, MAX_MESSAGE_BYTES};

use crate::helpers::{TestServer, WAIT};
use crate::remote_support::scenarios::spawn_spec;

/// Set in the child's environment: [`child_exec_server`] then serves instead of returning.
const CHILD_VAR: &str = "UEXEC_IT_CHILD_EXEC_SERVER";

/// Not a test: the server of [`one_huge_frame_costs_the_server_less_than_four_times_the_limit`],
/// started as a child process. Prints its URL and serves until killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a server for other tests to run as a child process"]
async fn child_exec_server() {
    if std::env::var_os(CHILD_VAR).is_none() {
        return;
    }
    let server = TestServer::start().await;
    println!("url={}", server.url());
    std::future::pending::<()>().await;
}

/// This test binary again, running only the ignored test `name` with `var=value` set.
fn run_child(name: &str, var: &str, value: &str) -> tokio::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--ignored", "--nocapture"])
        .env(var, value)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// Peak resident memory of a process, in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM in {status}"));
    kib * 1024
}

/// `prefix` + `item,item,…,item` + `suffix`, about `total` bytes in all.
fn repeated(prefix: &str, item: &str, suffix: &str, total: usize) -> String {
    let n = (total - prefix.len() - suffix.len()) / (item.len() + 1);
    let mut text = String::with_capacity(total);
    text.push_str(prefix);
    text.push_str(&format!("{item},").repeat(n));
    text.push_str(item);
    text.push_str(suffix);
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_huge_frame_costs_the_server_less_than_four_times_the_limit() {
    let mut child = run_child("memory::child_exec_server", CHILD_VAR, "1");
    let pid = child.id().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(WAIT, async {
        loop {
            let line = lines.next_line().await.unwrap().expect("the child ended");
            if let Some(url) = line.strip_prefix("url=") {
                return url.to_string();
            }
        }
    })
    .await
    .expect("the child server printed no URL");
    let (mut ws, _) = tokio_tungstenite::connect_async(&url).await.unwrap();

    let near_limit = MAX_MESSAGE_BYTES - 4 * 1024 * 1024;
    let start = r#"{"id":2,"method":"process/start","params":{"processId":"p","cwd":"file:///","env":{},"tty":false,"argv":["#;
    let frames = [
        repeated("[", "0", "]", near_limit),
        repeated(
            r#"{"id":1,"method":"initialize","params":["#,
            "0",
            "]}",
            near_limit,
        ),
        repeated(start, r#""""#, "]}}", near_limit),
    ];
    for text in frames {
        // The server takes frames of up to MAX_FRAME_BYTES: send the message in pieces.
        let bytes = bytes::Bytes::from(text.into_bytes());
        let pieces: Vec<_> = bytes
            .chunks(MAX_FRAME_BYTES / 2)
            .map(bytes::Bytes::copy_from_slice)
            .collect();
        let last = pieces.len() - 1;
        for (i, piece) in pieces.into_iter().enumerate() {
            let opcode = if i == 0 {
                OpCode::Data(Data::Text)
            } else {
                OpCode::Data(Data::Continue)
            };
            ws.send(Message::Frame(Frame::message(piece, opcode, i == last)))
                .await
                .unwrap();
        }
        let answer = tokio::time::timeout(Duration::from_secs(120), async {
            loop {
                match ws.next().await {
                    Some(Ok(Message::Text(text))) => return text.to_string(),
                    Some(Ok(_)) => continue,
                    other => panic!("the server closed the connection: {other:?}"),
                }
            }
        })
        .await
        .expect("no answer to the huge frame");
        assert!(
            answer.contains("\"error\""),
            "{}",
            &answer[..answer.len().min(300)]
        );
    }
    let peak = peak_rss(pid);
    let limit = 4 * MAX_MESSAGE_BYTES as u64;
    assert!(
        peak < limit,
        "peak RSS {} MiB, more than 4 x the {} MiB message limit",
        peak >> 20,
        MAX_MESSAGE_BYTES >> 20
    );
    eprintln!("peak RSS of the server: {} MiB", peak >> 20);
    child.kill().await.unwrap();
}

/// Set in the child's environment (the server's URL): [`child_remote_client`] then runs.
const CLIENT_VAR: &str = "UEXEC_IT_CHILD_REMOTE_CLIENT";

/// Not a test: the client of [`a_flooding_server_costs_the_remote_backend_bounded_memory`],
/// started as a child process. Spawns two processes on the server at `$CLIENT_VAR`, never
/// reads their output, and waits until killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a client for other tests to run as a child process"]
async fn child_remote_client() {
    let Some(url) = std::env::var_os(CLIENT_VAR) else {
        return;
    };
    let backend = RemoteBackend::connect(url.to_str().unwrap(), None)
        .await
        .unwrap();
    let spec = spawn_spec(&["cat"]);
    let first = backend.spawn(spec.clone()).await.unwrap();
    let second = backend.spawn(spec).await.unwrap();
    println!("spawned");
    std::future::pending::<()>().await;
    drop((first, second));
}

/// A server that floods 2 x 1500 notifications (190 MiB) of 64 KiB of output: one process in order
/// (its feed waits on an output nobody reads: the inbox fills), the other from seq 2 on (seq 1
/// never comes: the early-event buffer fills). It never answers `process/read`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_server_costs_the_remote_backend_bounded_memory() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let mut child = run_child("memory::child_remote_client", CLIENT_VAR, &url);
    let pid = child.id().unwrap();
    let (tcp, _) = tokio::time::timeout(WAIT, listener.accept())
        .await
        .expect("the child did not connect")
        .unwrap();
    let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
    let mut started = Vec::new();
    while started.len() < 2 {
        let msg = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("the client sent nothing")
            .unwrap()
            .unwrap();
        let Ok(text) = msg.to_text() else { continue };
        let request: serde_json::Value = serde_json::from_str(text).unwrap();
        let result = match request["method"].as_str() {
            Some("initialize") => serde_json::json!({"sessionId": "s",
                "environmentInfo": {"shell": {"name": "sh", "path": "/bin/sh"}}}),
            Some("process/start") => {
                let id = request["params"]["processId"].as_str().unwrap().to_string();
                started.push(id.clone());
                serde_json::json!({"processId": id})
            }
            _ => continue,
        };
        let answer = serde_json::json!({"id": request["id"], "result": result});
        ws.send(Message::text(answer.to_string())).await.unwrap();
    }
    let chunk = crate::helpers::b64(&vec![b'x'; 64 * 1024]);
    let flood = |process: &str, seq: u64| {
        Message::text(format!(
            r#"{{"method":"process/output","params":{{"processId":"{process}","seq":{seq},"stream":"stdout","chunk":"{chunk}"}}}}"#
        ))
    };
    let sent = async {
        for n in 0..1500u64 {
            ws.feed(flood(&started[0], n + 1)).await?;
            ws.feed(flood(&started[1], n + 2)).await?;
        }
        ws.flush().await
    };
    tokio::time::timeout(Duration::from_secs(120), sent)
        .await
        .expect("the client stopped reading")
        .unwrap();
    // Everything sent was read by the client (it answers a ping after the flood).
    ws.send(Message::Ping(bytes::Bytes::from_static(b"after")))
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(Ok(msg)) = ws.next().await {
            if matches!(&msg, Message::Pong(p) if &p[..] == b"after") {
                return;
            }
        }
        panic!("the client went away");
    })
    .await
    .expect("no pong after the flood");
    let peak = peak_rss(pid);
    eprintln!("peak RSS of the client: {} MiB", peak >> 20);
    assert!(
        peak < 120 << 20,
        "peak RSS {} MiB after a flood of 2 x 1500 x 64 KiB",
        peak >> 20
    );
    child.kill().await.unwrap();
}
