//! `uexec mcp --http`: a real client with the token, refusals without it or from a browser.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::json;

use crate::helpers::{call, structured, Client, Recorder, UEXEC};

pub struct Server {
    child: Child,
    pub addr: String,
}

impl Server {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn start(token: Option<&str>) -> Server {
    start_with(token, &["--codex-compat"])
}

/// [`start`] with more arguments for `uexec mcp`.
pub fn start_with(token: Option<&str>, extra: &[&str]) -> Server {
    let mut cmd = Command::new(UEXEC);
    cmd.args(["mcp", "--http", "127.0.0.1:0"]).args(extra);
    cmd.env_remove("UEXEC_TOKEN");
    if let Some(tokens) = token {
        for t in tokens.split(',') {
            cmd.args(["--token", t]);
        }
    }
    announced(cmd)
}

/// Starts `cmd` (a `uexec mcp --http`) and waits for the address it announces.
pub fn announced(mut cmd: Command) -> Server {
    cmd.stderr(Stdio::piped()).stdout(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("the server announces its address")
            .unwrap();
        if let Some(rest) = line
            .strip_prefix("uexec mcp: serving streamable HTTP at ")
            .and_then(|l| l.split("://").nth(1))
        {
            break rest.trim_end_matches("/mcp").to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    Server { child, addr }
}

/// One raw HTTP request; returns the status code.
/// The status code of the response read from `s` (0 when there is none).
fn status_of(mut s: TcpStream) -> u16 {
    let mut response = String::new();
    let _ = s.read_to_string(&mut response);
    response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

pub fn post_status(addr: &str, extra_headers: &str) -> u16 {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).to_string();
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n{extra_headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    status_of(s)
}

#[tokio::test]
async fn a_client_with_the_token_runs_commands() {
    let server = start(Some("s3cret"));
    let config =
        StreamableHttpClientTransportConfig::with_uri(format!("http://{}/mcp", server.addr))
            .auth_header("s3cret");
    let client = Recorder::default()
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap();
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "echo over-http", "login": false}),
    )
    .await;
    assert_eq!(structured(&r)["exit_code"], 0);
    assert!(structured(&r)["output"]
        .as_str()
        .unwrap()
        .contains("over-http"));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_missing_or_wrong_token_is_refused() {
    let server = start(Some("s3cret"));
    assert_eq!(post_status(&server.addr, ""), 401);
    assert_eq!(
        post_status(&server.addr, "Authorization: Bearer wrong\r\n"),
        401
    );
    assert_ne!(
        post_status(&server.addr, "Authorization: Bearer s3cret\r\n"),
        401
    );
}

#[tokio::test]
async fn a_foreign_origin_or_host_is_refused() {
    let server = start(None);
    assert_eq!(
        post_status(&server.addr, "Origin: https://evil.example\r\n"),
        403
    );
    // This server's own origin (a page it served, were it to serve one) is no foreign one;
    // the same host on another port is (another local web server's page).
    let port = server.addr.rsplit(':').next().unwrap().to_owned();
    for own in [
        format!("http://127.0.0.1:{port}"),
        format!("http://localhost:{port}"),
    ] {
        let status = post_status(&server.addr, &format!("Origin: {own}\r\n"));
        assert_ne!(status, 403, "{own}");
    }
    let other: u16 = port.parse::<u16>().unwrap().wrapping_add(1).max(1);
    assert_eq!(
        post_status(
            &server.addr,
            &format!("Origin: http://127.0.0.1:{other}\r\n")
        ),
        403
    );
    let mut s = TcpStream::connect(&server.addr).unwrap();
    let body = "{}";
    write!(s, "POST /mcp HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).unwrap();
    let mut response = String::new();
    let _ = s.read_to_string(&mut response);
    let status: u16 = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    assert!(
        status == 403 || status == 400 || status == 421,
        "{response}"
    );
}

#[test]
fn a_public_bind_without_a_token_is_refused() {
    let out = Command::new(UEXEC)
        .args(["mcp", "--http", "0.0.0.0:0"])
        .env_remove("UEXEC_TOKEN")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("without a bearer token"));
}

/// An MCP client of the server at `addr` with bearer `token`, and what it hears.
pub async fn http_client(addr: &str, token: &str) -> (Client, Recorder) {
    let config = StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp"))
        .auth_header(token);
    let recorder = Recorder::default();
    let client = recorder
        .clone()
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap();
    (client, recorder)
}

/// Session `id`, running for `alpha`, is `alpha`'s alone: `beta` neither lists nor polls
/// nor kills it; `alpha` lists it, then kills it.
pub async fn assert_apart(alpha: &Client, beta: &Client, id: i64) {
    let mine = call(alpha, "list_sessions", json!({})).await;
    assert_eq!(structured(&mine)["sessions"][0]["session_id"], id);
    let theirs = call(beta, "list_sessions", json!({})).await;
    assert_eq!(
        structured(&theirs)["sessions"],
        json!([]),
        "beta must not see alpha's session"
    );
    let poll = call(beta, "write_stdin", json!({"session_id": id})).await;
    assert_eq!(poll.is_error, Some(true));
    let kill = call(beta, "terminate_session", json!({"session_id": id})).await;
    assert_eq!(
        kill.is_error,
        Some(true),
        "beta must not kill alpha's session"
    );
    let kill = call(alpha, "terminate_session", json!({"session_id": id})).await;
    assert_eq!(kill.is_error, Some(false));
}

#[tokio::test]
async fn each_token_has_its_own_sessions() {
    let server = start(Some("alpha,beta"));
    let (alpha, _) = http_client(&server.addr, "alpha").await;
    let (beta, _) = http_client(&server.addr, "beta").await;
    let r = call(
        &alpha,
        "exec_command",
        json!({"cmd": "sleep 30", "login": false, "yield_time_ms": 250}),
    )
    .await;
    let id = structured(&r)["session_id"].as_i64().expect("running");
    assert_apart(&alpha, &beta, id).await;
    alpha.cancel().await.unwrap();
    beta.cancel().await.unwrap();
}

/// The status of a plain GET of `path`.
fn get_status(addr: &str, path: &str) -> u16 {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    status_of(s)
}

#[tokio::test]
async fn an_allowed_origin_admits_a_web_page_and_only_it() {
    let server = start_with(
        Some("s3cret"),
        &[
            "--allow-origin",
            "https://app.example.com",
            "--allow-origin",
            "http://localhost:*",
        ],
    );
    // Admitted: past the Origin check (this bare tools/list has no session: 400, not 403).
    let with = |origin: &str| {
        post_status(
            &server.addr,
            &format!("Authorization: Bearer s3cret\r\nOrigin: {origin}\r\n"),
        )
    };
    assert_ne!(
        with("https://app.example.com"),
        403,
        "{}",
        "https://app.example.com"
    );
    assert_ne!(
        with("https://app.example.com:443"),
        403,
        "{}",
        "https://app.example.com:443"
    );
    assert_ne!(
        with("http://localhost:5173"),
        403,
        "{}",
        "http://localhost:5173"
    );
    assert_eq!(with("https://app.example.com:8443"), 403);
    assert_eq!(with("http://app.example.com"), 403);
    assert_eq!(with("https://evil.example"), 403);
    // Bad input names the flag, and nothing listens.
    let out = Command::new(UEXEC)
        .args([
            "mcp",
            "--http",
            "127.0.0.1:0",
            "--allow-origin",
            "app.example.com",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--allow-origin") && err.contains("is not an origin"),
        "{err}"
    );
}

#[tokio::test]
async fn oauth_discovery_finds_nothing_rather_than_a_login() {
    let server = start(Some("s3cret"));
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
    ] {
        assert_eq!(get_status(&server.addr, path), 404, "{path}");
    }
    // The endpoint itself still wants the token.
    assert_eq!(post_status(&server.addr, ""), 401);
}
