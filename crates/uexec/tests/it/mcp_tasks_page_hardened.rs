//! The one-time password page, hardened (issue 38 §5): another local user cannot use it,
//! an answer with a control character is refused without spending the page, its listener
//! caps its connections and closes once no page is open.

use std::io::{ErrorKind, Read};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::eventually;
use crate::raw_mcp::{meta, text_of, Raw};

fn caps() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {"url": {}}})
}

/// Says `match` when the password typed is `hunter2 x`, else `mismatch` and its length.
const CHECKS_THE_PASSWORD: &str = "read -s -p 'Password: ' p; echo; [ \"$p\" = \"$(printf 'hunter%d x' 2)\" ] && echo match || echo \"mismatch ${#p}\"";

/// A server whose session waits at a password prompt, its task, and the page's URL.
async fn a_page() -> (Raw, String, String) {
    let mut raw = Raw::spawn(&[]);
    let created = raw
        .request(
            "tools/call",
            json!({"_meta": meta(caps()), "name": "exec_command",
                   "arguments": {"cmd": CHECKS_THE_PASSWORD, "login": false, "tty": true, "background": true,
                                 "yield_time_ms": 300}}),
        )
        .await;
    let task = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned();
    let asking = raw
        .task_until(caps(), &task, |t| t["status"] == "input_required")
        .await;
    let (key, request) = asking["inputRequests"]
        .as_object()
        .and_then(|r| r.iter().next())
        .unwrap_or_else(|| panic!("one input request: {asking}"));
    let url = request["params"]["url"]
        .as_str()
        .unwrap_or_else(|| panic!("a page: {request}"))
        .to_owned();
    // The client opened it (URL mode's accept).
    raw.request(
        "tasks/update",
        json!({"_meta": meta(caps()), "taskId": task,
               "inputResponses": {key.clone(): {"action": "accept"}}}),
    )
    .await;
    (raw, task, url)
}

fn port_of(url: &str) -> u16 {
    url.strip_prefix("http://127.0.0.1:")
        .and_then(|rest| rest.split('/').next())
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("a loopback page: {url}"))
}

/// The HTTP status curl got for `url` (`000`: no answer, the connection closed), run as
/// `user` (this test's own user when `None`); a `POST` of `form` when given.
fn status_as(user: Option<&str>, url: &str, form: Option<&str>) -> String {
    let mut cmd = match user {
        Some(user) => {
            let mut cmd = std::process::Command::new("runuser");
            cmd.args(["-u", user, "--", "curl"]);
            cmd
        }
        None => std::process::Command::new("curl"),
    };
    cmd.args([
        "-s",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--max-time",
        "20",
    ]);
    if let Some(form) = form {
        cmd.args(["--data-raw", form]);
    }
    let out = cmd.arg(url).output().expect("curl runs");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The lines the session printed, once its task completed.
async fn completed(raw: &mut Raw, task: &str) -> Vec<String> {
    let done = raw
        .task_until(caps(), task, |t| t["status"] == "completed")
        .await;
    let text = text_of(&done["result"]);
    let output = text
        .split_once("Output:\n")
        .unwrap_or_else(|| panic!("an output: {done}"))
        .1;
    output.lines().map(|l| l.trim().to_owned()).collect()
}

/// The command got the right password, and nothing else was typed before it.
fn matched(printed: &[String]) -> bool {
    printed.iter().any(|l| l == "match") && !printed.iter().any(|l| l.starts_with("mismatch"))
}

#[tokio::test]
async fn another_local_user_cannot_use_the_password_page() {
    let (mut raw, task, url) = a_page().await;
    // `nobody` has the URL (a browser's command line shows it to every user).
    let shown = status_as(Some("nobody"), &url, None);
    assert!(
        shown == "403" || shown == "000",
        "nobody was shown the page: {shown}"
    );
    let typed = status_as(Some("nobody"), &url, Some("password=hunter2+x"));
    assert!(
        typed == "403" || typed == "000",
        "nobody typed into it: {typed}"
    );
    // Nothing was typed, nor the page spent: its user answers it.
    assert_eq!(status_as(None, &url, None), "200");
    assert_eq!(status_as(None, &url, Some("password=hunter2+x")), "200");
    let printed = completed(&mut raw, &task).await;
    assert!(matched(&printed), "{printed:?}");
    raw.close().await;
}

#[tokio::test]
async fn a_sandboxed_command_cannot_use_the_password_page() {
    let (mut raw, task, url) = a_page().await;
    // A command of this user, in a read-only sandbox (the network on: the port is
    // reachable), has the URL.
    let curl =
        format!("curl -s -o /dev/null -w '%{{http_code}}' --data-raw password=hunter2+x {url}");
    let ran = raw
        .request(
            "tools/call",
            json!({"_meta": meta(caps()), "name": "exec_command",
                   "arguments": {"cmd": curl, "login": false, "sandbox": "read-only",
                                 "yield_time_ms": 20_000}}),
        )
        .await;
    let said = text_of(&ran["result"]);
    assert!(
        said.contains("\n403") || said.contains("\n000"),
        "a sandboxed command typed into the page: {said}"
    );
    // Nothing was typed, nor the page spent.
    assert_eq!(status_as(None, &url, Some("password=hunter2+x")), "200");
    let printed = completed(&mut raw, &task).await;
    assert!(matched(&printed), "{printed:?}");
    raw.close().await;
}

#[tokio::test]
async fn an_answer_with_a_line_break_types_nothing_and_keeps_the_page() {
    let (mut raw, task, url) = a_page().await;
    // A second line would be a command typed into the session after the password.
    assert_eq!(
        status_as(None, &url, Some("password=pw%0Aecho%20INJECTED")),
        "400"
    );
    assert_eq!(status_as(None, &url, Some("password=pw%1B%5BA")), "400");
    // The page still works, and the prompt got nothing before this.
    assert_eq!(status_as(None, &url, Some("password=hunter2+x")), "200");
    let printed = completed(&mut raw, &task).await;
    assert!(
        matched(&printed),
        "the first answer typed something: {printed:?}"
    );
    raw.close().await;
}

#[tokio::test]
async fn the_page_listener_caps_its_connections_and_closes_with_its_last_page() {
    let (mut raw, task, url) = a_page().await;
    let port = port_of(&url);
    // Connections that send nothing, as many as the cap (16)...
    let idle: Vec<TcpStream> = (0..16)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).expect("connects"))
        .collect();
    // ...and one more, closed at once with a 503 (it would wait for its request forever).
    let mut beyond = TcpStream::connect(("127.0.0.1", port)).expect("connects");
    beyond
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut answer = String::new();
    let read = beyond.read_to_string(&mut answer);
    assert!(
        read.is_ok() && answer.starts_with("HTTP/1.1 503"),
        "past the cap: {read:?} {answer:?}"
    );
    drop(idle);
    // The page used, no page is open: the port no longer listens.
    let sent = eventually_status(&url, "password=hunter2+x").await;
    assert_eq!(sent, "200");
    let printed = completed(&mut raw, &task).await;
    assert!(matched(&printed), "{printed:?}");
    eventually(
        "the page listener to close",
        Duration::from_secs(10),
        || match TcpStream::connect(("127.0.0.1", port)) {
            Err(e) => e.kind() == ErrorKind::ConnectionRefused,
            Ok(_) => false,
        },
    )
    .await;
    raw.close().await;
}

/// The status of a `POST` of `form` to `url` once the listener has a free connection again
/// (the idle ones were just closed: until the listener saw them go, it answers 503).
async fn eventually_status(url: &str, form: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let status = status_as(None, url, Some(form));
        if status != "503" || std::time::Instant::now() > deadline {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
