//! The network policy of sandboxed commands on the real kernel: the allowlist proxy (HTTP
//! and SOCKS5), its tunnels, and what a denial does to the session.

use serde_json::json;

use crate::helpers::{call, marker, structured, text, wait_all_gone};
use crate::sandbox::{exec, exec_error, scratch, server, unreached_listener};

/// The allowlist's words for a denial of that host port.
fn denial_of(port: u16) -> String {
    format!("network access to 127.0.0.1:{port} denied by the allowlist")
}

/// `error` names the denial of `denied`'s port, and nothing reached it.
pub(crate) fn assert_denied(error: &str, denied: &std::net::TcpListener) {
    let port = denied.local_addr().unwrap().port();
    assert!(error.contains(&denial_of(port)), "{error}");
    assert!(denied.accept().is_err(), "the denied host was reached");
}

/// A host-side server on 127.0.0.1 that runs `handle` on each connection, in a thread of
/// its own; its port.
fn host_server(handle: fn(std::net::TcpStream, &'static str), body: &'static str) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || handle(stream, body));
        }
    });
    port
}

/// A host-side HTTP server that answers every request with `body`; its port.
pub(crate) fn http_server(body: &'static str) -> u16 {
    host_server(
        |mut stream, body| {
            use std::io::{Read, Write};
            let mut buf = [0u8; 4096];
            let mut head = Vec::new();
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        },
        body,
    )
}

#[tokio::test]
async fn an_allowed_host_is_reached_through_the_proxy() {
    let dir = scratch("allow");
    let port = http_server("hello-from-host");
    let (client, _) = server(&dir, &["--structured"], &[]).await;
    let allow = json!({"allow": [format!("127.0.0.1:{port}")]});
    // Plain HTTP through the proxy, then a CONNECT tunnel (-p), as HTTPS clients do.
    let cmd = format!(
        "echo proxy=$HTTP_PROXY; curl -sS --noproxy '' http://127.0.0.1:{port}/; echo; \
         curl -sS -p --noproxy '' http://127.0.0.1:{port}/tunnel"
    );
    let r = exec(&client, json!({"cmd": cmd, "network": allow.clone()})).await;
    let out = text(&r);
    assert!(out.contains("proxy=http://127.0.0.1:3128"), "{out}");
    assert_eq!(out.matches("hello-from-host").count(), 2, "{out}");
    assert_eq!(structured(&r)["sandbox"]["network"], "allowlist");
    // Past the proxy there is no way out.
    let direct = format!("curl -sS -m 3 --noproxy '*' http://127.0.0.1:{port}/; echo rc=$?");
    let r = exec(&client, json!({"cmd": direct, "network": allow})).await;
    assert!(!text(&r).contains("hello-from-host"), "{}", text(&r));
}

/// SOCKS5 on the proxy's port: by address and by name (the proxy resolves it), and a host
/// off the list is refused with SOCKS5's "not allowed by ruleset" and fails the session,
/// named, as an HTTP request to it does.
#[tokio::test]
async fn socks5_reaches_an_allowed_host_and_a_denied_one_is_named() {
    let dir = scratch("socks");
    let port = http_server("hello-over-socks");
    let (client, _) = server(&dir, &["--structured"], &[]).await;
    let allow = json!({"allow": [format!("127.0.0.1:{port}"), format!("localhost:{port}")]});
    let cmd = format!(
        "curl -sS --noproxy '' -x socks5://127.0.0.1:3128 http://127.0.0.1:{port}/a; echo; \
         curl -sS --noproxy '' -x socks5h://127.0.0.1:3128 http://localhost:{port}/b"
    );
    let r = exec(&client, json!({"cmd": cmd, "network": allow.clone()})).await;
    assert_eq!(
        text(&r).matches("hello-over-socks").count(),
        2,
        "{}",
        text(&r)
    );
    let (other, other_port) = unreached_listener();
    let m = marker();
    let cmd = format!(
        "curl -sS --noproxy '' -x socks5://127.0.0.1:3128 http://127.0.0.1:{other_port}/; sleep {m}"
    );
    let e = exec_error(
        &client,
        json!({"cmd": cmd, "network": allow, "yield_time_ms": 10000}),
    )
    .await;
    assert_denied(&e, &other);
    wait_all_gone(&[m], "the denied session to be terminated").await;
}

/// A host-side server that echoes what it reads until the client's end of input, then
/// closes; its port.
fn echo_server() -> u16 {
    host_server(
        |mut stream, _| {
            let mut back = stream.try_clone().unwrap();
            let _ = std::io::copy(&mut stream, &mut back);
        },
        "",
    )
}

/// Bulk bytes both ways through a CONNECT tunnel, with a half close: 24 MiB go up, come back
/// echoed, byte for byte (the relay's buffers grow under bulk: every size is crossed), and
/// the client's end of input reaches the host (else the echo never ends).
#[tokio::test]
async fn a_tunnel_relays_bulk_bytes_both_ways_and_passes_a_half_close_on() {
    let dir = scratch("tunnel");
    let port = echo_server();
    let (client, _) = server(&dir, &["--structured"], &[]).await;
    let script = format!(
        r#"
import hashlib, random, socket, threading
s = socket.create_connection(("127.0.0.1", 3128))
s.sendall(b"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n")
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
assert head.startswith(b"HTTP/1.1 200"), head
data = random.Random(7).randbytes(24 << 20)
def send():
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
t = threading.Thread(target=send)
t.start()
got = hashlib.sha256()
n = 0
while chunk := s.recv(1 << 20):
    got.update(chunk)
    n += len(chunk)
t.join()
print("echoed", n, got.hexdigest() == hashlib.sha256(data).hexdigest())
"#
    );
    std::fs::write(dir.join("tunnel.py"), script).unwrap();
    let r = exec(
        &client,
        json!({
            "cmd": "python3 tunnel.py",
            "workdir": dir.display().to_string(),
            "network": {"allow": [format!("127.0.0.1:{port}")]},
            "yield_time_ms": 30000,
        }),
    )
    .await;
    let out = text(&r);
    assert!(out.contains(&format!("echoed {} True", 24 << 20)), "{out}");
    assert_eq!(structured(&r)["exit_code"], 0, "{out}");
}

#[tokio::test]
async fn a_host_off_the_allowlist_fails_the_session_and_is_named() {
    let dir = scratch("deny");
    let allowed = http_server("allowed");
    let (other, other_port) = unreached_listener();
    let allow_flag = format!("127.0.0.1:{allowed}");
    let (client, _) = server(&dir, &["--structured", "--network-allow", &allow_flag], &[]).await;
    let m = marker();
    let cmd = format!("curl -sS --noproxy '' http://127.0.0.1:{other_port}/; sleep {m}");
    let e = exec_error(&client, json!({"cmd": cmd, "yield_time_ms": 10000})).await;
    assert_denied(&e, &other);
    wait_all_gone(&[m], "the denied session to be terminated").await;
}

/// `--network-denial record`: the denied request is refused, the command runs on, and its
/// next result names the host (once); the exit is reported as a result, not an error.
#[tokio::test]
async fn a_recorded_denial_lets_the_command_run_on_and_names_the_host() {
    let dir = scratch("record");
    let allowed = http_server("allowed");
    let (other, other_port) = unreached_listener();
    let allow_flag = format!("127.0.0.1:{allowed}");
    let flags = [
        "--structured",
        "--network-allow",
        &allow_flag,
        "--network-denial",
        "record",
    ];
    let (client, _) = server(&dir, &flags, &[]).await;
    let cmd = format!(
        "curl -sS --noproxy '' -o /dev/null -w 'status=%{{http_code}}\\n' http://127.0.0.1:{other_port}/; \
         echo survived; read line; echo got-$line; \
         curl -sS --noproxy '' http://127.0.0.1:{allowed}/; exit 3"
    );
    let r = exec(
        &client,
        json!({"cmd": cmd, "tty": true, "yield_time_ms": 10000, "until": {"pattern": "survived"}}),
    )
    .await;
    let out = text(&r);
    let id = structured(&r)["session_id"]
        .as_i64()
        .expect("still running");
    assert!(
        out.contains("status=403") && out.contains("survived"),
        "{out}"
    );
    let denial = denial_of(other_port);
    assert!(out.contains(&format!("blocked this: {denial}")), "{out}");
    let s = structured(&r)["sandbox"].clone();
    assert_eq!(s["denied"], true, "{s}");
    assert_eq!(s["evidence"][0], denial, "{s}");
    assert!(other.accept().is_err(), "the denied host was reached");
    // Later input and output still flow; the denial was reported once.
    let r = call(
        &client,
        "write_stdin",
        json!({"session_id": id, "chars": "go\n", "yield_time_ms": 10000}),
    )
    .await;
    let out = text(&r);
    assert_eq!(structured(&r)["exit_code"], 3, "{out}");
    assert!(out.contains("got-go") && out.contains("allowed"), "{out}");
    assert_eq!(structured(&r)["sandbox"]["denied"], false, "{out}");
}

/// The late-denial grace, end to end. Nothing in the sandbox outlives the command: when it
/// exits, the pid namespace takes every process it left behind, before uexec sees the exit.
/// So the latest a denied request can reach the proxy is as a leftover dies: here a job holds
/// a connection whose request line (no line end yet) only ends when the namespace kills it
/// and its socket closes, after the command's exit. The session must still fail, naming the
/// host.
#[tokio::test]
async fn a_request_cut_short_by_the_exit_still_fails_the_session() {
    let dir = scratch("late");
    let allowed = http_server("allowed");
    let (denied, denied_port) = unreached_listener();
    let allow_flag = format!("127.0.0.1:{allowed}");
    let (client, _) = server(&dir, &["--structured", "--network-allow", &allow_flag], &[]).await;
    let job = marker();
    let cmd = format!(
        "mkfifo \"$TMPDIR/ready\"; \
         ( exec 3<>/dev/tcp/127.0.0.1/3128; printf 'CONNECT 127.0.0.1:{denied_port} HTTP/1.1' >&3; \
           echo sent; exec sleep {job} ) > \"$TMPDIR/ready\" & \
         read line < \"$TMPDIR/ready\"; echo \"exiting after: $line\""
    );
    let e = exec_error(
        &client,
        json!({"cmd": cmd, "shell": "/bin/bash", "yield_time_ms": 10000}),
    )
    .await;
    assert_denied(&e, &denied);
    wait_all_gone(&[job], "the job the command left behind").await;
}
