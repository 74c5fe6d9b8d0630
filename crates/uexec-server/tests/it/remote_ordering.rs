//! The remote backend's contract with a server that sends a process's events out of seq
//! order and leaves gaps (what Codex and a reconnect can do): a scripted exec server on
//! 127.0.0.1 plays those cases, and the backend must still deliver output in seq order, the
//! exit once, and close the output last, filling gaps with `process/read {afterSeq}`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use uexec_client::{ClientConfig, RemoteBackend};
use uexec_core::backend::{Backend, EnvMode, ExitReport, Program, SpawnSpec, SpawnedProcess};

use crate::helpers::{b64, WAIT};

/// What the scripted server does after answering `process/start`.
#[derive(Clone)]
struct Script {
    /// Notifications sent right after the start answer, in this order.
    notifications: Vec<Value>,
    /// The answer to every `process/read`.
    read: Value,
}

struct ScriptedServer {
    addr: SocketAddr,
    /// Params of the `process/read` requests received.
    reads: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ScriptedServer {
    async fn start(script: Script) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let reads: Arc<Mutex<Vec<Value>>> = Arc::default();
        let task = tokio::spawn({
            let reads = reads.clone();
            async move {
                let (tcp, _) = listener.accept().await.unwrap();
                let ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
                serve(ws, script, reads).await;
            }
        });
        Self { addr, reads, task }
    }

    fn url(&self) -> String {
        format!("ws://{}", self.addr)
    }
}

async fn serve(
    ws: tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
    script: Script,
    reads: Arc<Mutex<Vec<Value>>>,
) {
    let (mut tx, mut rx) = ws.split();
    while let Some(Ok(msg)) = rx.next().await {
        let Message::Text(text) = msg else { continue };
        let request: Value = serde_json::from_str(text.as_str()).unwrap();
        let Some(id) = request.get("id").cloned() else {
            continue; // `initialized`
        };
        let result = match request["method"].as_str().unwrap() {
            "initialize" => json!({
                "sessionId": "scripted",
                "environmentInfo": {"shell": {"name": "sh", "path": "/bin/sh"}, "cwd": "file:///tmp"}
            }),
            "process/start" => json!({"processId": request["params"]["processId"]}),
            "process/read" => {
                reads.lock().unwrap().push(request["params"].clone());
                script.read.clone()
            }
            _ => json!({}),
        };
        let answer = json!({"id": id, "result": result}).to_string();
        tx.send(Message::Text(answer.into())).await.unwrap();
        if request["method"] == "process/start" {
            let pid = request["params"]["processId"].as_str().unwrap();
            for mut note in script.notifications.clone() {
                note["params"]["processId"] = json!(pid);
                tx.send(Message::Text(note.to_string().into()))
                    .await
                    .unwrap();
            }
        }
    }
}

fn output(seq: u64, text: &str) -> Value {
    json!({"method": "process/output",
           "params": {"seq": seq, "stream": "stdout", "chunk": b64(text.as_bytes())}})
}

fn exited(seq: u64, code: i32) -> Value {
    json!({"method": "process/exited", "params": {"seq": seq, "exitCode": code}})
}

fn closed(seq: u64) -> Value {
    json!({"method": "process/closed", "params": {"seq": seq}})
}

fn read_result(chunks: &[(u64, &str)], next_seq: u64, exited: bool, closed: bool) -> Value {
    let chunks: Vec<Value> = chunks
        .iter()
        .map(|(seq, text)| json!({"seq": seq, "stream": "stdout", "chunk": b64(text.as_bytes())}))
        .collect();
    json!({"chunks": chunks, "nextSeq": next_seq, "exited": exited,
           "exitCode": if exited { json!(0) } else { Value::Null },
           "closed": closed, "failure": null})
}

async fn spawn(url: &str, config: ClientConfig) -> (Arc<RemoteBackend>, SpawnedProcess) {
    let backend = RemoteBackend::connect_with(url, None, config)
        .await
        .unwrap();
    let spec = SpawnSpec {
        program: Program::Argv {
            argv: vec!["scripted".into()],
        },
        arg0: None,
        cwd: PathBuf::from("/tmp"),
        env: Default::default(),
        env_mode: EnvMode::Exact,
        tty: false,
        pipe_stdin: false,
        one_stream: false,
        passed_fd: None,
        launcher: None,
        limits: Default::default(),
    };
    let process = backend.spawn(spec).await.unwrap();
    (backend, process)
}

/// Everything the output channel carries until it closes, and the exit.
async fn drain(process: SpawnedProcess) -> (String, ExitReport) {
    let SpawnedProcess {
        mut output, exit, ..
    } = process;
    let collect = async {
        let mut out = Vec::new();
        while let Some(chunk) = output.recv().await {
            out.extend_from_slice(&chunk.bytes);
        }
        String::from_utf8(out).unwrap()
    };
    let out = tokio::time::timeout(WAIT, collect)
        .await
        .expect("the output channel did not close");
    let report = tokio::time::timeout(WAIT, exit).await.unwrap().unwrap();
    (out, report)
}

fn quick() -> ClientConfig {
    ClientConfig {
        gap_fill_delay: Duration::from_millis(50),
        ..ClientConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exit_with_a_lower_seq_than_trailing_output_is_not_the_end() {
    let server = ScriptedServer::start(Script {
        notifications: vec![output(1, "a"), exited(2, 0), output(3, "b"), closed(4)],
        read: read_result(&[], 5, true, true),
    })
    .await;
    let (_backend, process) = spawn(&server.url(), quick()).await;
    let (out, report) = drain(process).await;
    assert_eq!(out, "ab");
    assert_eq!(report.exit_code, Some(0));
    assert!(server.reads.lock().unwrap().is_empty(), "no gap, no read");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_out_of_order_are_delivered_in_seq_order_and_a_gap_is_read() {
    // Seq 4 never comes as a notification: only `process/read` has it.
    let server = ScriptedServer::start(Script {
        notifications: vec![output(3, "b"), output(1, "a"), exited(2, 0), closed(5)],
        read: read_result(&[(4, "c")], 6, true, true),
    })
    .await;
    let (_backend, process) = spawn(&server.url(), quick()).await;
    let (out, report) = drain(process).await;
    assert_eq!(out, "abc");
    assert_eq!(report.exit_code, Some(0));
    assert_eq!(report.failure, None);
    let reads = server.reads.lock().unwrap().clone();
    assert_eq!(reads.len(), 1, "{reads:?}");
    assert_eq!(reads[0]["afterSeq"], 3, "read after the last delivered seq");
    assert!(reads[0].get("waitMs").is_none(), "never a long poll");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_reorder_buffer_is_filled_at_once() {
    // Seq 1 is missing and the grace before a gap read is an hour: only the bound of four
    // early events can trigger the read.
    let server = ScriptedServer::start(Script {
        notifications: vec![
            output(2, "2"),
            output(3, "3"),
            output(4, "4"),
            output(5, "5"),
            output(6, "6"),
            exited(7, 0),
            closed(8),
        ],
        // What a server retains: the buffer holds 2..=5 and drops what comes after.
        read: read_result(
            &[(1, "1"), (2, "2"), (3, "3"), (4, "4"), (5, "5"), (6, "6")],
            9,
            true,
            true,
        ),
    })
    .await;
    let config = ClientConfig {
        max_early_events: 4,
        gap_fill_delay: Duration::from_secs(3600),
        ..ClientConfig::default()
    };
    let (_backend, process) = spawn(&server.url(), config).await;
    let (out, report) = drain(process).await;
    assert_eq!(out, "123456", "each seq once, in order");
    assert_eq!(report.exit_code, Some(0));
    assert_eq!(server.reads.lock().unwrap()[0]["afterSeq"], 0);
}
