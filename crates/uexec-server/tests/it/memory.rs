//! What one hostile frame costs the server in memory. The server runs in a child process (this
//! test binary again, running [`child_exec_server`]), so its peak RSS (`VmHWM`) is its own.

use std::process::Stdio;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::Message;
use uexec_server::config::{MAX_FRAME_BYTES, MAX_MESSAGE_BYTES};

use crate::helpers::{TestServer, WAIT};

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
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "memory::child_exec_server",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_VAR, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
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
