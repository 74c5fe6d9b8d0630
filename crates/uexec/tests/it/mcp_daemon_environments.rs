//! `uexec mcp --daemon` with environments: the flags are read and checked here, the daemon
//! dials the servers, and each connection of an owner names its own environments.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::json;

use crate::helpers::{call, scratch_dir, session_ids, structured, text, Client, UEXEC};
use crate::mcp_environments::{exec_on, spawn_exec_server, ExecServer};
use crate::place::DaemonPlace as Place;

/// A `uexec serve` on loopback that wants the token of `token_file`, its commands marked
/// by a variable that only they have.
fn exec_server(token_file: &Path) -> ExecServer {
    let mut cmd = Command::new(UEXEC);
    cmd.args(["serve", "--listen", "ws://127.0.0.1:0", "--token-file"])
        .arg(token_file)
        .env("UEXEC_IT_WHERE", "on-the-exec-server");
    spawn_exec_server(cmd)
}

/// `uexec mcp --daemon` at `place`, so that the daemon it starts logs everything
/// (`UEXEC_LOG=trace`) under `state`.
async fn traced_client(place: &Place, state: &Path, extra: &[&str]) -> Client {
    let vars = [
        ("XDG_STATE_HOME", state.as_os_str()),
        ("UEXEC_LOG", "trace".as_ref()),
    ];
    place.client_with_env(extra, &vars).await
}

/// Where a command ran: the exec server's variable, or `here`.
const WHERE: &str = "echo ${UEXEC_IT_WHERE:-here}";
/// What [`WHERE`] prints on the exec server.
const THERE: &str = "on-the-exec-server\n";

/// What [`WHERE`] prints in `env` (none: locally) through `client`.
async fn ran_in(client: &Client, env: Option<&str>) -> String {
    let r = exec_on(client, env, WHERE).await;
    match structured(&r)["output"].as_str() {
        Some(output) => output.to_owned(),
        None => panic!("{env:?}: {}", text(&r)),
    }
}

#[tokio::test]
async fn environments_run_through_the_daemon_and_each_connection_names_its_own() {
    let place = Place::new("denv");
    let dir = scratch_dir("denv");
    let token = dir.join("token");
    std::fs::write(&token, "t0k3n-through-the-hello\n").unwrap();
    let server = exec_server(&token);
    let file = dir.join("environments.toml");
    std::fs::write(
        &file,
        format!("[[environments]]\nid = \"pod\"\nurl = \"{}\"\n", server.url),
    )
    .unwrap();
    let box_arg = format!("box={}", server.url);
    let state = dir.join("state");
    let first = traced_client(
        &place,
        &state,
        &[
            "--structured",
            "--owner",
            "o",
            "--environment",
            &box_arg,
            "--environments",
            file.to_str().unwrap(),
            "--remote-token-file",
            token.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(ran_in(&first, Some("box")).await, THERE);
    assert_eq!(ran_in(&first, Some("pod")).await, THERE);
    assert_eq!(ran_in(&first, None).await, "here\n");
    let r = exec_on(&first, Some("box"), "echo up; exec sleep 30").await;
    let id = structured(&r)["session_id"]
        .as_i64()
        .unwrap_or_else(|| panic!("running: {}", text(&r)));
    let listed = call(&first, "list_sessions", json!({})).await;
    assert_eq!(structured(&listed)["environments"], json!(["box", "pod"]));
    assert!(
        text(&listed)
            .contains("Environments (exec_command's environment_id; default: local): box, pod"),
        "{}",
        text(&listed)
    );
    assert_eq!(session_ids(&listed), [id]);

    // A second connection of the same owner brings its own environments: it sees the
    // owner's sessions, names only its own environments, and changes nothing of the first's.
    let other_arg = format!("other={}", server.url);
    let second = place
        .client(&[
            "--structured",
            "--owner",
            "o",
            "--environment",
            &other_arg,
            "--remote-token-file",
            token.to_str().unwrap(),
        ])
        .await;
    let listed = call(&second, "list_sessions", json!({})).await;
    assert_eq!(structured(&listed)["environments"], json!(["other"]));
    assert_eq!(session_ids(&listed), [id], "{}", text(&listed));
    assert_eq!(ran_in(&second, Some("other")).await, THERE);
    let r = exec_on(&second, Some("box"), WHERE).await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    assert!(
        text(&r).contains("unknown environment \"box\" (configured: other)"),
        "{}",
        text(&r)
    );
    assert_eq!(ran_in(&first, Some("box")).await, THERE);

    // The remote session outlives the connection that started it.
    first.cancel().await.unwrap();
    let polled = call(
        &second,
        "write_stdin",
        json!({"session_id": id, "yield_time_ms": 250}),
    )
    .await;
    assert_eq!(
        structured(&polled)["session_id"],
        id,
        "still running there: {}",
        text(&polled)
    );
    call(&second, "terminate_session", json!({"session_id": id})).await;
    second.cancel().await.unwrap();

    // The token went through the hello; the daemon's log, at its most verbose, never
    // holds it.
    place.stop();
    let logged = std::fs::read_to_string(state.join("uexec").join("daemon.log")).unwrap();
    assert!(logged.contains("uexec daemon listening"), "{logged}");
    assert!(!logged.contains("t0k3n-through-the-hello"), "{logged}");
}

#[test]
fn a_bad_environment_flag_fails_before_any_daemon_starts_and_names_the_flag() {
    let dir = scratch_dir("denvbad");
    let token = dir.join("token");
    std::fs::write(&token, "t\n").unwrap();
    let bad_ca = dir.join("bad-ca.pem");
    std::fs::write(&bad_ca, "not a certificate\n").unwrap();
    let bad_file = dir.join("environments.toml");
    std::fs::write(&bad_file, "[[environments]]\nid = \"a\"\n").unwrap();
    let token = token.to_str().unwrap();
    let env_token = format!("box={token}");
    let nobody = format!("nobody={token}");
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["--remote-token-file", "/nonexistent/token"],
            "--remote-token-file /nonexistent/token".to_owned(),
        ),
        (
            vec![
                "--environment",
                "box=ws://127.0.0.1:1",
                "--environment-token-file",
                "box=/nonexistent/token",
            ],
            "--environment-token-file /nonexistent/token".to_owned(),
        ),
        (
            vec![
                "--environment",
                "box=ws://127.0.0.1:1",
                "--environment-token-file",
                &nobody,
            ],
            "--environment-token-file nobody=".to_owned(),
        ),
        (
            vec![
                "--environment",
                "box=ws://127.0.0.1:1",
                "--environment-token-file",
                &env_token,
                "--remote-ca",
                bad_ca.to_str().unwrap(),
            ],
            format!("--remote-ca {}", bad_ca.display()),
        ),
        (
            vec!["--environments", bad_file.to_str().unwrap()],
            format!("environments file {}", bad_file.display()),
        ),
        (
            vec![
                "--http",
                "127.0.0.1:0",
                "--remote-token-file",
                "/nonexistent/token",
            ],
            "--remote-token-file /nonexistent/token".to_owned(),
        ),
    ];
    for (flags, named) in cases {
        let place = Place::new("denvbad");
        let out = place
            .command(&["mcp", "--daemon"])
            .args(&flags)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flags:?}: {err}");
        assert!(err.contains(&named), "{flags:?}: {err}");
        assert!(
            !place.socket().exists() && place.daemon_pid().is_none(),
            "{flags:?}: a daemon was started"
        );
    }
}
