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
    cmd.args(["mcp", "--in-process"])
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
    let (client, _) = server(&dir, &["--structured", "--sandbox", "read-only"], &[]).await;
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
    let (client, _) = server(&ws, &["--structured"], &[]).await;
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
    let (client, _) = server(&dir, &["--structured"], &[]).await;
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
    let (client, _) = server(&dir, &["--codex-compat", "--sandbox", "read-only"], &[]).await;
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
    let (client, pid) = server(&dir, &["--codex-compat", "--sandbox", "read-only"], &[]).await;
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
    let (client, _) = server(&dir, &["--codex-compat", "--sandbox", "read-only"], &[]).await;
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
    let (client, _) = server(&dir, &["--structured", "--sandbox", "read-only"], &fault).await;
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
            "--structured",
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
    let (client, _) = server(&dir, &["--structured"], &[]).await;
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
    let (client, _) = server(&dir, &["--structured", "--writable-root", &tmp], &[]).await;
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
    let (client, _) = server(&dir, &["--codex-compat", "--sandbox", "read-only"], &[]).await;
    exec(&client, json!({"cmd": "true"})).await;
    assert!(!stale.exists(), "{} is still there", stale.display());
}

/// Job control in a sandboxed PTY: an interactive shell stops a foreground job on Ctrl-Z.
#[tokio::test]
async fn job_control_works_in_a_sandboxed_pty() {
    let dir = scratch("jobs");
    let (client, _) = server(&dir, &["--structured", "--sandbox", "read-only"], &[]).await;
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
