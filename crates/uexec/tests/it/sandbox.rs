//! Sandboxed commands (`--sandbox`, `--network`, the `sandbox`/`network` arguments) on the
//! real kernel: Landlock, seccomp and namespaces, seen through a real MCP client.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::{json, Value};

use crate::helpers::{
    args, call, eventually, marker, procs_with, rand_suffix, send_signal, structured, text,
    wait_all_gone, Client, Recorder, UEXEC,
};

/// A fresh directory for one test.
pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "uexec-sbx-{name}-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::create_dir_all(dir.join("home")).unwrap();
    dir
}

/// `uexec mcp ARGS` in `dir` with `env` set; its client and pid.
pub(crate) async fn server(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> (Client, u32) {
    let mut cmd = tokio::process::Command::new(UEXEC);
    cmd.arg("mcp")
        .args(extra)
        .current_dir(dir)
        .env("HOME", dir.join("home"))
        .env_remove("XDG_RUNTIME_DIR");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let transport = TokioChildProcess::new(cmd).unwrap();
    let pid = transport.id().unwrap_or(0);
    let client = Recorder::default().serve(transport).await.unwrap();
    (client, pid)
}

pub(crate) async fn exec(client: &Client, arguments: Value) -> rmcp::model::CallToolResult {
    let mut arguments = arguments;
    arguments["login"] = json!(false);
    call(client, "exec_command", arguments).await
}

/// The error text of a call that must fail.
pub(crate) async fn exec_error(client: &Client, arguments: Value) -> String {
    let r = client
        .call_tool(CallToolRequestParams::new("exec_command").with_arguments(args(arguments)))
        .await;
    match r {
        Err(e) => e.to_string(),
        Ok(r) => {
            assert_eq!(r.is_error, Some(true), "must fail: {}", text(&r));
            text(&r)
        }
    }
}

#[tokio::test]
async fn read_only_writes_fail_outside_the_private_tmp_and_are_reported() {
    let dir = scratch("ro");
    let (client, _) = server(&dir, &["--extended", "--sandbox", "read-only"], &[]).await;
    let outside = dir.join("outside");
    let cmd = format!(
        "echo sandbox=$UEXEC_SANDBOX; echo \"tmp=$TMPDIR\"; touch {0}; touch \"$TMPDIR/in-tmp\" && echo tmp-ok; \
         echo x > /dev/null && echo devnull-ok",
        outside.display()
    );
    let r = exec(&client, json!({"cmd": cmd})).await;
    let out = text(&r);
    assert!(!outside.exists(), "read-only wrote {}", outside.display());
    assert!(out.contains("sandbox=read-only"), "{out}");
    assert!(out.contains("Permission denied"), "{out}");
    assert!(
        out.contains("tmp-ok") && out.contains("devnull-ok"),
        "{out}"
    );
    assert!(out.contains("ask the user to widen"), "{out}");
    let tmp = out
        .lines()
        .find_map(|l| l.strip_prefix("tmp="))
        .map(PathBuf::from)
        .unwrap();
    assert!(tmp.starts_with(std::env::temp_dir()), "{}", tmp.display());
    eventually("the private tmp to go", Duration::from_secs(5), || {
        !tmp.exists()
    })
    .await;
    let s = structured(&r)["sandbox"].clone();
    assert_eq!(s["profile"], "read-only", "{s}");
    assert_eq!(s["denied"], "likely", "{s}");
    assert_eq!(
        s["layers"],
        json!(["namespaces", "landlock", "seccomp"]),
        "{s}"
    );
    assert!(
        s["evidence"][0]
            .as_str()
            .unwrap()
            .contains(&outside.display().to_string()),
        "{s}"
    );
    // The server's policy is a ceiling: the model cannot ask its way out of it.
    let e = exec_error(
        &client,
        json!({"cmd": format!("touch {}", outside.display()), "sandbox": "danger-full-access", "login": false}),
    )
    .await;
    assert!(!outside.exists(), "a call widened the sandbox: {e}");
    assert!(e.contains("sandbox: \"danger-full-access\""), "{e}");
    // Unsandboxed, the same write works: the test can tell the difference.
    std::fs::write(&outside, b"").unwrap();
    assert!(outside.exists());
}

#[tokio::test]
async fn workspace_write_keeps_git_read_only() {
    let dir = scratch("ww");
    let ws = dir.join("ws");
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    std::fs::create_dir_all(ws.join("home")).unwrap();
    // The workspace is the server's working directory.
    let (client, _) = server(&ws, &["--extended"], &[]).await;
    let r = exec(
        &client,
        json!({
            "cmd": "touch mine && echo wrote; touch .git/HEAD2",
            "workdir": ws.display().to_string(),
            "sandbox": "workspace-write",
        }),
    )
    .await;
    let out = text(&r);
    assert!(ws.join("mine").exists(), "{out}");
    assert!(!ws.join(".git/HEAD2").exists(), "{out}");
    assert!(out.contains("Read-only file system"), "{out}");
    assert_eq!(structured(&r)["sandbox"]["denied"], "likely");
}

#[tokio::test]
async fn network_off_cannot_reach_a_host_loopback_listener() {
    let dir = scratch("net");
    let (listener, port) = unreached_listener();
    let (client, _) = server(&dir, &["--extended"], &[]).await;
    let cmd = format!(
        "echo disabled=$UEXEC_SANDBOX_NETWORK_DISABLED; curl -sS -m 3 -o /dev/null http://127.0.0.1:{port}/; echo rc=$?"
    );
    let r = exec(&client, json!({"cmd": cmd.clone(), "network": "off"})).await;
    let out = text(&r);
    assert!(out.contains("disabled=1"), "{out}");
    assert!(!out.contains("rc=0"), "{out}");
    assert!(
        listener.accept().is_err(),
        "the sandboxed command reached the host: {out}"
    );
    assert_eq!(structured(&r)["sandbox"]["network"], "off");
    // With the network on, the same command does reach it.
    let on = cmd.replace("-m 3", "-m 1");
    let r = exec(&client, json!({"cmd": on, "network": "on"})).await;
    let accepted = listener.accept();
    assert!(accepted.is_ok(), "{}", text(&r));
}

/// `setsid` escapes the process group; the pid namespace still takes it.
#[tokio::test]
async fn a_setsid_job_dies_on_terminate() {
    let dir = scratch("setsid");
    let (client, _) = server(&dir, &["--sandbox", "read-only"], &[]).await;
    let (job, main) = (marker(), marker());
    let r = exec(
        &client,
        json!({"cmd": format!("setsid sleep {job} & sleep {main}"), "yield_time_ms": 250}),
    )
    .await;
    let id = structured(&r)["session_id"].as_i64().expect("running");
    eventually("both sleeps", Duration::from_secs(5), || {
        !procs_with(&job).is_empty() && !procs_with(&main).is_empty()
    })
    .await;
    call(&client, "terminate_session", json!({"session_id": id})).await;
    wait_all_gone(&[job, main], "the setsid job to die with its session").await;
}

#[tokio::test]
async fn a_setsid_job_dies_when_uexec_is_killed() {
    let dir = scratch("kill");
    let (client, pid) = server(&dir, &["--sandbox", "read-only"], &[]).await;
    let job = marker();
    exec(
        &client,
        json!({"cmd": format!("setsid sleep {job} & sleep {}", marker()), "yield_time_ms": 250}),
    )
    .await;
    eventually("the job", Duration::from_secs(5), || {
        !procs_with(&job).is_empty()
    })
    .await;
    send_signal(pid, "KILL");
    wait_all_gone(&[job], "the setsid job to die with uexec").await;
}

#[tokio::test]
async fn ctrl_c_works_in_a_sandboxed_pty() {
    let dir = scratch("ctrlc");
    let (client, _) = server(&dir, &["--sandbox", "read-only"], &[]).await;
    let m = marker();
    let r = exec(
        &client,
        json!({"cmd": format!("trap 'echo caught' INT; sleep {m}; echo after"), "tty": true,
               "yield_time_ms": 250}),
    )
    .await;
    let id = structured(&r)["session_id"].as_i64().expect("running");
    eventually("the sleep", Duration::from_secs(5), || {
        !procs_with(&m).is_empty()
    })
    .await;
    let r = call(
        &client,
        "write_stdin",
        json!({"session_id": id, "chars": "\u{3}", "yield_time_ms": 5000}),
    )
    .await;
    // The command handled its Ctrl-C and carried on: the launcher did not die of it.
    assert_eq!(structured(&r)["exit_code"], 0, "{}", text(&r));
    assert!(text(&r).contains("caught\r\nafter"), "{}", text(&r));
    wait_all_gone(&[m], "the interrupted sleep").await;
}

#[tokio::test]
async fn a_missing_layer_is_refused_by_default_and_skipped_with_best_effort() {
    let dir = scratch("fault");
    let outside = dir.join("outside");
    let fault = [("UEXEC_SANDBOX_FAULT", "namespaces")];
    let (client, _) = server(&dir, &["--extended", "--sandbox", "read-only"], &fault).await;
    let e = exec_error(&client, json!({"cmd": "true"})).await;
    assert!(
        e.contains(
            "sandbox layer namespaces is unavailable on this machine: Operation not permitted"
        ),
        "{e}"
    );
    let (client, _) = server(
        &dir,
        &[
            "--extended",
            "--sandbox",
            "read-only",
            "--sandbox-fallback",
            "best-effort",
        ],
        &fault,
    )
    .await;
    let r = exec(
        &client,
        json!({"cmd": format!("touch {}; echo ran", outside.display())}),
    )
    .await;
    assert!(text(&r).contains("ran"), "{}", text(&r));
    assert!(!outside.exists(), "Landlock still applies");
    let s = structured(&r)["sandbox"].clone();
    assert_eq!(s["layers"], json!(["landlock", "seccomp"]), "{s}");
    assert_eq!(s["missing_layers"], json!(["namespaces"]), "{s}");
}

#[tokio::test]
async fn bad_sandbox_input_names_the_field() {
    let dir = scratch("bad");
    for (flags, field) in [
        (vec!["--sandbox", "readonly"], "--sandbox"),
        (vec!["--network", "maybe"], "--network"),
        (
            vec!["--writable-root", "/no/such/dir/here"],
            "--writable-root",
        ),
        (
            vec!["--sandbox-fallback", "sometimes"],
            "--sandbox-fallback",
        ),
        (vec!["--network-allow", "http://x"], "--network-allow"),
        (vec!["--network-denial", "ignore"], "--network-denial"),
    ] {
        let out = std::process::Command::new(UEXEC)
            .arg("mcp")
            .args(&flags)
            .current_dir(&dir)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flags:?}");
        assert!(err.contains(field), "{flags:?}: {err}");
    }
    let (client, _) = server(&dir, &["--extended"], &[]).await;
    for (a, field) in [
        (json!({"cmd": "true", "sandbox": "readonly"}), "sandbox"),
        (
            json!({"cmd": "true", "network": {"allow": ["a b"]}}),
            "network.allow[0]",
        ),
    ] {
        let e = exec_error(&client, a).await;
        assert!(e.contains(&format!("{field}:")), "{e}");
    }
}

#[test]
fn doctor_says_what_this_machine_supports() {
    let out = std::process::Command::new(UEXEC)
        .arg("doctor")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Landlock: yes (ABI"), "{text}");
    assert!(text.contains("network namespaces: yes"), "{text}");
    let out = std::process::Command::new(UEXEC)
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["seccomp"]["available"], true, "{v}");
    let help = std::process::Command::new(UEXEC)
        .arg("--help")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&help.stdout).contains("doctor"));
}

/// The workdir may contain the sandbox's runtime directory (a workdir of /tmp): the
/// session's own private tmp must stay writable.
#[tokio::test]
async fn workspace_write_in_the_tmp_dir_keeps_its_private_tmp_writable() {
    let dir = scratch("tmpdir");
    let tmp = std::env::temp_dir().display().to_string();
    let (client, _) = server(&dir, &["--extended", "--writable-root", &tmp], &[]).await;
    let r = exec(
        &client,
        json!({
            "cmd": "touch \"$TMPDIR/x\" && echo tmp-ok",
            "workdir": std::env::temp_dir().display().to_string(),
            "sandbox": "workspace-write",
        }),
    )
    .await;
    assert!(text(&r).contains("tmp-ok"), "{}", text(&r));
}

/// A host-side listener that nobody may reach (accepts nothing by itself) and its port.
pub(crate) fn unreached_listener() -> (std::net::TcpListener, u16) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

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
    let (client, _) = server(&dir, &["--extended"], &[]).await;
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
    let (client, _) = server(&dir, &["--extended"], &[]).await;
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
    let (client, _) = server(&dir, &["--extended"], &[]).await;
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
    let (client, _) = server(&dir, &["--extended", "--network-allow", &allow_flag], &[]).await;
    let m = marker();
    let cmd = format!("curl -sS --noproxy '' http://127.0.0.1:{other_port}/; sleep {m}");
    let e = exec_error(&client, json!({"cmd": cmd, "yield_time_ms": 10000})).await;
    assert_denied(&e, &other);
    wait_all_gone(&[m], "the denied session to be terminated").await;
}

/// What a uexec killed with SIGKILL left in the runtime directory goes at the next start.
#[tokio::test]
async fn private_tmps_of_dead_servers_are_swept() {
    use std::os::unix::fs::MetadataExt;
    let dir = scratch("sweep");
    let uid = std::fs::metadata(&dir).unwrap().uid();
    let base = std::env::temp_dir().join(format!("uexec-sandbox-{uid}"));
    // No process has this pid (above the kernel's pid_max).
    let stale = base.join(format!("4294967-{}", rand_suffix()));
    std::fs::create_dir_all(stale.join("left-behind")).unwrap();
    let (client, _) = server(&dir, &["--sandbox", "read-only"], &[]).await;
    exec(&client, json!({"cmd": "true"})).await;
    assert!(!stale.exists(), "{} is still there", stale.display());
}

/// Job control in a sandboxed PTY: an interactive shell stops a foreground job on Ctrl-Z.
#[tokio::test]
async fn job_control_works_in_a_sandboxed_pty() {
    let dir = scratch("jobs");
    let (client, _) = server(&dir, &["--extended", "--sandbox", "read-only"], &[]).await;
    let r = exec(
        &client,
        json!({"cmd": "bash --norc --noprofile -i", "tty": true, "yield_time_ms": 10000,
               "until": {"pattern": "\\$ |# "}}),
    )
    .await;
    let id = structured(&r)["session_id"].as_i64().expect("running");
    let m = marker();
    let write = |chars: String, pattern: &'static str| {
        call(
            &client,
            "write_stdin",
            json!({"session_id": id, "chars": chars, "yield_time_ms": 10000,
                   "until": {"pattern": pattern}}),
        )
    };
    write(format!("sleep {m}\n"), "sleep").await;
    eventually("the job", Duration::from_secs(5), || {
        !procs_with(&m).is_empty()
    })
    .await;
    let r = write("\u{1a}".into(), "Stopped").await;
    assert_eq!(structured(&r)["reason"], "matched", "{}", text(&r));
    let r = write("jobs; echo job-$UEXEC_SANDBOX\n".into(), "job-read-only").await;
    assert!(text(&r).contains("Stopped"), "{}", text(&r));
    call(&client, "terminate_session", json!({"session_id": id})).await;
    wait_all_gone(&[m], "the stopped job").await;
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
        "--extended",
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
    let (client, _) = server(&dir, &["--extended", "--network-allow", &allow_flag], &[]).await;
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

/// The launchers `server` started ahead and left waiting (`uexec __sandbox-exec --warm`).
pub(crate) fn waiting_launchers(server: u32) -> Vec<u32> {
    crate::helpers::children_of(server)
        .into_iter()
        .filter(|p| {
            let cmdline = std::fs::read(format!("/proc/{}/cmdline", p.pid)).unwrap_or_default();
            cmdline.ends_with(b"__sandbox-exec\0--warm\0")
        })
        .map(|p| p.pid)
        .collect()
}

/// Whether `ancestor` is `pid`'s parent, grandparent, ...
pub(crate) fn descends_from(pid: u32, ancestor: u32) -> bool {
    let mut at = pid;
    while let Some(stat) = crate::helpers::proc_stat(at) {
        if stat.ppid == ancestor {
            return true;
        }
        if stat.ppid <= 1 {
            return false;
        }
        at = stat.ppid;
    }
    false
}

#[tokio::test]
async fn a_sandboxed_command_runs_in_the_launcher_started_ahead() {
    let dir = scratch("warm");
    let (client, pid) = server(&dir, &["--sandbox", "read-only"], &[]).await;
    // The first sandboxed command probes the machine, which starts a launcher waiting.
    let r = exec(&client, json!({"cmd": "true"})).await;
    assert_eq!(structured(&r)["exit_code"], 0, "{}", text(&r));
    let mut ahead = Vec::new();
    eventually("a launcher waiting", Duration::from_secs(5), || {
        ahead = waiting_launchers(pid);
        ahead.len() == 1
    })
    .await;
    let m = marker();
    let r = exec(
        &client,
        json!({"cmd": format!("echo \"in $PWD as $UEXEC_SANDBOX\"; sleep {m}"), "yield_time_ms": 250}),
    )
    .await;
    let id = structured(&r)["session_id"].as_i64().expect("running");
    // Its stdout is the session's pipe, its directory the call's, its environment the
    // command's (not the launcher's empty one).
    let expected = format!("in {} as read-only", dir.canonicalize().unwrap().display());
    assert!(text(&r).contains(&expected), "{}", text(&r));
    // (A cold launcher's command line holds the command too: pick the sleep itself.)
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
    // The next one is already waiting.
    eventually("the next launcher waiting", Duration::from_secs(5), || {
        waiting_launchers(pid).iter().any(|p| *p != ahead[0])
    })
    .await;
    call(&client, "terminate_session", json!({"session_id": id})).await;
    wait_all_gone(&[m], "the command").await;
    // A server that goes takes its waiting launcher along.
    let next = waiting_launchers(pid);
    send_signal(pid, "KILL");
    eventually("the waiting launcher to go", Duration::from_secs(5), || {
        next.iter()
            .all(|p| crate::helpers::proc_stat(*p).is_none_or(|s| s.state == 'Z'))
    })
    .await;
}

/// A launch message as the engine writes it (`uexec_core::sandbox::warm`): magic, body
/// length, tty flag, counts, NUL-terminated cwd, arguments and environment.
fn launch_message(cwd: &str, args: &[&str], env: &[&str]) -> Vec<u8> {
    let mut body = vec![0u8];
    body.extend((args.len() as u32).to_le_bytes());
    body.extend((env.len() as u32).to_le_bytes());
    for s in std::iter::once(&cwd).chain(args).chain(env) {
        body.extend(s.as_bytes());
        body.push(0);
    }
    let mut message = b"UXW1".to_vec();
    message.extend((body.len() as u32).to_le_bytes());
    message.extend(body);
    message
}

/// `uexec __sandbox-exec --warm` with a socket as stdin: the engine's end, and the process.
fn warm_launcher() -> (std::os::unix::net::UnixStream, std::process::Child) {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let child = std::process::Command::new(UEXEC)
        .args(["__sandbox-exec", "--warm"])
        .stdin(std::os::fd::OwnedFd::from(theirs))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    (ours, child)
}

/// Sends `message` with three descriptors (stdio) attached to its first byte.
fn send_launch(socket: &std::os::unix::net::UnixStream, message: &[u8]) {
    use std::os::fd::AsRawFd;
    let null = std::fs::File::open("/dev/null").unwrap();
    let fd = null.as_raw_fd();
    uexec_sys::send_with_fds(socket.as_raw_fd(), &message[..1], &[fd, fd, fd]).unwrap();
    std::io::Write::write_all(&mut &*socket, &message[1..]).unwrap();
}

fn read_report(socket: &std::os::unix::net::UnixStream) -> (u32, i32) {
    let mut report = [0u8; 8];
    std::io::Read::read_exact(&mut &*socket, &mut report).unwrap();
    (
        u32::from_ne_bytes(report[..4].try_into().unwrap()),
        i32::from_ne_bytes(report[4..].try_into().unwrap()),
    )
}

#[test]
fn a_waiting_launcher_reports_a_bad_launch_and_leaves_quietly_without_one() {
    // No launch: the engine's end closes, the launcher exits 0 having run nothing.
    let (socket, mut child) = warm_launcher();
    drop(socket);
    assert_eq!(child.wait().unwrap().code(), Some(0));

    // A working directory that is gone: the report says so (stage 2, ENOENT), as a cold
    // spawn's does, and nothing runs.
    let (socket, mut child) = warm_launcher();
    let witness = std::env::temp_dir().join(format!("uexec-warm-{}", rand_suffix()));
    let touch = format!("/usr/bin/touch {}", witness.display());
    let argv: Vec<&str> = ["--layers", "", "--"]
        .into_iter()
        .chain(touch.split(' '))
        .collect();
    send_launch(
        &socket,
        &launch_message("/nonexistent/dir", &argv, &["PATH=/usr/bin:/bin"]),
    );
    assert_eq!(read_report(&socket), (2, libc::ENOENT));
    assert_eq!(child.wait().unwrap().code(), Some(126));
    assert!(!witness.exists());

    // A message that is not one: a protocol error (stage 1, EPROTO).
    let (socket, mut child) = warm_launcher();
    let mut bad = launch_message("/", &argv, &[]);
    bad[..4].copy_from_slice(b"NOPE");
    send_launch(&socket, &bad);
    assert_eq!(read_report(&socket), (1, libc::EPROTO));
    assert_eq!(child.wait().unwrap().code(), Some(126));

    // A good one runs the command (no layers: the launcher execs it) after a zero report.
    let (socket, mut child) = warm_launcher();
    send_launch(
        &socket,
        &launch_message("/", &argv, &["PATH=/usr/bin:/bin"]),
    );
    assert_eq!(read_report(&socket), (0, 0));
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert!(witness.exists());
    let _ = std::fs::remove_file(&witness);
}
