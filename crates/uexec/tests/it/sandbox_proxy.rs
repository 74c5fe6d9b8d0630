//! The network allowlist's proxy holds (issue 23): a name that resolves to the host's
//! loopback is refused, plain HTTP reaches a real server in origin form, an allowlisted
//! loopback address is not sent around the proxy by `NO_PROXY`, a refused connection with
//! the network off is reported as the sandbox's doing, and the hand-over of the proxy's port
//! leaves no socket file behind. Each through a real `uexec mcp`, a real sandbox and a real
//! upstream server on the host's 127.0.0.1.

use std::net::ToSocketAddrs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use crate::helpers::{eventually, marker, procs_with, structured, text, wait_all_gone};
use crate::sandbox::{exec, exec_error, scratch, server, unreached_listener};
use crate::sandbox_network::http_server;
use crate::sandbox_warm::{descends_from, waiting_launchers};

/// The proxy's words for a name whose every address is non-public.
const NON_PUBLIC: &str = "resolved to a non-public address";

/// An allowed *name* that resolves to the host's loopback brings that loopback back: the
/// proxy refuses it (a denial, named, that says how to allow the address), over HTTP and
/// SOCKS5 alike, while the address named literally works.
#[tokio::test]
async fn a_name_that_resolves_to_loopback_is_refused_and_its_literal_address_works() {
    let dir = scratch("rebind");
    let (hidden, port) = unreached_listener();
    let (client, _) = server(&dir, &["--structured"], &[]).await;
    let m = marker();
    let cmd = format!("curl -sS --noproxy '' http://localhost:{port}/; sleep {m}");
    let allow = json!({"allow": [format!("localhost:{port}")]});
    let e = exec_error(
        &client,
        json!({"cmd": cmd, "network": allow, "yield_time_ms": 10000}),
    )
    .await;
    assert!(
        e.contains(&format!("network access to localhost:{port} denied")),
        "{e}"
    );
    assert!(e.contains(NON_PUBLIC), "{e}");
    assert!(e.contains(&format!("127.0.0.1:{port}")), "{e}");
    assert!(hidden.accept().is_err(), "the host's loopback was reached");
    wait_all_gone(&[m], "the refused session to be terminated").await;

    // Recorded instead: a 403 that says why, and SOCKS5's "not allowed by ruleset".
    let flags = [
        "--structured",
        "--network-allow",
        &format!("localhost:{port}"),
        "--network-denial",
        "record",
    ];
    let (client, _) = server(&dir, &flags, &[]).await;
    let cmd = format!(
        "curl -sS --noproxy '' http://localhost:{port}/; echo http-done; \
         curl -sS --noproxy '' -x socks5h://127.0.0.1:3128 http://localhost:{port}/; echo socks=$?"
    );
    let r = exec(&client, json!({"cmd": cmd, "yield_time_ms": 10000})).await;
    let out = text(&r);
    assert!(
        out.contains("http-done") && out.contains(NON_PUBLIC),
        "{out}"
    );
    assert!(
        out.contains("name that address in the allowlist"),
        "the refusal says how to allow it: {out}"
    );
    assert!(out.contains("socks=97"), "SOCKS5 refused: {out}");
    let s = structured(&r)["sandbox"].clone();
    assert_eq!(s["denied"], true, "{s}");
    assert!(
        s["evidence"][0].as_str().unwrap().contains(NON_PUBLIC),
        "{s}"
    );
    assert!(hidden.accept().is_err(), "the host's loopback was reached");

    // The address itself on the list: reached, by address and by the name (whose address
    // the list now names).
    let open = http_server("hello-by-address");
    let allow = json!({"allow": [format!("127.0.0.1:{open}"), format!("localhost:{open}")]});
    let cmd = format!(
        "curl -sS --noproxy '' http://127.0.0.1:{open}/; echo; curl -sS --noproxy '' http://localhost:{open}/"
    );
    // (A server whose network is on: its policy is the ceiling of the call's allowlist.)
    let (open_client, _) = server(&dir, &["--structured"], &[]).await;
    let r = exec(&open_client, json!({"cmd": cmd, "network": allow})).await;
    assert_eq!(
        text(&r).matches("hello-by-address").count(),
        2,
        "{}",
        text(&r)
    );
    assert_eq!(structured(&r)["sandbox"]["denied"], false, "{}", text(&r));
}

/// A wildcard brings any name under it, and so whatever address it resolves to: here
/// `*.0.0.1`, which `127.0.0.1` itself falls under, and `*.localhost` where this machine
/// resolves such names (glibc without nss-myhostname does not). Either is refused: the
/// address is the host's loopback, and no entry names it literally.
#[tokio::test]
async fn a_wildcard_that_brings_the_host_s_loopback_is_refused() {
    let dir = scratch("wild");
    let (hidden, port) = unreached_listener();
    let (client, _) = server(&dir, &["--structured"], &[]).await;
    let mut cases = vec![("*.0.0.1", format!("127.0.0.1:{port}"))];
    if ("probe.localhost", 80).to_socket_addrs().is_ok() {
        cases.push(("*.localhost", format!("a.localhost:{port}")));
    } else {
        eprintln!("this machine does not resolve *.localhost: only *.0.0.1 is tried");
    }
    for (entry, target) in cases {
        let m = marker();
        let cmd = format!("curl -sS --noproxy '' http://{target}/; sleep {m}");
        let e = exec_error(
            &client,
            json!({"cmd": cmd, "network": {"allow": [entry]}, "yield_time_ms": 10000}),
        )
        .await;
        assert!(e.contains("non-public address"), "{entry}: {e}");
        assert!(
            hidden.accept().is_err(),
            "{entry}: the host's loopback was reached"
        );
        wait_all_gone(&[m], "the refused session to be terminated").await;
    }
}

/// `python3 -m http.server` on the host's 127.0.0.1, speaking HTTP/1.1 (keeps connections
/// alive unless told to close), serving `root`, answering `/headers` with the request it got,
/// and logging every request line to `log`. Killed when dropped.
struct PythonServer {
    child: std::process::Child,
    port: u16,
    log: PathBuf,
}

const PYTHON_SERVER: &str = r#"
import functools, http.server, sys
root, log = sys.argv[1], sys.argv[2]
class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        with open(log, "a") as f:
            f.write(self.requestline + "\n")
        if self.path == "/headers":
            body = (self.requestline + "\n" + str(self.headers)).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            super().do_GET()
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=root))
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

impl PythonServer {
    fn start(root: &Path) -> Self {
        use std::io::BufRead;
        let log = root.join("requests.log");
        let mut child = std::process::Command::new("python3")
            .args(["-c", PYTHON_SERVER])
            .arg(root)
            .arg(&log)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().unwrap();
        Self { child, port, log }
    }

    /// The request lines it has served.
    fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for PythonServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Plain HTTP through the proxy reaches a real server in origin form (path and query), with
/// the proxy's own headers and the hop-by-hop ones dropped and `Connection: close` sent.
#[tokio::test]
async fn plain_http_reaches_a_python_http_server_in_origin_form() {
    let dir = scratch("origin");
    let root = dir.join("www");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("hello.txt"), "hello-from-http-server\n").unwrap();
    let upstream = PythonServer::start(&root);
    let port = upstream.port;
    let (client, _) = server(&dir, &["--structured"], &[]).await;
    let cmd = format!(
        "curl -sS --noproxy '' 'http://127.0.0.1:{port}/hello.txt?x=1#frag'; \
         curl -sS --noproxy '' -H 'Proxy-Authorization: Basic eDp5' -H 'Keep-Alive: 5' \
           -H 'Connection: keep-alive, X-Secret' -H 'X-Secret: 1' -H 'X-Kept: yes' \
           http://127.0.0.1:{port}/headers"
    );
    let r = exec(
        &client,
        json!({"cmd": cmd, "network": {"allow": [format!("127.0.0.1:{port}")]}}),
    )
    .await;
    let out = text(&r);
    assert!(out.contains("hello-from-http-server"), "{out}");
    assert!(out.contains("GET /headers HTTP/1.1"), "{out}");
    assert!(out.contains(&format!("Host: 127.0.0.1:{port}")), "{out}");
    assert!(out.contains("Connection: close"), "{out}");
    assert!(out.contains("X-Kept: yes"), "{out}");
    for dropped in [
        "Proxy-Connection",
        "Proxy-Authorization",
        "Keep-Alive",
        "X-Secret",
    ] {
        assert!(!out.contains(dropped), "{dropped} went upstream: {out}");
    }
    assert_eq!(
        upstream.requests(),
        ["GET /hello.txt?x=1 HTTP/1.1", "GET /headers HTTP/1.1"],
        "{out}"
    );
}

/// A client that keeps its proxy connection alive cannot send a second request through the
/// first one's upstream: the upstream hears one request and closes; the second, pipelined
/// behind it to another host, goes nowhere (a new connection would be judged anew).
#[tokio::test]
async fn a_second_request_on_a_kept_connection_does_not_reach_the_first_upstream() {
    let dir = scratch("keepalive");
    let root = dir.join("www");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("a.txt"), "first\n").unwrap();
    let upstream = PythonServer::start(&root);
    let port = upstream.port;
    let (other, other_port) = unreached_listener();
    let script = format!(
        r#"
import socket
s = socket.create_connection(("127.0.0.1", 3128))
s.settimeout(5)
s.sendall(b"GET http://127.0.0.1:{port}/a.txt HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
          b"GET http://127.0.0.1:{other_port}/b HTTP/1.1\r\nHost: 127.0.0.1:{other_port}\r\n\r\n")
got = b""
try:
    while chunk := s.recv(65536):
        got += chunk
except socket.timeout:
    print("timed out")
print("responses", got.count(b"HTTP/1."))
"#
    );
    std::fs::write(dir.join("pipeline.py"), script).unwrap();
    let (client, _) = server(&dir, &["--structured"], &[]).await;
    let r = exec(
        &client,
        json!({
            "cmd": "python3 pipeline.py",
            "workdir": dir.display().to_string(),
            "network": {"allow": [format!("127.0.0.1:{port}")]},
            "yield_time_ms": 15000,
        }),
    )
    .await;
    let out = text(&r);
    assert!(out.contains("responses 1"), "{out}");
    assert!(
        !out.contains("timed out"),
        "the upstream did not close: {out}"
    );
    assert_eq!(upstream.requests(), ["GET /a.txt HTTP/1.1"], "{out}");
    assert!(other.accept().is_err(), "the second host was reached");
    assert_eq!(structured(&r)["exit_code"], 0, "{out}");
}

/// `NO_PROXY` must not send an allowlisted loopback address around the proxy (to the
/// namespace's own, empty, loopback): curl and Python, with the proxy variables as uexec
/// sets them, reach it.
#[tokio::test]
async fn an_allowlisted_loopback_address_goes_through_the_proxy_despite_no_proxy() {
    let dir = scratch("noproxy");
    let port = http_server("hello-without-noproxy-flag");
    let (client, _) = server(&dir, &["--structured"], &[]).await;
    let cmd = format!(
        "echo \"no_proxy=[$NO_PROXY]\"; curl -sS http://127.0.0.1:{port}/; echo; \
         python3 -c \"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:{port}/').read().decode())\""
    );
    let r = exec(
        &client,
        json!({"cmd": cmd, "network": {"allow": [format!("127.0.0.1:{port}")]}}),
    )
    .await;
    let out = text(&r);
    assert_eq!(
        out.matches("hello-without-noproxy-flag").count(),
        2,
        "{out}"
    );
    let no_proxy = out
        .lines()
        .find_map(|l| l.strip_prefix("no_proxy="))
        .unwrap();
    assert!(
        !no_proxy.contains("127.0.0.1") && !no_proxy.contains("localhost"),
        "{no_proxy}"
    );
    assert!(no_proxy.contains("::1"), "{no_proxy}");
    // An allowlist without loopback keeps the namespace's own loopback off the proxy.
    let r = exec(
        &client,
        json!({"cmd": "echo \"no_proxy=[$NO_PROXY]\"", "network": {"allow": ["example.com"]}}),
    )
    .await;
    assert!(
        text(&r).contains("no_proxy=[localhost,127.0.0.1,::1]"),
        "{}",
        text(&r)
    );
}

/// With the network off, or on an allowlist, a refused connection to a loopback port is the
/// sandbox's doing (the namespace's loopback is empty): `denied: "likely"`, the line as
/// evidence. (With the network off, seccomp refuses Python's socket outright.)
#[tokio::test]
async fn a_refused_connection_to_loopback_in_the_sandbox_is_likely_the_sandbox() {
    let dir = scratch("refused");
    let port = http_server("unreachable");
    let (client, _) = server(&dir, &["--structured"], &[]).await;
    let evidence_of = |r: &rmcp::model::CallToolResult| {
        let s = structured(r)["sandbox"].clone();
        assert_eq!(s["denied"], "likely", "{}\n{s}", text(r));
        assert!(text(r).contains("ask the user to widen"), "{}", text(r));
        s["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e.as_str().map(str::to_owned))
            .collect::<Vec<_>>()
    };
    let cmd = format!("curl -sS -m 3 http://127.0.0.1:{port}/");
    let r = exec(&client, json!({"cmd": cmd, "network": "off"})).await;
    let evidence = evidence_of(&r);
    assert!(
        evidence.iter().any(|e| e.starts_with("curl: (7)")),
        "{evidence:?}"
    );
    // Around the proxy on an allowlist: the namespace's loopback refuses.
    let cmd = format!(
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}))\" 2>&1 | tail -n 1"
    );
    let r = exec(
        &client,
        json!({"cmd": cmd, "network": {"allow": ["example.com"]}}),
    )
    .await;
    let evidence = evidence_of(&r);
    assert!(
        evidence
            .iter()
            .any(|e| e.starts_with("ConnectionRefusedError")),
        "{evidence:?}"
    );
    // An allowed host that refuses the proxy is the host's doing: the proxy's 502 is no
    // evidence.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cmd = format!("curl -sS --noproxy '' http://127.0.0.1:{closed}/");
    let r = exec(
        &client,
        json!({"cmd": cmd, "network": {"allow": [format!("127.0.0.1:{closed}")]}}),
    )
    .await;
    assert!(text(&r).contains("uexec: cannot reach"), "{}", text(&r));
    assert_eq!(structured(&r)["sandbox"]["denied"], false, "{}", text(&r));
}

/// The sandbox base of this test process's user (`XDG_RUNTIME_DIR` is unset for the servers).
fn sandbox_base() -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self").unwrap().uid();
    std::env::temp_dir().join(format!("uexec-sandbox-{uid}"))
}

/// Entries named `proxy-*` in the sandbox base.
fn proxy_files() -> Vec<String> {
    std::fs::read_dir(sandbox_base())
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| name.starts_with("proxy-"))
                .collect()
        })
        .unwrap_or_default()
}

/// The proxy's port is handed over on an inherited descriptor, never through a socket file
/// another user or a writing command could swap: while allowlisted sessions run (one whose
/// launcher hands the port over, one without the network namespace, which never does), the
/// sandbox base holds no `proxy-*` file. And the command itself holds no socket of uexec's.
#[tokio::test]
async fn the_proxy_hand_over_leaves_no_socket_file_and_no_descriptor_in_the_command() {
    let dir = scratch("handover");
    let port = http_server("handed-over");
    let allow = format!("127.0.0.1:{port}");
    let (first, _) = server(&dir, &["--structured", "--network-allow", &allow], &[]).await;
    let m = marker();
    let cmd = format!(
        "curl -sS --noproxy '' http://127.0.0.1:{port}/; echo; \
         for f in /proc/$$/fd/*; do echo \"fd $f -> $(readlink $f)\"; done; sleep {m}"
    );
    let r = exec(&first, json!({"cmd": cmd, "yield_time_ms": 1000})).await;
    let out = text(&r);
    assert!(out.contains("handed-over"), "{out}");
    assert!(structured(&r)["session_id"].is_i64(), "{out}");
    assert!(
        !out.contains("socket:"),
        "the command holds a socket: {out}"
    );
    assert!(proxy_files().is_empty(), "{:?}", proxy_files());

    // Best effort without the network namespace: nothing is handed over, and still no file.
    let (second, _) = server(
        &dir,
        &[
            "--structured",
            "--network-allow",
            &allow,
            "--sandbox-fallback",
            "best-effort",
        ],
        &[("UEXEC_SANDBOX_FAULT", "network-namespace")],
    )
    .await;
    let m2 = marker();
    let r = exec(
        &second,
        json!({"cmd": format!("sleep {m2}"), "yield_time_ms": 250}),
    )
    .await;
    assert!(structured(&r)["session_id"].is_i64(), "{}", text(&r));
    assert_eq!(
        structured(&r)["sandbox"]["missing_layers"],
        json!(["network-namespace"]),
        "{}",
        text(&r)
    );
    eventually("the sleep", Duration::from_secs(5), || {
        !procs_with(&m2).is_empty()
    })
    .await;
    assert!(proxy_files().is_empty(), "{:?}", proxy_files());
    drop((first, second));
    wait_all_gone(&[m, m2], "the sessions to end with their servers").await;
}

/// The launcher started ahead takes an allowlisted command too: its proxy descriptor travels
/// with the stdio in the launch message, and the proxy works.
#[tokio::test]
async fn an_allowlisted_command_runs_in_the_launcher_started_ahead() {
    let dir = scratch("warmproxy");
    let port = http_server("warm-and-proxied");
    let allow = format!("127.0.0.1:{port}");
    let (client, pid) = server(&dir, &["--structured", "--network-allow", &allow], &[]).await;
    let r = exec(&client, json!({"cmd": "true"})).await;
    assert_eq!(structured(&r)["exit_code"], 0, "{}", text(&r));
    let mut ahead = Vec::new();
    eventually("a launcher waiting", Duration::from_secs(5), || {
        ahead = waiting_launchers(pid);
        ahead.len() == 1
    })
    .await;
    let m = marker();
    let cmd = format!("curl -sS --noproxy '' http://127.0.0.1:{port}/; echo; sleep {m}");
    let r = exec(&client, json!({"cmd": cmd, "yield_time_ms": 1000})).await;
    assert!(text(&r).contains("warm-and-proxied"), "{}", text(&r));
    let sleeper: Vec<u32> = procs_with(&m)
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .unwrap_or_default()
                .starts_with(b"sleep\0")
        })
        .collect();
    assert_eq!(sleeper.len(), 1, "{sleeper:?}");
    assert!(
        descends_from(sleeper[0], ahead[0]),
        "the command runs under the launcher that was waiting ({})",
        ahead[0]
    );
    let id = structured(&r)["session_id"].as_i64().expect("running");
    crate::helpers::call(&client, "terminate_session", json!({"session_id": id})).await;
    wait_all_gone(&[m], "the command").await;
}

/// A cold start (no launcher waiting: the one started ahead was killed) passes the proxy's
/// end as fd 3 of the launcher it execs, and the proxy works as well.
#[tokio::test]
async fn an_allowlisted_command_started_cold_gets_the_proxy_on_fd_3() {
    let dir = scratch("coldproxy");
    let port = http_server("cold-and-proxied");
    let allow = format!("127.0.0.1:{port}");
    let (client, pid) = server(&dir, &["--structured", "--network-allow", &allow], &[]).await;
    exec(&client, json!({"cmd": "true"})).await;
    let mut ahead = Vec::new();
    eventually("a launcher waiting", Duration::from_secs(5), || {
        ahead = waiting_launchers(pid);
        ahead.len() == 1
    })
    .await;
    crate::helpers::send_signal(ahead[0], "KILL");
    eventually("the killed launcher reaped", Duration::from_secs(5), || {
        crate::helpers::proc_stat(ahead[0]).is_none()
    })
    .await;
    let m = marker();
    let cmd = format!("curl -sS --noproxy '' http://127.0.0.1:{port}/; echo; sleep {m}");
    let r = exec(&client, json!({"cmd": cmd, "yield_time_ms": 1000})).await;
    assert!(text(&r).contains("cold-and-proxied"), "{}", text(&r));
    let launchers: Vec<u32> = procs_with(&m)
        .into_iter()
        .filter(|p| {
            let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline).contains("__sandbox-exec\0--layers")
        })
        .collect();
    assert!(
        !launchers.is_empty(),
        "the command runs under a cold launcher"
    );
    for launcher in launchers {
        let cmdline = std::fs::read(format!("/proc/{launcher}/cmdline")).unwrap_or_default();
        assert!(
            String::from_utf8_lossy(&cmdline).contains("\0--proxy-fd\u{0}3\0"),
            "{}",
            String::from_utf8_lossy(&cmdline)
        );
    }
    let id = structured(&r)["session_id"].as_i64().expect("running");
    crate::helpers::call(&client, "terminate_session", json!({"session_id": id})).await;
    wait_all_gone(&[m], "the command").await;
}
