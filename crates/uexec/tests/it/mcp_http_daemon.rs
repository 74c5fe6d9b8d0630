//! `uexec mcp --daemon --http`: the HTTP face in its own process, the sessions in the daemon:
//! `uexec ls` sees them, they outlive the server, each token is an owner of its own, and an
//! HTTP session that ends closes its daemon connection.

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::daemon::start_sleeper;
use crate::helpers::{
    call, eventually, hear_the_end_of, procs_with, structured, text, wait_all_gone, Client,
};
use crate::mcp_http::{announced, assert_apart, http_client, post_status, Server};
use crate::net_support::{make_cert, request_as};
use crate::place::DaemonPlace as Place;

/// `uexec mcp --daemon --daemon-socket S --http 127.0.0.1:0 --codex-compat` in `place`, one
/// `--token` each.
fn serve(place: &Place, tokens: &[&str]) -> Server {
    serve_with(place, tokens, &[])
}

/// `serve`, with `extra` flags too.
fn serve_with(place: &Place, tokens: &[&str], extra: &[&str]) -> Server {
    let socket = place.socket();
    let mut cmd = place.command(&["mcp", "--daemon", "--codex-compat", "--daemon-socket"]);
    cmd.arg(&socket).args(["--http", "127.0.0.1:0"]).args(extra);
    cmd.env_remove("UEXEC_TOKEN");
    for token in tokens {
        cmd.args(["--token", token]);
    }
    announced(cmd)
}

async fn client(server: &Server, token: &str) -> Client {
    http_client(&server.addr, token).await.0
}

/// `uexec ls --json --all` of `place`'s daemon: its sessions.
fn listed(place: &Place) -> Vec<Value> {
    let out = place.command(&["ls", "--json", "--all"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["sessions"].as_array().cloned().unwrap_or_default()
}

fn row(place: &Place, id: i64) -> Option<Value> {
    listed(place).into_iter().find(|s| s["session_id"] == id)
}

#[tokio::test]
async fn http_sessions_live_in_the_daemon_and_outlive_the_http_server() {
    let place = Place::new("httpd");
    let server = serve_with(&place, &["alpha-token"], &["--linger", "forever"]);
    let alpha = client(&server, "alpha-token").await;
    let (id, m) = start_sleeper(&alpha).await;
    let poll = call(
        &alpha,
        "write_stdin",
        json!({"session_id": id, "yield_time_ms": 100}),
    )
    .await;
    assert_eq!(structured(&poll)["session_id"], id, "{}", text(&poll));
    assert!(structured(&poll)["exit_code"].is_null(), "{}", text(&poll));

    let seen = row(&place, id).unwrap_or_else(|| panic!("uexec ls: {:?}", listed(&place)));
    assert_eq!(seen["state"], "running", "{seen}");
    let owner = seen["owner"].as_str().unwrap_or_default().to_owned();
    assert!(
        owner.starts_with("mcp:") && owner.contains("#token-"),
        "{owner}"
    );
    assert!(
        !owner.contains("alpha-token"),
        "the owner names the token: {owner}"
    );

    // The HTTP server dies: the session runs on in the daemon.
    drop(alpha);
    drop(server);
    assert_eq!(
        row(&place, id).map(|s| s["state"].clone()),
        Some("running".into())
    );
    assert_eq!(procs_with(&m).len(), 1, "the session's process runs on");

    // The next server, with the same token in the same directory, finds it again.
    let server = serve(&place, &["alpha-token"]);
    let again = client(&server, "alpha-token").await;
    let mine = call(&again, "list_sessions", json!({})).await;
    assert_eq!(
        structured(&mine)["sessions"][0]["session_id"],
        id,
        "{}",
        text(&mine)
    );
    let kill = call(&again, "terminate_session", json!({"session_id": id})).await;
    assert_eq!(kill.is_error, Some(false), "{}", text(&kill));
    wait_all_gone(&[m], "the session's process to go").await;
    again.cancel().await.unwrap();
    place.stop();
}

#[tokio::test]
async fn each_token_is_an_owner_of_its_own_in_the_daemon() {
    let place = Place::new("httpd");
    let server = serve(&place, &["alpha", "beta"]);
    assert_eq!(post_status(&server.addr, ""), 401);
    assert_eq!(
        post_status(&server.addr, "Authorization: Bearer wrong\r\n"),
        401
    );
    let alpha = client(&server, "alpha").await;
    let beta = client(&server, "beta").await;
    let (id, m) = start_sleeper(&alpha).await;
    assert_apart(&alpha, &beta, id).await;
    wait_all_gone(&[m], "the session's process to go").await;
    alpha.cancel().await.unwrap();
    beta.cancel().await.unwrap();
    place.stop();
}

#[tokio::test]
async fn the_daemons_progress_and_resource_updates_reach_the_http_client() {
    let place = Place::new("httpd");
    let server = serve(&place, &["alpha"]);
    let (alpha, recorder) = http_client(&server.addr, "alpha").await;
    // Progress rides the POST's own stream (routed by its token: rmcp's client sends one
    // with every request).
    let r = call(
        &alpha,
        "exec_command",
        json!({"cmd": "for i in 1 2 3; do echo progress-$i; sleep 0.2; done",
               "login": false, "yield_time_ms": 5000}),
    )
    .await;
    assert_eq!(structured(&r)["exit_code"], 0, "{}", text(&r));
    let progress = recorder.progress.lock().unwrap().clone();
    let heard: String = progress.iter().filter_map(|p| p.message.clone()).collect();
    assert_eq!(
        heard, "progress-1\nprogress-2\nprogress-3\n",
        "{progress:?}"
    );
    // resources/updated rides the GET stream (no request of its own).
    let r = call(
        &alpha,
        "exec_command",
        json!({"cmd": "sleep 30", "login": false, "yield_time_ms": 100}),
    )
    .await;
    let id = structured(&r)["session_id"].as_i64().expect("running");
    let kill = async {
        call(&alpha, "terminate_session", json!({"session_id": id})).await;
    };
    hear_the_end_of(&alpha, &recorder, id, kill).await;
    alpha.cancel().await.unwrap();
    drop(server);
    place.stop();
}

/// How many Unix sockets process `pid` holds (its daemon connections: the HTTP face's
/// other sockets are TCP ones).
fn unix_sockets_of(pid: u32) -> usize {
    let unix = std::fs::read_to_string("/proc/net/unix").unwrap();
    let inodes: std::collections::HashSet<&str> = unix
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(6))
        .collect();
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|link| {
            let link = link.to_string_lossy().into_owned();
            Some(link.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .filter(|inode| inodes.contains(inode.as_str()))
        .count()
}

#[tokio::test]
async fn an_http_session_that_ends_closes_its_daemon_connection_and_ends_its_sessions() {
    let place = Place::new("httpd");
    let server = serve(&place, &["alpha"]);
    let before = unix_sockets_of(server.pid());
    let alpha = client(&server, "alpha").await;
    let (id, m) = start_sleeper(&alpha).await;
    assert_eq!(
        unix_sockets_of(server.pid()),
        before + 1,
        "one daemon connection"
    );
    alpha.cancel().await.unwrap(); // DELETE
    eventually(
        "the daemon connection to close",
        Duration::from_secs(10),
        || unix_sockets_of(server.pid()) == before,
    )
    .await;
    // The token's owner has no connection left: its sessions end (linger 0, the default).
    wait_all_gone(&[m], "the session to end with its HTTP session").await;
    assert_eq!(
        row(&place, id).map(|s| s["state"].clone()),
        Some("exited".into())
    );
    drop(server);
    place.stop();
}

#[tokio::test]
async fn when_the_daemon_dies_its_http_sessions_end_and_the_next_one_starts_a_new_daemon() {
    let place = Place::new("httpd");
    let server = serve(&place, &["alpha"]);
    let before = unix_sockets_of(server.pid());
    let alpha = client(&server, "alpha").await;
    let r = call(
        &alpha,
        "exec_command",
        json!({"cmd": "echo one", "login": false}),
    )
    .await;
    assert_eq!(structured(&r)["exit_code"], 0, "{}", text(&r));
    let pid = place.daemon_pid().expect("a daemon was started");
    crate::helpers::send_signal(pid, "KILL");
    eventually(
        "the relay to see the daemon gone",
        Duration::from_secs(10),
        || unix_sockets_of(server.pid()) == before,
    )
    .await;
    let again = client(&server, "alpha").await;
    let r = call(
        &again,
        "exec_command",
        json!({"cmd": "echo two", "login": false}),
    )
    .await;
    assert_eq!(structured(&r)["output"], "two\n", "{}", text(&r));
    assert_ne!(place.daemon_pid(), Some(pid), "a new daemon");
    again.cancel().await.unwrap();
    let _ = alpha.cancel().await;
    drop(server);
    place.stop();
}

#[test]
fn the_tls_listener_flags_serve_https_with_daemon() {
    let place = Place::new("httpd");
    let (cert, key) = make_cert(&place.cwd);
    let mut cmd = place.command(&["mcp", "--daemon", "--http", "127.0.0.1:0"]);
    cmd.arg("--tls-cert").arg(&cert).arg("--tls-key").arg(&key);
    let server = announced(cmd);
    assert_eq!(place.daemon_pid(), None, "no session, no daemon yet");
    assert_eq!(request_as(None, &server.addr, "mcp", Some(&cert)), "200");
    assert!(
        place.daemon_pid().is_some(),
        "the session's initialize reached a daemon"
    );
    assert_ne!(request_as(None, &server.addr, "mcp", None), "200");
    drop(server);
    place.stop();
}

/// The Transcripts flags would change nothing through the daemon (its transcripts are its
/// own): refused, naming both flags and where the daemon's are set, rather than ignored.
#[test]
fn what_does_not_combine_with_daemon_says_both_flags_and_why() {
    for flag in [
        vec!["--transcripts-dir", "/tmp"],
        vec!["--no-transcripts"],
        vec!["--transcript-max-bytes", "65536"],
        vec!["--transcripts-total-max-bytes", "65536"],
    ] {
        for daemon in [Some("--daemon"), None] {
            let mut cmd = Command::new(crate::helpers::UEXEC);
            cmd.arg("mcp")
                .args(daemon)
                .args(&flag)
                .env_remove("UEXEC_DAEMON");
            if daemon.is_none() {
                cmd.env("UEXEC_DAEMON", "1");
            }
            let out = cmd.stdin(std::process::Stdio::null()).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{flag:?} {daemon:?}: {err}");
            assert!(
                err.contains(&format!("'{}' cannot be used with '--daemon'", flag[0]))
                    && err.contains("configured on `uexec daemon`"),
                "{flag:?} {daemon:?}: {err}"
            );
        }
    }
    // UEXEC_DAEMON=0 is no daemon: the flag is taken (the server starts, and fails only
    // its handshake at stdin's EOF).
    let out = Command::new(crate::helpers::UEXEC)
        .args(["mcp", "--no-transcripts"])
        .env("UEXEC_DAEMON", "0")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("MCP handshake over stdio failed"), "{err}");
}
