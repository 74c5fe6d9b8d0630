//! `uexec daemon` and `uexec mcp --daemon`: sessions that outlive their MCP server, a socket
//! only this user can use, a versioned hello, and nothing left behind when it is killed.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::{json, Value};

use crate::helpers::{
    call, eventually, marker, procs_with, structured, text, Client, Recorder, UEXEC,
};
use crate::place::DaemonPlace as Place;

/// Starts `echo up; sleep MARKER`, still running when the call returns: its id and marker.
pub(crate) async fn start_sleeper(client: &Client) -> (i64, String) {
    let m = marker();
    let r = call(
        client,
        "exec_command",
        json!({"cmd": format!("echo up; sleep {m}"), "login": false, "yield_time_ms": 500}),
    )
    .await;
    let id = structured(&r)["session_id"]
        .as_i64()
        .unwrap_or_else(|| panic!("running: {}", text(&r)));
    (id, m)
}

#[tokio::test]
async fn with_linger_forever_a_session_outlives_its_mcp_server_and_the_next_one_finds_it() {
    let place = Place::new("daemon");
    let client = place
        .client(&["--codex-compat", "--linger", "forever"])
        .await;
    let (id, m) = start_sleeper(&client).await;
    client.cancel().await.unwrap(); // the agent's MCP server exits
    assert_eq!(procs_with(&m).len(), 1, "the session runs on in the daemon");

    let again = place.client(&["--codex-compat"]).await;
    let listed = call(&again, "list_sessions", json!({})).await;
    let ids: Vec<i64> = crate::helpers::session_ids(&listed);
    assert_eq!(
        ids,
        [id],
        "same owner (same working directory): {}",
        text(&listed)
    );
    // Another owner sees nothing of it.
    let other = place
        .client(&["--codex-compat", "--owner", "someone-else"])
        .await;
    let listed = call(&other, "list_sessions", json!({})).await;
    assert_eq!(structured(&listed)["sessions"], json!([]));
    let r = call(&other, "terminate_session", json!({"session_id": id})).await;
    assert!(
        text(&r).contains(&format!("Unknown process id {id}")),
        "{}",
        text(&r)
    );

    call(&again, "terminate_session", json!({"session_id": id})).await;
    eventually(
        "the session's process to go",
        Duration::from_secs(10),
        || procs_with(&m).is_empty(),
    )
    .await;
    again.cancel().await.unwrap();
    other.cancel().await.unwrap();
    place.stop();
}

#[tokio::test]
async fn commands_get_the_clients_directory_and_environment() {
    let place = Place::new("daemon");
    let mut cmd = tokio::process::Command::new(UEXEC);
    cmd.args(["mcp", "--daemon", "--codex-compat"])
        .current_dir(&place.cwd)
        .env("XDG_RUNTIME_DIR", &place.runtime)
        .env("HOME", place.cwd.join("home"))
        .env("UEXEC_IT_CLIENT_VAR", "from-the-client")
        .env("UEXEC_IT_API_KEY", "must-not-leak");
    let client = Recorder::default()
        .serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap();
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "pwd; echo \"$UEXEC_IT_CLIENT_VAR\"; echo \"key=${UEXEC_IT_API_KEY:-absent}\"", "login": false}),
    )
    .await;
    let want = format!(
        "{}\nfrom-the-client\nkey=absent\n",
        place.cwd.canonicalize().unwrap().display()
    );
    assert_eq!(structured(&r)["output"], want.as_str(), "{}", text(&r));
    client.cancel().await.unwrap();
    place.stop();
}

#[tokio::test]
async fn killing_the_daemon_kills_its_sessions_and_a_new_one_starts() {
    let place = Place::new("daemon");
    let client = place.client(&["--codex-compat"]).await;
    let (_, m) = start_sleeper(&client).await;
    let pid = place.daemon_pid().expect("the daemon wrote its pid");
    crate::helpers::send_signal(pid, "KILL");
    eventually(
        "the last will to kill the session",
        Duration::from_secs(10),
        || procs_with(&m).is_empty(),
    )
    .await;
    // The client's next call fails clearly (its daemon is gone)...
    let gone = client
        .call_tool(
            rmcp::model::CallToolRequestParams::new("list_sessions")
                .with_arguments(crate::helpers::args(json!({}))),
        )
        .await;
    assert!(gone.is_err(), "the connection to the dead daemon is closed");
    // ...and the next client starts a new daemon.
    let fresh = place.client(&["--codex-compat"]).await;
    let r = call(
        &fresh,
        "exec_command",
        json!({"cmd": "echo again", "login": false}),
    )
    .await;
    assert_eq!(structured(&r)["output"], "again\n");
    assert_ne!(place.daemon_pid(), Some(pid));
    fresh.cancel().await.unwrap();
    place.stop();
}

/// Sends one raw hello line to the socket; the daemon's reply.
fn raw_hello(socket: &Path, hello: &Value) -> Value {
    let mut s = UnixStream::connect(socket).unwrap();
    s.write_all(format!("{hello}\n").as_bytes()).unwrap();
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap()
}

#[tokio::test]
async fn another_version_or_garbage_gets_a_clear_refusal() {
    let place = Place::new("daemon");
    let client = place.client(&["--codex-compat"]).await; // starts the daemon
    let socket = place.socket();
    let mut hello = json!({
        "protocol": "uexec-daemon/1", "version": "0.0.1-old", "build": "x", "owner": "o",
        "cwd": "/", "env": [], "settings": {
            "shell": null, "max_output_tokens": null, "env_keep": [], "env_set": [],
            "env_drop": [], "strip_ansi": false, "collapse_cr": false,
            "deterministic_ids": false, "extended": false, "codex_tools_only": false}
    });
    let reply = raw_hello(&socket, &hello);
    assert_eq!(reply["ok"], false);
    assert!(
        reply["error"]
            .as_str()
            .unwrap()
            .contains("the client uexec 0.0.1-old"),
        "{reply}"
    );
    hello["protocol"] = json!("uexec-daemon/2");
    let reply = raw_hello(&socket, &hello);
    assert!(
        reply["error"].as_str().unwrap().contains("uexec-daemon/2"),
        "{reply}"
    );
    let reply = raw_hello(&socket, &json!({"jsonrpc": "2.0", "method": "initialize"}));
    assert!(
        reply["error"]
            .as_str()
            .unwrap()
            .contains("not a uexec-daemon/1 hello"),
        "{reply}"
    );
    // The daemon is still there for real clients.
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "echo fine", "login": false}),
    )
    .await;
    assert_eq!(structured(&r)["output"], "fine\n");
    client.cancel().await.unwrap();
    place.stop();
}

#[tokio::test]
async fn another_user_cannot_use_the_daemon() {
    let place = Place::new("daemon");
    let client = place.client(&["--codex-compat"]).await; // starts the daemon
    let socket = place.socket();
    let connect_as_nobody = |path: &Path| {
        let script = "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect(sys.argv[1])\nexcept OSError as e:\n    print('refused', e.errno); sys.exit(0)\ntry:\n    s.sendall(b'{}\\n')\nexcept OSError:\n    pass\nprint('reply', s.makefile().readline().strip())\n";
        let out = Command::new("runuser")
            .args(["-u", "nobody", "--", "python3", "-c", script])
            .arg(path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    // The directory (0700) keeps others out.
    let answer = connect_as_nobody(&socket);
    assert!(answer.starts_with("refused"), "{answer}");
    // Were the directory and socket opened up by mistake, the peer check still refuses.
    let dir = socket.parent().unwrap();
    std::fs::set_permissions(&place.runtime, std::fs::Permissions::from_mode(0o711)).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711)).unwrap();
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let answer = connect_as_nobody(&socket);
    assert!(
        answer.contains("may not use the uexec daemon of uid"),
        "{answer}"
    );
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    client.cancel().await.unwrap();
    place.stop();
}

#[test]
fn a_runtime_directory_open_to_others_is_refused() {
    let place = Place::new("daemon");
    let dir = place.runtime.join("uexec");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = place.command(&["daemon"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("mode 0700") && err.contains("refusing"),
        "{err}"
    );
}

#[test]
fn an_idle_daemon_exits_by_itself() {
    let place = Place::new("daemon");
    let out = place
        .command(&["daemon", "--idle-timeout", "1"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!place.socket().exists(), "it removed its socket");
}

/// The daemon's peak RSS, from /proc.
fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_1_gib_flood_is_kept_byte_for_byte_in_bounded_memory_and_a_small_cap_rotates() {
    let place = Place::new("daemon");
    let transcripts = place.cwd.join("transcripts");
    let transcripts_arg = transcripts.display().to_string();
    let mut daemon = place
        .command(&[
            "daemon",
            "--transcripts-dir",
            &transcripts_arg,
            "--transcript-max-bytes",
            "2147483648",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(daemon.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    // 1 GiB of random bytes; the command hashes them on the side before it exits.
    let expected = place.cwd.join("expected.sha256");
    let cmd = format!(
        "{{ head -c 1073741824 /dev/urandom | tee /dev/fd/3 | sha256sum | cut -d' ' -f1 > {}; }} 3>&1",
        expected.display()
    );
    let run = place
        .command(&[
            "run", "--json", "--yield", "30000", "--", "bash", "-c", &cmd,
        ])
        .output()
        .unwrap();
    let mut result: Value = serde_json::from_slice(&run.stdout).unwrap();
    while let Some(id) = result["session_id"].as_i64() {
        let poll = place
            .command(&["poll", "--json", "--yield", "30000", &id.to_string()])
            .output()
            .unwrap();
        result = serde_json::from_slice(&poll.stdout).unwrap();
    }
    assert_eq!(result["exit_code"], 0, "{result}");
    let dir = PathBuf::from(result["transcript"].as_str().expect("transcript path"));
    let hashed = Command::new("bash")
        .arg("-c")
        .arg("cat output.* | sha256sum | cut -d' ' -f1; cat output.* | wc -c")
        .current_dir(&dir)
        .output()
        .unwrap();
    let got = String::from_utf8_lossy(&hashed.stdout).into_owned();
    let want = std::fs::read_to_string(&expected).unwrap();
    assert_eq!(
        got,
        format!("{}1073741824\n", want),
        "the transcript is the output, byte for byte"
    );
    let rss = peak_rss_kib(daemon.id());
    assert!(rss < 64 * 1024, "daemon peak RSS {rss} KiB");
    let _ = std::fs::remove_dir_all(&dir);
    place.stop();
    let _ = daemon.wait();

    // A daemon with a 64 KiB cap keeps the newest bytes of a 1 MiB output.
    let mut small = place
        .command(&[
            "daemon",
            "--transcripts-dir",
            &transcripts_arg,
            "--transcript-max-bytes",
            "65536",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(small.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let run = place
        .command(&["run", "--json", "--no-login", "--", "seq 1 150000"])
        .output()
        .unwrap();
    let result: Value = serde_json::from_slice(&run.stdout).unwrap();
    let dir = PathBuf::from(result["transcript"].as_str().unwrap());
    let kept: u64 = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("output."))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert!(kept <= 65536 && kept > 16384, "kept {kept} bytes");
    assert!(
        !dir.join("output.000000").exists(),
        "the oldest segment rotated away"
    );
    place.stop();
    let _ = small.wait();
}

#[tokio::test]
async fn a_session_in_the_daemon_may_ask_for_a_sandbox() {
    let place = Place::new("daemon");
    let client = place.client(&["--structured"]).await;
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "echo \"$UEXEC_SANDBOX\"; touch /usr/uexec-sandbox-probe 2>&1; true",
               "login": false, "sandbox": "read-only"}),
    )
    .await;
    let s = structured(&r);
    assert!(
        s["output"]
            .as_str()
            .unwrap_or_default()
            .starts_with("read-only\n"),
        "{}",
        text(&r)
    );
    assert_eq!(s["sandbox"]["profile"], "read-only", "{}", text(&r));
    assert!(!std::path::Path::new("/usr/uexec-sandbox-probe").exists());
    client.cancel().await.unwrap();
    place.stop();
}

/// An owner's store outlives the connection that made it; each later connection brings its
/// own settings: one with `--allow-secret-input` may type into a prompt that the first
/// connection's settings kept the model out of.
#[tokio::test]
async fn each_connection_to_an_owner_brings_its_own_settings() {
    let place = Place::new("daemon");
    // It lingers, so that the session is still there for the second.
    let first = place
        .client(&["--owner", "o", "--structured", "--linger", "600"])
        .await;
    let r = call(
        &first,
        "exec_command",
        json!({"cmd": "read -s -p 'Password: ' x; echo; echo got-${#x}", "tty": true,
               "login": false, "yield_time_ms": 30000, "until": {"prompt": true}}),
    )
    .await;
    assert_eq!(structured(&r)["awaiting_secret"], true, "{}", text(&r));
    let id = structured(&r)["session_id"].as_i64().expect("running");
    let refused = call(
        &first,
        "write_stdin",
        json!({"session_id": id, "chars": "abc\r"}),
    )
    .await;
    assert!(
        text(&refused).contains("waits for a secret"),
        "{}",
        text(&refused)
    );
    first.cancel().await.unwrap();

    let second = place
        .client(&["--owner", "o", "--allow-secret-input"])
        .await;
    let typed = call(
        &second,
        "write_stdin",
        json!({"session_id": id, "chars": "abc\r", "yield_time_ms": 5000}),
    )
    .await;
    assert!(text(&typed).contains("got-3"), "{}", text(&typed));
    second.cancel().await.unwrap();
    place.stop();
}

/// A daemon that cannot start (its runtime directory on a full disk) says why through the
/// client that started it, and leaves no socket behind for the next client to trip on.
#[test]
fn a_daemon_that_cannot_start_says_why_and_leaves_no_socket() {
    let said = crate::helpers::on_a_full_disk(
        r#"for attempt in 1 2; do
  HOME="$1" XDG_RUNTIME_DIR="$1/run" "$2" run --no-login -- true 2>&1 && echo "rc=0" || echo "rc=$?"
done
ls "$1/run/uexec""#,
    );
    // Both attempts: the daemon's own words, not "exited at start" nor a reset connection.
    assert_eq!(said.matches("rc=125").count(), 2, "{said}");
    assert_eq!(
        said.matches("the uexec daemon could not start").count(),
        2,
        "{said}"
    );
    assert!(
        said.contains("cannot write") && said.contains("daemon.pid"),
        "{said}"
    );
    assert!(said.contains("No space left on device"), "{said}");
    assert!(!said.contains("daemon.sock"), "a socket was left: {said}");
}
