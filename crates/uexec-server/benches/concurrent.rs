//! Many sessions at once (not a test): N commands of `true` started together through one
//! `uexec mcp` (stdio, `exec_command` with `login: false`) and through one `uexec serve`
//! (WebSocket, `process/start` of `[bash, -c, true]` until every `process/closed`),
//! against, in the same run, the same spawns made directly with tokio and the in-process
//! limit: N `exec_command`s at once through the engine in this process (a `SessionStore`,
//! no transport). Each figure is the median wall time of `UEXEC_BENCH_ROUNDS` (default 15)
//! rounds, every round starting all commands at once, the five interleaved (the order
//! turning each round). Goals: 64 at once at most 1.3x direct (issue 11); 16 at once at
//! most 1.25x the in-process limit on both faces (S5, issue 41). Each face is also held
//! against the engine doing the same work as the face does by default: `uexec mcp` keeps
//! every session's transcript on disk (a directory and three files each, on the machine's
//! disk), `uexec serve` keeps none; so the engine runs once more with transcripts kept, and
//! the last column divides each face by its own like (what the transport and the door cost).
//!
//! Run: `cargo build --release -p uexec && cargo bench -p uexec-server --bench concurrent`
//! (`UEXEC_BIN` picks the uexec binary, default `target/release/uexec`; `UEXEC_CONCURRENT`
//! the numbers of commands, default `16,64`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

async fn direct(n: usize) -> Duration {
    let t = Instant::now();
    let waits: Vec<_> = (0..n)
        .map(|_| {
            let mut child = tokio::process::Command::new("/bin/bash")
                .args(["-c", "true"])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            tokio::spawn(async move { child.wait().await.unwrap() })
        })
        .collect();
    for w in waits {
        assert!(w.await.unwrap().success());
    }
    t.elapsed()
}

/// `n` `exec_command`s of `true` at once through the engine in this process.
async fn in_process(store: &Arc<uexec_core::SessionStore>, n: usize) -> Duration {
    let t = Instant::now();
    let calls: Vec<_> = (0..n)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                let request = uexec_core::ExecRequest {
                    cmd: "true".into(),
                    login: Some(false),
                    shell: Some("/bin/bash".into()),
                    ..uexec_core::ExecRequest::default()
                };
                store.exec_command(request).await.unwrap()
            })
        })
        .collect();
    for call in calls {
        assert_eq!(call.await.unwrap().exit_code(), Some(0));
    }
    t.elapsed()
}

struct Mcp {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    next_id: u64,
}

impl Mcp {
    async fn start(uexec: &str, home: &std::path::Path) -> Self {
        let mut child = tokio::process::Command::new(uexec)
            .args([
                "mcp",
                "--in-process",
                "--codex-compat",
                "--shell",
                "/bin/bash",
            ])
            .env("HOME", home)
            .current_dir(home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let mut mcp = Self {
            child,
            stdin,
            lines,
            next_id: 0,
        };
        mcp.send(
            serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "concurrent-bench", "version": "0"}}}),
        )
        .await;
        mcp.answers(1).await;
        mcp.send(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        mcp
    }

    async fn send(&mut self, msg: serde_json::Value) {
        let mut line = msg.to_string().into_bytes();
        line.push(b'\n');
        self.stdin.write_all(&line).await.unwrap();
    }

    async fn answers(&mut self, mut n: usize) {
        while n > 0 {
            let line = self.lines.next_line().await.unwrap().unwrap();
            let msg: serde_json::Value = serde_json::from_str(&line).unwrap();
            if msg.get("id").is_some() {
                assert!(msg.get("error").is_none(), "{msg}");
                assert_ne!(msg["result"]["isError"], true, "{msg}");
                n -= 1;
            }
        }
    }

    async fn round(&mut self, n: usize) -> Duration {
        let t = Instant::now();
        let mut batch = Vec::new();
        for _ in 0..n {
            self.next_id += 1;
            let msg = serde_json::json!({"jsonrpc": "2.0", "id": self.next_id,
                "method": "tools/call", "params": {"name": "exec_command",
                "arguments": {"cmd": "true", "login": false}}});
            batch.extend_from_slice(msg.to_string().as_bytes());
            batch.push(b'\n');
        }
        self.stdin.write_all(&batch).await.unwrap();
        self.answers(n).await;
        t.elapsed()
    }
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn serve_connect(uexec: &str, home: &std::path::Path) -> (std::process::Child, Ws) {
    let mut server = std::process::Command::new(uexec)
        .args(["serve", "--listen", "ws://127.0.0.1:0"])
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
    let init = serde_json::json!({"id": 0, "method": "initialize",
        "params": {"clientName": "concurrent-bench"}});
    ws.send(Message::text(init.to_string())).await.unwrap();
    while let Some(msg) = ws.next().await {
        if msg.unwrap().to_text().unwrap_or("").contains("\"id\":0") {
            break;
        }
    }
    ws.send(Message::text(r#"{"method":"initialized","params":{}}"#))
        .await
        .unwrap();
    (server, ws)
}

async fn serve_round(ws: &mut Ws, round: usize, n: usize) -> Duration {
    let t = Instant::now();
    for i in 0..n {
        let params = serde_json::json!({
            "processId": format!("r{round}-{i}"),
            "argv": ["/bin/bash", "-c", "true"],
            "cwd": format!("file://{}", std::env::temp_dir().display()),
            "env": {"PATH": "/usr/bin:/bin"},
            "tty": false,
        });
        let msg = serde_json::json!({"id": round * n + i + 1, "method": "process/start",
            "params": params});
        ws.feed(Message::text(msg.to_string())).await.unwrap();
    }
    ws.flush().await.unwrap();
    let mut closed = 0;
    while closed < n {
        let msg = ws.next().await.unwrap().unwrap();
        if msg.to_text().unwrap_or("").contains("\"process/closed\"") {
            closed += 1;
        }
    }
    t.elapsed()
}

/// The four ways of running `n` commands at once, timed by the round.
#[derive(Default)]
struct Rows {
    direct: Vec<Duration>,
    engine: Vec<Duration>,
    kept: Vec<Duration>,
    mcp: Vec<Duration>,
    serve: Vec<Duration>,
}

#[tokio::main]
async fn main() {
    let sizes: Vec<usize> = std::env::var("UEXEC_CONCURRENT")
        .unwrap_or_else(|_| "16,64".into())
        .split(',')
        .map(|n| {
            n.trim()
                .parse()
                .expect("UEXEC_CONCURRENT: numbers, comma-separated")
        })
        .collect();
    let rounds: usize = std::env::var("UEXEC_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    let uexec = std::env::var("UEXEC_BIN").unwrap_or_else(|_| "../../target/release/uexec".into());
    let home = std::env::temp_dir().join(format!("uexec-concurrent-home-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();

    let store = uexec_core::SessionStore::new(
        Arc::new(uexec_core::LocalBackend),
        uexec_core::StoreConfig::default(),
    );
    // The engine as `uexec mcp` runs it by default: transcripts kept, in the same place
    // (`~/.local/state/uexec/sessions` of this bench's HOME).
    let kept = uexec_core::SessionStore::new(
        Arc::new(uexec_core::LocalBackend),
        uexec_core::StoreConfig {
            transcripts: Some(uexec_core::transcript::TranscriptConfig::at(
                home.join(".local/state/uexec/engine-sessions"),
            )),
            ..uexec_core::StoreConfig::default()
        },
    );
    let mut mcp = Mcp::start(&uexec, &home).await;
    let (mut server, mut ws) = serve_connect(&uexec, &home).await;
    let mut serve_rounds = 0;
    let mut rows: Vec<Rows> = sizes.iter().map(|_| Rows::default()).collect();
    // A warm-up round, then the timed ones, interleaved so background load hits every row
    // alike.
    for r in 0..=rounds {
        for (&n, row) in sizes.iter().zip(&mut rows) {
            for k in 0..5 {
                let took = match (r + k) % 5 {
                    0 => ("direct", direct(n).await),
                    1 => ("engine", in_process(&store, n).await),
                    4 => ("kept", in_process(&kept, n).await),
                    2 => ("mcp", mcp.round(n).await),
                    _ => {
                        serve_rounds += 1;
                        ("serve", serve_round(&mut ws, serve_rounds, n).await)
                    }
                };
                if r == 0 {
                    continue;
                }
                match took {
                    ("direct", t) => row.direct.push(t),
                    ("engine", t) => row.engine.push(t),
                    ("kept", t) => row.kept.push(t),
                    ("mcp", t) => row.mcp.push(t),
                    (_, t) => row.serve.push(t),
                }
            }
        }
    }
    let ms = |x: Duration| x.as_secs_f64() * 1e3;
    for (n, row) in sizes.iter().zip(rows) {
        let [d, e, k, m, s] = [row.direct, row.engine, row.kept, row.mcp, row.serve].map(median);
        println!(
            "| {n} concurrent `true` (median of {rounds} rounds) | ms | x direct tokio | x in-process | x the engine as the face runs it |"
        );
        println!("|---|---:|---:|---:|---:|");
        println!(
            "| direct tokio spawn+wait of `bash -c true` | {:.1} | 1.00 | {:.2} | |",
            ms(d),
            ms(d) / ms(e)
        );
        println!(
            "| the engine in this process, exec_command login:false (the in-process limit) | {:.1} | {:.2} | 1.00 | |",
            ms(e),
            ms(e) / ms(d)
        );
        println!(
            "| the same, every transcript kept (as `uexec mcp` by default) | {:.1} | {:.2} | {:.2} | |",
            ms(k),
            ms(k) / ms(d),
            ms(k) / ms(e)
        );
        println!(
            "| one `uexec mcp`, exec_command login:false | {:.1} | {:.2} | {:.2} | {:.2} (transcripts kept) |",
            ms(m),
            ms(m) / ms(d),
            ms(m) / ms(e),
            ms(m) / ms(k)
        );
        println!(
            "| one `uexec serve`, process/start to process/closed | {:.1} | {:.2} | {:.2} | {:.2} (none kept) |",
            ms(s),
            ms(s) / ms(d),
            ms(s) / ms(e),
            ms(s) / ms(e)
        );
        println!();
    }
    drop(mcp.stdin);
    let _ = mcp.child.wait().await;
    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_dir_all(&home);
}
