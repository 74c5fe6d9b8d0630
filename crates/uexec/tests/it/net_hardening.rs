//! Start-up hardening (undumpable, SIGCHLD, fd limit, private log file) and the hardened
//! accept loop (header-read timeout, connection cap, EMFILE back-off).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt as _;
use std::time::{Duration, Instant};

use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::json;

use crate::helpers::{call, eventually, stdio_client, structured, text, Recorder, UEXEC};
use crate::net_support::{mcp_http, python, serve, serve_with, temp_dir, Served};

/// Python arguments that run `prelude`, then exec the command that follows them.
fn exec_after(prelude: &str) -> [String; 2] {
    [
        "-c".to_string(),
        format!("import os, resource, signal, sys; {prelude}; os.execv(sys.argv[1], sys.argv[1:])"),
    ]
}

/// `uexec mcp` over stdio, started through `program args...` (a wrapper that execs it).
async fn wrapped_mcp<S: AsRef<std::ffi::OsStr>>(
    program: &str,
    args: &[S],
) -> (crate::helpers::Client, u32, std::path::PathBuf) {
    let dir = temp_dir("wrapped");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .args([UEXEC, "mcp", "--in-process", "--codex-compat"])
        .current_dir(&dir)
        .env("HOME", &dir);
    let transport = TokioChildProcess::new(cmd).unwrap();
    let pid = transport.id().unwrap();
    let client = Recorder::default().serve(transport).await.unwrap();
    (client, pid, dir)
}

#[tokio::test]
async fn commands_cannot_read_their_servers_environment() {
    // As root the check would pass anyway (CAP_SYS_PTRACE): the server runs as nobody.
    let (client, _, dir) = wrapped_mcp(
        "runuser",
        &["-u", "nobody", "--", "env", "UEXEC_TOKEN=not-for-commands"],
    )
    .await;
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "echo ppid=$PPID; cat /proc/$PPID/environ >/dev/null 2>&1 && echo READABLE || echo DENIED", "login": false, "yield_time_ms": 5000}),
    )
    .await;
    let out = structured(&r)["output"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let ppid: u32 = out
        .lines()
        .find_map(|l| l.strip_prefix("ppid="))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no ppid: {}", text(&r)));
    let parent = std::fs::read(format!("/proc/{ppid}/cmdline")).unwrap();
    assert!(
        String::from_utf8_lossy(&parent).contains("uexec"),
        "the command's parent is uexec"
    );
    assert!(out.contains("DENIED"), "{out}");
    client.cancel().await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn an_inherited_ignored_sigchld_does_not_break_sessions() {
    let ignore_sigchld = exec_after("signal.signal(signal.SIGCHLD, signal.SIG_IGN)");
    let (client, _, dir) = wrapped_mcp(python(), &ignore_sigchld).await;
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "echo hi", "login": false, "yield_time_ms": 5000}),
    )
    .await;
    assert_eq!(structured(&r)["exit_code"], 0, "{}", text(&r));
    client.cancel().await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn the_soft_open_file_limit_is_raised_to_the_hard_one() {
    let low_soft_limit = exec_after(
        "h = resource.getrlimit(resource.RLIMIT_NOFILE)[1]; \
         resource.setrlimit(resource.RLIMIT_NOFILE, (256, h))",
    );
    let (client, pid, dir) = wrapped_mcp(python(), &low_soft_limit).await;
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let numbers: Vec<&str> = line.split_whitespace().skip(3).take(2).collect();
    assert_eq!(numbers[0], numbers[1], "{line}");
    client.cancel().await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn the_log_file_is_private() {
    let dir = temp_dir("log");
    let log = dir.join("uexec.log");
    let (client, _, _) =
        stdio_client(&["--codex-compat", "--log-file", log.to_str().unwrap()]).await;
    let mode = std::fs::metadata(&log).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{mode:o}");
    client.cancel().await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Opens `n` connections that send half a request and never finish it.
fn half_sent(addr: &str, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\n").unwrap();
            s
        })
        .collect()
}

/// Each connection is closed by the server (EOF, or a 408 then EOF) well before 10 s.
fn assert_closed_by_server(conns: Vec<TcpStream>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    for mut s in conns {
        let left = deadline.saturating_duration_since(Instant::now());
        s.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        let mut rest = Vec::new();
        let read = s.read_to_end(&mut rest);
        assert!(
            read.is_ok()
                || read
                    .as_ref()
                    .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
            "a half-sent request was still held open: {read:?}"
        );
    }
}

fn status(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // A server that refused the connection may have closed it already: read what it said.
    let _ = write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    );
    let mut response = String::new();
    let _ = s.read_to_string(&mut response);
    response
        .split_whitespace()
        .nth(1)
        .unwrap_or("closed")
        .to_owned()
}

#[test]
fn half_sent_requests_are_closed_after_the_header_read_timeout() {
    let server = serve(&["--header-read-timeout-ms", "300"]);
    assert_closed_by_server(half_sent(&server.addr, 50));
    assert_eq!(status(&server.addr, "/readyz"), "200");

    let server = mcp_http(&["--http", "127.0.0.1:0", "--header-read-timeout-ms", "300"]);
    assert_closed_by_server(half_sent(&server.addr, 50));
}

#[tokio::test]
async fn connections_beyond_the_cap_are_refused() {
    let server = serve(&[
        "--max-connections",
        "2",
        "--header-read-timeout-ms",
        "60000",
    ]);
    let mut held = half_sent(&server.addr, 2);
    // Beyond the cap the answer comes at once, before any request (sending one could race
    // with the close and turn it into a reset).
    let mut third = TcpStream::connect(&server.addr).unwrap();
    third
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut response = String::new();
    third.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 503 "), "{response:?}");
    held.pop();
    eventually(
        "a freed slot to serve again",
        Duration::from_secs(10),
        || status(&server.addr, "/readyz") == "200",
    )
    .await;
}

/// CPU time (user + system, in clock ticks) of a process.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

#[tokio::test]
async fn running_out_of_fds_is_logged_and_backed_off_not_spun_on() {
    // A hard limit of 48 fds: 80 held connections exhaust it.
    let mut wrapper = std::process::Command::new(python());
    wrapper.env("UEXEC_LOG", "warn").args(exec_after(
        "resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48))",
    ));
    let server: Served = serve_with(
        wrapper,
        &[
            "--max-connections",
            "1000",
            "--header-read-timeout-ms",
            "60000",
        ],
    );
    let held = half_sent(&server.addr, 80);
    eventually(
        "the EMFILE error in the log",
        Duration::from_secs(10),
        || {
            server
                .stderr
                .lock()
                .unwrap()
                .contains("cannot accept a connection")
        },
    )
    .await;
    let pid = server.child.id();
    let before = cpu_ticks(pid);
    // A measurement window, not a synchronisation: a spinning accept loop burns it all.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let spent = cpu_ticks(pid) - before;
    assert!(spent < 30, "{spent} ticks of CPU in 1 s while out of fds");
    drop(held);
    eventually("the server to serve again", Duration::from_secs(10), || {
        status(&server.addr, "/readyz") == "200"
    })
    .await;
    // Said once for the whole spell (not at every retry), and its end said too.
    eventually(
        "the end of the spell in the log",
        Duration::from_secs(10),
        || {
            server
                .stderr
                .lock()
                .unwrap()
                .contains("accepting connections on")
        },
    )
    .await;
    let log = server.stderr.lock().unwrap().clone();
    assert_eq!(
        log.matches("cannot accept a connection").count(),
        1,
        "{log}"
    );
}
