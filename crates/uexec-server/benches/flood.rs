//! Exec-server flood throughput with a Rust client (not a test): the same 256 MiB stream
//! (`head -c 268435456 /dev/zero | tr '\0' a`) read directly from a pipe, then streamed as
//! `process/output` notifications by `uexec serve` and, when `UEXEC_CODEX_BIN` is set, by
//! `codex exec-server`, all in one run. The client only measures base64 lengths, so it costs
//! little next to the servers.
//!
//! A *floor* row bounds what any server of this wire can spend: one thread of this process
//! does only the work no server can skip (read the pipe, base64-encode the bytes, send them
//! over loopback TCP, which also charges the receiver's softirq work to the sender, as it does
//! to the servers) and its CPU per MiB is printed beside theirs.
//!
//! Run: `cargo build --release -p uexec && cargo bench -p uexec-server --bench flood`
//! (`UEXEC_BIN` picks the uexec binary, default `target/release/uexec`; `FLOOD_ROUNDS`, default
//! 5, the interleaved rounds whose medians are printed).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Instant;

use futures::{SinkExt, StreamExt};
use tokio::io::AsyncReadExt;
use tokio_tungstenite::tungstenite::Message;

const FLOOD_BYTES: u64 = 256 << 20;

fn script() -> String {
    format!("head -c {FLOOD_BYTES} /dev/zero | tr '\\0' a")
}

/// The flood as a command whose stdout is ours to read.
fn flood_command() -> Command {
    let mut command = Command::new("/bin/sh");
    command.args(["-c", &script()]).stdout(Stdio::piped());
    command
}

/// Direct pipe: the flood read by this process from the shell's stdout.
async fn direct_pipe() -> f64 {
    let t = Instant::now();
    let mut child = tokio::process::Command::from(flood_command())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = out.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    child.wait().await.unwrap();
    assert_eq!(total, FLOOD_BYTES);
    FLOOD_BYTES as f64 / t.elapsed().as_secs_f64()
}

/// The floor: the flood read from its pipe, base64-encoded and sent over loopback TCP to a
/// draining thread, by one thread, with nothing else (no JSON, no WebSocket, no runtime).
fn floor() -> Streamed {
    use std::io::{Read, Write};
    use uexec_protocol::chunk::ByteChunk;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let drain = std::thread::spawn(move || {
        let (mut socket, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 256 * 1024];
        let mut total = 0u64;
        loop {
            let n = socket.read(&mut buf).unwrap();
            if n == 0 {
                return total;
            }
            total += n as u64;
        }
    });
    let mut socket = std::net::TcpStream::connect(addr).unwrap();
    let mut child = flood_command().spawn().unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let (mut sent, mut read) = (0u64, 0u64);
    let cpu_before = thread_cpu_seconds();
    let t = Instant::now();
    loop {
        let n = out.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        read += n as u64;
        let b64 = ByteChunk::from(buf[..n].to_vec()).to_base64();
        socket.write_all(b64.as_bytes()).unwrap();
        sent += b64.len() as u64;
    }
    drop(socket);
    let rate = FLOOD_BYTES as f64 / t.elapsed().as_secs_f64();
    let cpu_after = thread_cpu_seconds();
    child.wait().unwrap();
    assert_eq!(read, FLOOD_BYTES);
    assert_eq!(drain.join().unwrap(), sent);
    let per_mib = |before: f64, after: f64| (after - before) * 1e3 / (FLOOD_BYTES >> 20) as f64;
    Streamed {
        rate,
        user_ms_per_mib: per_mib(cpu_before.0, cpu_after.0),
        sys_ms_per_mib: per_mib(cpu_before.1, cpu_after.1),
    }
}

fn decoded_len(b64: &str) -> u64 {
    let pad = b64.bytes().rev().take_while(|b| *b == b'=').count() as u64;
    (b64.len() as u64 / 4) * 3 - pad
}

/// CPU time (user, system) so far, in seconds, of the task whose `stat` file is `path`
/// (`/proc/PID/stat` for a process, `/proc/thread-self/stat` for the calling thread).
fn cpu_seconds_at(path: &str) -> (f64, f64) {
    let stat = std::fs::read_to_string(path).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(") ")
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    // utime and stime: fields 14 and 15 of stat (11 and 12 after the command name).
    let tick = |i: usize| fields[i].parse::<u64>().unwrap() as f64 / 100.0;
    (tick(11), tick(12))
}

fn cpu_seconds(pid: u32) -> (f64, f64) {
    cpu_seconds_at(&format!("/proc/{pid}/stat"))
}

fn thread_cpu_seconds() -> (f64, f64) {
    cpu_seconds_at("/proc/thread-self/stat")
}

/// One streamed flood: its rate and the server's CPU per MiB (user, system; ms).
struct Streamed {
    rate: f64,
    user_ms_per_mib: f64,
    sys_ms_per_mib: f64,
}

/// Starts `argv` (which prints its ws:// URL first), streams the flood through it.
async fn through_server(argv: &[String], home: &std::path::Path) -> Streamed {
    let mut server = Command::new(&argv[0])
        .args(&argv[1..])
        .env("HOME", home)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut url = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let (mut ws, _) = tokio_tungstenite::connect_async(url.trim()).await.unwrap();
    let call = |id: u64, method: &str, params: serde_json::Value| {
        Message::text(serde_json::json!({"id": id, "method": method, "params": params}).to_string())
    };
    ws.send(call(
        1,
        "initialize",
        serde_json::json!({"clientName": "uexec-flood-bench"}),
    ))
    .await
    .unwrap();
    while let Some(msg) = ws.next().await {
        if msg.unwrap().to_text().unwrap_or("").contains("\"id\":1") {
            break;
        }
    }
    ws.send(Message::text(r#"{"method":"initialized","params":{}}"#))
        .await
        .unwrap();
    let params = serde_json::json!({
        "processId": "flood",
        "argv": ["/bin/sh", "-c", script()],
        "cwd": format!("file://{}", std::env::temp_dir().display()),
        "env": {"PATH": std::env::var("PATH").unwrap_or_default()},
        "tty": false,
    });
    let cpu_before = cpu_seconds(server.id());
    let t = Instant::now();
    ws.send(call(2, "process/start", params)).await.unwrap();
    let mut total = 0u64;
    while let Some(msg) = ws.next().await {
        let msg = msg.unwrap();
        let text = match &msg {
            Message::Text(t) => t.as_str(),
            Message::Binary(b) => std::str::from_utf8(b).unwrap(),
            _ => continue,
        };
        if text.contains("\"process/output\"") {
            let start = text.find("\"chunk\":\"").unwrap() + 9;
            let end = start + text[start..].find('"').unwrap();
            total += decoded_len(&text[start..end]);
        } else if text.contains("\"process/closed\"") {
            break;
        }
    }
    let rate = FLOOD_BYTES as f64 / t.elapsed().as_secs_f64();
    let cpu_after = cpu_seconds(server.id());
    let per_mib = |before: f64, after: f64| (after - before) * 1e3 / (FLOOD_BYTES >> 20) as f64;
    assert_eq!(total, FLOOD_BYTES, "{}: bytes delivered", argv[0]);
    let _ = server.kill();
    let _ = server.wait();
    Streamed {
        rate,
        user_ms_per_mib: per_mib(cpu_before.0, cpu_after.0),
        sys_ms_per_mib: per_mib(cpu_before.1, cpu_after.1),
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

#[tokio::main]
async fn main() {
    let home = std::env::temp_dir().join(format!("uexec-flood-home-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    let mib = |r: f64| r / f64::from(1 << 20);
    let uexec = std::env::var("UEXEC_BIN").unwrap_or_else(|_| "../../target/release/uexec".into());
    let rounds: usize = std::env::var("FLOOD_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5)
        .max(1);
    let listen = ["--listen".to_string(), "ws://127.0.0.1:0".to_string()];
    let mut servers = vec![(
        "uexec serve, process/output notifications".to_string(),
        [vec![uexec, "serve".into()], listen.to_vec()].concat(),
    )];
    if let Ok(codex) = std::env::var("UEXEC_CODEX_BIN") {
        servers.push((
            "codex exec-server 0.171.0, same".to_string(),
            [vec![codex, "exec-server".into()], listen.to_vec()].concat(),
        ));
    }
    // Interleaved rounds, so that the machine's moods fall on every row alike; each ratio is
    // against the direct read of its own round.
    let mut direct = Vec::new();
    let mut rows: Vec<Vec<(Streamed, f64)>> = servers.iter().map(|_| Vec::new()).collect();
    let mut floors = Vec::new();
    for _ in 0..rounds {
        let base = direct_pipe().await;
        direct.push(base);
        let bound = tokio::task::spawn_blocking(floor).await.unwrap();
        let ratio = bound.rate / base;
        floors.push((bound, ratio));
        for (row, (_, argv)) in rows.iter_mut().zip(&servers) {
            let streamed = through_server(argv, &home).await;
            let ratio = streamed.rate / base;
            row.push((streamed, ratio));
        }
    }
    println!("{rounds} rounds, medians:\n");
    println!(
        "| 256 MiB flood, Rust client | MiB/s | x direct pipe | server CPU ms/MiB (user + sys) |"
    );
    println!("|---|---|---|---|");
    println!(
        "| direct pipe read of the same stream | {:.0} | 1.00 | |",
        mib(median(direct))
    );
    let named_floor = "floor: read + base64 + loopback TCP send, one thread".to_string();
    for (row, name) in std::iter::once((&floors, &named_floor))
        .chain(rows.iter().zip(servers.iter().map(|(name, _)| name)))
    {
        let user = median(row.iter().map(|(s, _)| s.user_ms_per_mib).collect());
        let sys = median(row.iter().map(|(s, _)| s.sys_ms_per_mib).collect());
        let total = median(
            row.iter()
                .map(|(s, _)| s.user_ms_per_mib + s.sys_ms_per_mib)
                .collect(),
        );
        println!(
            "| {name} | {:.0} | {:.2} | {total:.2} ({user:.2} + {sys:.2}) |",
            mib(median(row.iter().map(|(s, _)| s.rate).collect())),
            median(row.iter().map(|(_, r)| *r).collect()),
        );
    }
    let _ = std::fs::remove_dir_all(&home);
}
