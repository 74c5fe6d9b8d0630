//! A client that goes away in the middle of a call loses nothing: the call is cancelled as
//! an explicit `notifications/cancelled` would cancel it, so the output it would have
//! drained, and the exit it would have reported, wait for the next call. Through the
//! daemon (the client process killed) and over HTTP (the request's connection dropped:
//! `curl` killed mid-poll), in-process and through the daemon.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::{json, Value};

use crate::helpers::{call, eventually, structured, text, Recorder, UEXEC};
use crate::place::DaemonPlace as Place;

/// 80 numbered lines over about 4 s, then exit 7.
const SLOW_LINES: &str = "for i in $(seq 1 80); do echo line$i; sleep 0.05; done; exit 7";

/// Every `lineN` in `out`, in order.
fn lines_in(out: &str) -> Vec<u32> {
    out.lines()
        .filter_map(|l| l.trim().strip_prefix("line")?.parse().ok())
        .collect()
}

/// Whether the session's transcript (`uexec logs`) has reached `lineN`.
fn printed(place: &Place, id: i64, n: u32) -> bool {
    let out = place.command(&["logs", &id.to_string()]).output().unwrap();
    lines_in(&String::from_utf8_lossy(&out.stdout)).contains(&n)
}

#[tokio::test]
async fn a_client_killed_mid_poll_through_the_daemon_loses_no_line_nor_the_exit() {
    let place = Place::new("gone");
    // The first client: its sessions outlive it (so that the next one finds them).
    let mut cmd = tokio::process::Command::new(UEXEC);
    cmd.args(["mcp", "--structured", "--linger", "600"])
        .current_dir(&place.cwd)
        .env("XDG_RUNTIME_DIR", &place.runtime)
        .env("HOME", place.cwd.join("home"))
        .env_remove("UEXEC_DAEMON");
    let transport = TokioChildProcess::new(cmd).unwrap();
    let pid = transport.id().unwrap();
    let first = Recorder::default().serve(transport).await.unwrap();
    let r = call(
        &first,
        "exec_command",
        json!({"cmd": SLOW_LINES, "login": false, "yield_time_ms": 250}),
    )
    .await;
    let id = structured(&r)["session_id"].as_i64().expect("running");
    let mut seen = lines_in(structured(&r)["output"].as_str().unwrap_or_default());
    // A poll that would return at the exit, four seconds away...
    let poll = tokio::spawn(async move {
        let _ = first
            .call_tool(
                rmcp::model::CallToolRequestParams::new("write_stdin").with_arguments(
                    crate::helpers::args(
                        json!({"session_id": id, "chars": "", "yield_time_ms": 30000}),
                    ),
                ),
            )
            .await;
    });
    // ...and its client killed in the middle of it.
    let after = seen.last().copied().unwrap_or(0) + 10;
    eventually("the command to print on", Duration::from_secs(20), || {
        printed(&place, id, after)
    })
    .await;
    crate::helpers::send_signal(pid, "KILL");
    let _ = poll.await;

    // The next client of the same owner gets every line the killed one never saw, and
    // the exit code.
    let (next, _) = place.plain_client(&["--structured"]).await;
    let r = call(
        &next,
        "write_stdin",
        json!({"session_id": id, "chars": "", "yield_time_ms": 30000}),
    )
    .await;
    seen.extend(lines_in(
        structured(&r)["output"].as_str().unwrap_or_default(),
    ));
    assert_eq!(seen, (1..=80).collect::<Vec<_>>(), "{}", text(&r));
    assert_eq!(structured(&r)["exit_code"], 7, "{}", text(&r));
    next.cancel().await.unwrap();
    place.stop();
}

/// A client that closes its stdin mid-poll ends the conversation (MCP's stdio shutdown):
/// its poll is cancelled, and the next client gets what it would have drained.
#[test]
fn a_client_that_closes_stdin_mid_poll_loses_no_line_nor_the_exit() {
    use std::io::Write as _;
    let place = Place::new("gone-eof");
    let mut relay = place
        .command(&["mcp", "--structured", "--linger", "600"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = relay.stdin.take().unwrap();
    let mut answers = BufReader::new(relay.stdout.take().unwrap()).lines();
    let ask = |stdin: &mut std::process::ChildStdin, id: u64, method: &str, params: Value| {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{msg}").unwrap();
    };
    ask(
        &mut stdin,
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18",
        "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
    );
    let mut answer_to = |id: u64| -> Value {
        loop {
            let line = answers.next().expect("an answer").unwrap();
            let msg: Value = serde_json::from_str(&line).unwrap();
            if msg["id"] == id {
                return msg["result"]["structuredContent"].clone();
            }
        }
    };
    answer_to(1);
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    ask(
        &mut stdin,
        2,
        "tools/call",
        json!({"name": "exec_command", "arguments":
        {"cmd": SLOW_LINES, "login": false, "yield_time_ms": 250}}),
    );
    let r = answer_to(2);
    let id = r["session_id"].as_i64().unwrap_or_else(|| panic!("{r}"));
    let mut seen = lines_in(r["output"].as_str().unwrap_or_default());
    ask(
        &mut stdin,
        3,
        "tools/call",
        json!({"name": "write_stdin", "arguments":
        {"session_id": id, "chars": "", "yield_time_ms": 30000}}),
    );
    let after = seen.last().copied().unwrap_or(0) + 10;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !printed(&place, id, after) {
        assert!(
            std::time::Instant::now() < deadline,
            "the command printed no more"
        );
        std::thread::yield_now();
    }
    drop(stdin); // the client is done: the conversation ends mid-poll
    let _ = relay.wait();

    let next = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let (next, _) = place.plain_client(&["--structured"]).await;
        let r = call(
            &next,
            "write_stdin",
            json!({"session_id": id, "chars": "", "yield_time_ms": 30000}),
        )
        .await;
        next.cancel().await.unwrap();
        r
    });
    seen.extend(lines_in(
        structured(&next)["output"].as_str().unwrap_or_default(),
    ));
    assert_eq!(seen, (1..=80).collect::<Vec<_>>(), "{}", text(&next));
    assert_eq!(structured(&next)["exit_code"], 7, "{}", text(&next));
    place.stop();
}

/// `uexec mcp ARGS --http 127.0.0.1:0` in `place`, and its URL.
fn http_server(place: &Place, args: &[&str]) -> (Child, String) {
    let mut child = place
        .command(&[&["mcp", "--structured"], args, &["--http", "127.0.0.1:0"]].concat())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = loop {
        let line = lines.next().expect("the server announces its URL").unwrap();
        if let Some(url) = line.strip_prefix("uexec mcp: serving streamable HTTP at ") {
            break url.trim().to_owned();
        }
    };
    // The rest of its stderr, drained so that it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (child, url)
}

/// `curl` POSTing one JSON-RPC message to `url` in MCP session `session` (a real client
/// process, which the test may kill).
fn curl(url: &str, session: &str, body: &Value) -> Command {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "-N", "-X", "POST", url])
        .args(["-H", "Content-Type: application/json"])
        .args(["-H", "Accept: application/json, text/event-stream"])
        .args(["-H", "MCP-Protocol-Version: 2025-06-18"])
        .args(["-H", &format!("Mcp-Session-Id: {session}")])
        .args(["--data", &body.to_string()]);
    cmd
}

/// Initializes an MCP session at `url`: its id.
fn open_session(url: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "curl", "version": "0"}}});
    let out = Command::new("curl")
        .args(["-sS", "-D", "-", "-X", "POST", url])
        .args(["-H", "Content-Type: application/json"])
        .args(["-H", "Accept: application/json, text/event-stream"])
        .args(["--data", &init.to_string()])
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&out.stdout);
    let session = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id")
                .then(|| v.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session id: {head}"));
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let out = curl(url, &session, &initialized).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    session
}

/// One tool call through `curl`, to its end: the result's structured content.
fn curl_call(url: &str, session: &str, id: u64, tool: &str, arguments: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                      "params": {"name": tool, "arguments": arguments}});
    let out = curl(url, session, &body).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let answer = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .chain(serde_json::from_str::<Value>(&text).ok())
        .find(|m| m["id"] == id)
        .unwrap_or_else(|| panic!("no answer to {id}: {text}"));
    answer["result"]["structuredContent"].clone()
}

/// In MCP session `session` of the server at `url`: a command that prints slowly, its first
/// window's lines, and a long poll of it in flight (a curl of its own) once the command
/// printed on past them.
async fn poll_in_flight(
    place: &Place,
    url: &str,
    session: &str,
) -> (i64, Vec<u32>, std::process::Child) {
    let r = curl_call(
        url,
        session,
        2,
        "exec_command",
        json!({"cmd": SLOW_LINES, "login": false, "yield_time_ms": 250}),
    );
    let id = r["session_id"].as_i64().unwrap_or_else(|| panic!("{r}"));
    let seen = lines_in(r["output"].as_str().unwrap_or_default());
    let poll = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "write_stdin",
        "arguments": {"session_id": id, "chars": "", "yield_time_ms": 30000}}});
    let client = curl(url, session, &poll)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let after = seen.last().copied().unwrap_or(0) + 10;
    // An in-process server has no daemon to ask: its transcript is read directly.
    eventually("the command to print on", Duration::from_secs(20), || {
        transcript_has(place, after)
    })
    .await;
    (id, seen, client)
}

/// A poll of `id` over `session` gets the rest of the 80 lines after `seen`, and the exit.
fn the_rest_comes_whole(url: &str, session: &str, id: i64, mut seen: Vec<u32>) {
    let r = curl_call(
        url,
        session,
        4,
        "write_stdin",
        json!({"session_id": id, "chars": "", "yield_time_ms": 30000}),
    );
    seen.extend(lines_in(r["output"].as_str().unwrap_or_default()));
    assert_eq!(seen, (1..=80).collect::<Vec<_>>(), "{r}");
    assert_eq!(r["exit_code"], 7, "{r}");
}

async fn an_http_request_dropped_mid_poll_loses_nothing(place: &Place, args: &[&str]) {
    let (mut server, url) = http_server(place, args);
    let session = open_session(&url);
    let (id, seen, mut client) = poll_in_flight(place, &url, &session).await;
    client.kill().unwrap();
    client.wait().unwrap();
    the_rest_comes_whole(&url, &session, id, seen);
    server.kill().unwrap();
    server.wait().unwrap();
}

/// Whether some transcript under the place's state directory has reached `lineN`.
fn transcript_has(place: &Place, n: u32) -> bool {
    let sessions = place.cwd.join("home/.local/state/uexec/sessions");
    walk(&sessions).iter().any(|f| {
        std::fs::read(f)
            .map(|b| lines_in(&String::from_utf8_lossy(&b)).contains(&n))
            .unwrap_or(false)
    })
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[tokio::test]
async fn an_http_request_dropped_mid_poll_in_process_loses_nothing() {
    let place = Place::new("gone-http");
    an_http_request_dropped_mid_poll_loses_nothing(&place, &[]).await;
}

#[tokio::test]
async fn an_http_request_dropped_mid_poll_through_the_daemon_loses_nothing() {
    let place = Place::new("gone-httpd");
    an_http_request_dropped_mid_poll_loses_nothing(&place, &["--daemon", "--linger", "600"]).await;
    place.stop();
}

/// An MCP session ended mid-call (`DELETE`): its calls are cancelled too, and the next
/// session (of the same principal, whose sessions they are) gets every line.
#[tokio::test]
async fn an_http_session_deleted_mid_poll_loses_nothing() {
    let place = Place::new("gone-delete");
    let (mut server, url) = http_server(&place, &[]);
    let session = open_session(&url);
    let (id, seen, mut client) = poll_in_flight(&place, &url, &session).await;
    let deleted = Command::new("curl")
        .args([
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-X",
            "DELETE",
            &url,
        ])
        .args(["-H", &format!("Mcp-Session-Id: {session}")])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&deleted.stdout).starts_with('2'),
        "{deleted:?}"
    );
    let _ = client.wait();
    let next = open_session(&url);
    the_rest_comes_whole(&url, &next, id, seen);
    server.kill().unwrap();
    server.wait().unwrap();
}
