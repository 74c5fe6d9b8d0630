//! A client that reads slowly, with a progress token and a resource subscription: the server
//! coalesces what it has to tell instead of queueing every output delta, so its memory stays
//! bounded whatever the output size, and the tool result does not wait behind a backlog.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{eventually, marker, procs_with, rand_suffix, UEXEC};

/// Output of the command: far more than the memory the server may use.
const OUTPUT_BYTES: u64 = 100_000_000;
/// The server's peak RSS must stay under this.
const MAX_SERVER_HWM_KIB: u64 = 64 * 1024;

/// A `/proc/PID/status` field in KiB (`VmHWM`: peak RSS, `VmRSS`: now); 0 once it is gone.
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A `uexec mcp` spoken to in raw JSON lines (so the test decides when, and whether, to read
/// its stdout), after the handshake.
struct RawServer {
    dir: std::path::PathBuf,
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl RawServer {
    fn start(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("uexec-it-{name}-{}", rand_suffix()));
        std::fs::create_dir_all(dir.join("home")).unwrap();
        let mut child = Command::new(UEXEC)
            .args(["mcp", "--in-process", "--codex-compat"])
            .current_dir(&dir)
            .env("HOME", dir.join("home"))
            .env("UEXEC_DETERMINISTIC_IDS", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut server = Self {
            dir,
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
        };
        server.send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": name, "version": "0"}}}),
        );
        let line = server.read_line();
        assert!(line.contains("\"id\":1"), "{line}");
        server.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send(&mut self, v: Value) {
        writeln!(self.stdin, "{v}").unwrap();
    }

    fn read_line(&mut self) -> String {
        let mut line = String::new();
        assert_ne!(
            self.stdout.read_line(&mut line).unwrap(),
            0,
            "server closed stdout"
        );
        line
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        // The floods' transcripts are hundreds of MB: gone with the test, unless it failed.
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

#[tokio::test]
async fn a_slow_client_costs_bounded_memory_and_gets_its_result() {
    let mut server = RawServer::start("slow-reader");
    // The second command's session will be 1001: the watcher has to tell its start while
    // the client is not reading.
    server.send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "resources/subscribe",
        "params": {"uri": "uexec://sessions/1001"}}),
    );
    let line = server.read_line();
    assert!(line.contains("\"id\":3"), "{line}");
    let m = marker();
    // The command waits at a FIFO between its two floods until the second call is sent (a
    // gate, not a sleep: a test thread starved of CPU cannot miss it).
    let gate = server.dir.join(format!("gate-{}", rand_suffix()));
    assert!(Command::new("mkfifo")
        .arg(&gate)
        .status()
        .unwrap()
        .success());
    let gate = gate.display().to_string();
    server.send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "exec_command",
        "arguments": {
            "cmd": format!("head -c 1000000 /dev/zero | tr '\\0' y; cat {gate} >/dev/null; head -c {OUTPUT_BYTES} /dev/zero | tr '\\0' x; : {m}"),
            "login": false,
            "yield_time_ms": 30_000
        },
        "_meta": {"progressToken": "slow"}}}),
    );

    // The client reads nothing from now on: the first megabyte of progress fills its pipe.
    eventually(
        "the command to wait at its gate",
        Duration::from_secs(30),
        || !procs_with(&format!("cat {gate}")).is_empty(),
    )
    .await;
    server.send(
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
        "name": "exec_command",
        "arguments": {"cmd": "true", "login": false}}}),
    );
    std::fs::write(&gate, b"").unwrap(); // EOF: the command goes on
    eventually("the command to finish", Duration::from_secs(120), || {
        procs_with(&m).is_empty()
    })
    .await;
    let hwm = status_kib(server.child.id(), "VmHWM");
    assert!(hwm > 0, "no VmHWM for the server");

    let mut progress = 0usize;
    let result = loop {
        let message: Value = serde_json::from_str(&server.read_line()).unwrap();
        if message["method"] == "notifications/progress" {
            progress += 1;
            assert_eq!(message["params"]["progressToken"], "slow");
        } else if message["id"] == 2 {
            break message;
        }
    };
    assert_eq!(
        result["result"]["structuredContent"]["exit_code"], 0,
        "{result}"
    );
    assert!(
        hwm < MAX_SERVER_HWM_KIB,
        "the server's peak RSS was {hwm} KiB for {OUTPUT_BYTES} bytes of output"
    );
    // 100 MB is over 12,000 deltas: the backlog was coalesced, not queued.
    assert!(
        progress < 100,
        "{progress} progress notifications before the result"
    );
    drop(server);
}

/// A command that never stops printing: the call still returns when its window ends, with
/// progress on the way, instead of forwarding output for as long as it comes.
#[tokio::test]
async fn an_endless_flood_does_not_hold_the_result() {
    use crate::helpers::{call, stdio_client, structured};

    let (client, recorder, _) = stdio_client(&["--codex-compat"]).await;
    let result = tokio::time::timeout(
        Duration::from_secs(20),
        call(
            &client,
            "exec_command",
            json!({"cmd": "yes", "login": false, "yield_time_ms": 250}),
        ),
    )
    .await
    .expect("the result comes when the window ends");
    let id = structured(&result)["session_id"].as_i64().expect("running");
    assert!(!recorder.progress.lock().unwrap().is_empty());
    call(&client, "terminate_session", json!({"session_id": id})).await;
    client.cancel().await.unwrap();
}

/// The window of a call with a progress token ends while the command goes on printing and the
/// client reads nothing: the forwarder that waits to send its last notification must not keep
/// collecting the flood meanwhile.
#[tokio::test]
async fn a_flood_that_outlives_the_window_to_a_client_that_never_reads_costs_bounded_memory() {
    let mut server = RawServer::start("never-reads");
    let m = marker();
    server.send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "exec_command",
        "arguments": {"cmd": format!("yes {m}"), "login": false, "yield_time_ms": 1000},
        "_meta": {"progressToken": "flood"}}}),
    );
    // From here on the client reads nothing. Watch the server well past the window's end.
    eventually("the flood to start", Duration::from_secs(10), || {
        !procs_with(&m).is_empty()
    })
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(4);
    let mut peak = 0;
    while std::time::Instant::now() < deadline && peak < 8 * MAX_SERVER_HWM_KIB {
        peak = peak.max(status_kib(server.child.id(), "VmRSS"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = server.child.kill();
    let _ = server.child.wait();
    assert!(peak > 0, "no VmRSS for the server");
    assert!(
        peak < MAX_SERVER_HWM_KIB,
        "the server's RSS reached {peak} KiB after the window ended"
    );
}
