//! `uexec mcp --environments FILE`: a cluster on one machine. Each "pod" is a `uexec serve`
//! on a loopback port with TLS and a token read from files, listed in an environments file
//! (Codex's format); an MCP client runs sessions across them while pods die, come back
//! behind the same URL, and the file changes.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rmcp::model::CallToolResult;
use serde_json::{json, Value};

use std::sync::atomic::Ordering;

use crate::helpers::{call, eventually, stdio_client, structured, text, Client};
use crate::net_support::{make_cert, run_uexec, serve, temp_dir, Served};

/// A pod: `uexec serve` over wss:// on loopback, its token and TLS pair from files.
fn pod(dir: &Path, name: &str, port: u16) -> Served {
    let token = dir.join(format!("{name}.token"));
    if !token.exists() {
        std::fs::write(&token, format!("token-of-{name}\n")).unwrap();
    }
    let listen = format!("wss://127.0.0.1:{port}");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    serve(&[
        "--listen",
        &listen,
        "--token-file",
        token.to_str().unwrap(),
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ])
}

fn port_of(pod: &Served) -> u16 {
    pod.addr.rsplit(':').next().unwrap().parse().unwrap()
}

/// Writes the file atomically (a rename, as editors and ConfigMap updates do).
fn write_file(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn url_entry(id: &str, pod: &Served, token: Option<&str>) -> String {
    let token = token.map_or(String::new(), |t| format!("auth_bearer_token = \"{t}\"\n"));
    format!(
        "[[environments]]\nid = \"{id}\"\nurl = \"wss://{}\"\n{token}\n",
        pod.addr
    )
}

async fn exec(client: &Client, env: &str, cmd: &str) -> CallToolResult {
    call(
        client,
        "exec_command",
        json!({"cmd": cmd, "login": false, "yield_time_ms": 400, "environment_id": env}),
    )
    .await
}

async fn environment_enum(client: &Client) -> Value {
    let tools = client.list_all_tools().await.unwrap();
    let exec = tools.iter().find(|t| t.name == "exec_command").unwrap();
    exec.input_schema["properties"]["environment_id"]["enum"].clone()
}

/// Polls `write_stdin` on a session until it reports an error (the session failed).
async fn wait_for_failure(client: &Client, session: i64, timeout: Duration) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let r = call(
            client,
            "write_stdin",
            json!({"session_id": session, "yield_time_ms": 500}),
        )
        .await;
        if r.is_error == Some(true) {
            return text(&r);
        }
        assert!(
            Instant::now() < deadline,
            "session {session} did not fail: {}",
            text(&r)
        );
    }
}

async fn still_running(client: &Client, session: i64) {
    let r = call(
        client,
        "write_stdin",
        json!({"session_id": session, "yield_time_ms": 250}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    assert_eq!(structured(&r)["session_id"], session, "{}", text(&r));
}

fn session_of(r: &CallToolResult) -> i64 {
    structured(r)["session_id"]
        .as_i64()
        .unwrap_or_else(|| panic!("not running: {}", text(r)))
}

struct Cluster {
    dir: PathBuf,
    file: PathBuf,
    a: Served,
    b: Served,
    c: Served,
}

fn cluster() -> Cluster {
    let dir = temp_dir("pods");
    make_cert(&dir);
    let (a, b, c) = (pod(&dir, "a", 0), pod(&dir, "b", 0), pod(&dir, "c", 0));
    let file = dir.join("environments.toml");
    Cluster { dir, file, a, b, c }
}

#[tokio::test]
async fn sessions_across_pods_survive_another_pods_death_and_the_file_is_reloaded() {
    let mut k = cluster();
    // a: token in the file; b: token from --environment-token-file; a stdio program entry.
    let listing = format!(
        "include_local = true\n\n{}{}[[environments]]\nid = \"ssh-dev\"\nprogram = \"ssh\"\nargs = [\"dev\", \"uexec serve --listen stdio\"]\n",
        url_entry("a", &k.a, Some("token-of-a")),
        url_entry("b", &k.b, None),
    );
    write_file(&k.file, &listing);
    let log = k.dir.join("mcp.log");
    let b_token = format!("b={}", k.dir.join("b.token").display());
    let (client, recorder, _) = stdio_client(&[
        "--codex-compat",
        "--log-file",
        log.to_str().unwrap(),
        "--environments",
        k.file.to_str().unwrap(),
        "--environment-token-file",
        &b_token,
        "--remote-ca",
        k.dir.join("cert.pem").to_str().unwrap(),
    ])
    .await;
    assert_eq!(environment_enum(&client).await, json!(["a", "b"]));

    // Sessions on both pods.
    let on_a = exec(&client, "a", "echo on-a-$UEXEC; sleep 60").await;
    assert!(text(&on_a).contains("on-a-1"), "{}", text(&on_a));
    let on_a = session_of(&on_a);
    let on_b = session_of(&exec(&client, "b", "echo on-b; sleep 60").await);
    let quick = exec(&client, "b", "echo quick").await;
    assert_eq!(structured(&quick)["exit_code"], 0, "{}", text(&quick));
    let program = exec(&client, "ssh-dev", "true").await;
    assert!(
        text(&program).contains("environment \"ssh-dev\" runs its exec server as a program (ssh) on stdio, which uexec does not support"),
        "{}",
        text(&program)
    );

    // Pod a dies: its session fails naming it; b's goes on; a is refused while down.
    let a_port = port_of(&k.a);
    let a_url = format!("wss://{}", k.a.addr);
    sigkill(&mut k.a);
    let failure = wait_for_failure(&client, on_a, Duration::from_secs(30)).await;
    assert!(
        failure.starts_with(&format!(
            "write_stdin failed: Process failed: environment a: connection to {a_url} lost"
        )),
        "{failure}"
    );
    still_running(&client, on_b).await;
    let down = exec(&client, "a", "true").await;
    assert_eq!(down.is_error, Some(true), "{}", text(&down));
    assert!(
        text(&down).starts_with("exec_command failed: Failed to create process: environment a: "),
        "{}",
        text(&down)
    );

    // A new pod behind the same URL takes new sessions.
    k.a = pod(&k.dir, "a", a_port);
    let again = exec(&client, "a", "echo again").await;
    assert_eq!(structured(&again)["exit_code"], 0, "{}", text(&again));
    assert_eq!(structured(&again)["output"], "again\n");

    // The file changes: b leaves, c comes. b's running session is left alone.
    let listing = format!(
        "{}{}",
        url_entry("a", &k.a, Some("token-of-a")),
        url_entry("c", &k.c, Some("token-of-c")),
    );
    write_file(&k.file, &listing);
    let told = || recorder.tools_changed.load(Ordering::SeqCst) > 0;
    eventually(
        "notifications/tools/list_changed",
        Duration::from_secs(20),
        told,
    )
    .await;
    assert_eq!(environment_enum(&client).await, json!(["a", "c"]));
    still_running(&client, on_b).await;
    let removed = exec(&client, "b", "true").await;
    assert!(
        text(&removed).starts_with(&format!(
            "exec_command failed: invalid arguments: environment_id: environment \"b\" was removed from {} (available: a, c)",
            k.file.display()
        )),
        "{}",
        text(&removed)
    );
    let on_c = exec(&client, "c", "echo on-c").await;
    assert_eq!(structured(&on_c)["output"], "on-c\n", "{}", text(&on_c));
    let list = call(&client, "list_sessions", json!({})).await;
    assert_eq!(structured(&list)["environments"], json!(["a", "c"]));
    assert!(
        text(&list).contains("Environments (exec_command's environment_id; default: local): a, c"),
        "{}",
        text(&list)
    );

    // A broken file is logged and changes nothing.
    write_file(&k.file, "[[environments]]\nid = \"a\"\n");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let logged = std::fs::read_to_string(&log).unwrap_or_default();
        if logged.contains("has neither url nor program") {
            assert!(
                logged.contains("the environments stay as they were"),
                "{logged}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no reload error logged: {logged}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(environment_enum(&client).await, json!(["a", "c"]));
    let on_c = exec(&client, "c", "echo still").await;
    assert_eq!(structured(&on_c)["output"], "still\n", "{}", text(&on_c));
    client.cancel().await.unwrap();
}

fn sigkill(pod: &mut Served) {
    // Child::kill is SIGKILL: the pod gets no chance to say goodbye.
    pod.child.kill().unwrap();
    pod.child.wait().unwrap();
}

#[test]
fn a_bad_environments_file_stops_the_start_naming_the_file_and_line() {
    let dir = temp_dir("envfile");
    let file = dir.join("environments.toml");
    let cases = [
        (
            "[[environments]]\nid = \"a\"\nurl = \"ws://127.0.0.1:1\"\n\n[[environments]]\nid = \"a\"\nurl = \"ws://127.0.0.1:2\"\n",
            "line 6: environments.id: `a` is given twice",
        ),
        (
            "[[environments]]\nid = \"a\"\n",
            "line 2: environment `a` has neither url nor program",
        ),
        ("[[environments]\n", "line 1: "),
    ];
    for (text, expected) in cases {
        std::fs::write(&file, text).unwrap();
        let (ok, stderr) = run_uexec(&["mcp", "--environments", file.to_str().unwrap()]);
        assert!(!ok, "{text:?} was accepted");
        let prefix = format!("environments file {}: ", file.display());
        assert!(
            stderr.contains(&prefix) && stderr.contains(expected),
            "{text:?}: {stderr}"
        );
    }
    let missing = dir.join("nope.toml");
    let (ok, stderr) = run_uexec(&["mcp", "--environments", missing.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        stderr.contains(&format!(
            "environments file {}: cannot read it",
            missing.display()
        )),
        "{stderr}"
    );
    std::fs::write(&file, "").unwrap();
    let token = dir.join("ghost.token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let ghost = format!("ghost={}", token.display());
    let (ok, stderr) = run_uexec(&[
        "mcp",
        "--environments",
        file.to_str().unwrap(),
        "--environment-token-file",
        &ghost,
    ]);
    assert!(!ok);
    assert!(
        stderr.contains(&format!("--environment-token-file {ghost}: there is no --environment or environments file entry named \"ghost\"")),
        "{stderr}"
    );
}

#[tokio::test]
async fn an_environment_also_given_on_the_command_line_is_refused() {
    let k = cluster();
    write_file(&k.file, &url_entry("b", &k.b, None));
    let (ok, stderr) = run_uexec(&[
        "mcp",
        "--environments",
        k.file.to_str().unwrap(),
        "--environment",
        &format!("b=wss://{}", k.b.addr),
        "--remote-token-file",
        k.dir.join("b.token").to_str().unwrap(),
        "--remote-ca",
        k.dir.join("cert.pem").to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(
        stderr.contains("environment `b` is also given with --environment"),
        "{stderr}"
    );
    drop(k.c);
}

#[tokio::test]
async fn a_listener_hears_the_tool_list_change_when_the_file_changes() {
    use rmcp::model::{ServerNotification, SubscriptionFilter};

    let dir = temp_dir("envlisten");
    let file = dir.join("environments.toml");
    // Nothing listens on port 1: an environment that is down is listed all the same.
    write_file(
        &file,
        "[[environments]]\nid = \"a\"\nurl = \"ws://127.0.0.1:1\"\n",
    );
    let server = crate::net_support::mcp_http(&[
        "--http",
        "127.0.0.1:0",
        "--token",
        "s3cret",
        "--environments",
        file.to_str().unwrap(),
    ]);
    let client = crate::mcp_listen::connect_stateless(&server.addr, "s3cret").await;
    let filter = SubscriptionFilter::builder().tools_list_changed().build();
    let mut subscription = client.listen(filter).await.unwrap();
    write_file(
        &file,
        "[[environments]]\nid = \"a\"\nurl = \"ws://127.0.0.1:1\"\n\n[[environments]]\nid = \"b\"\nurl = \"ws://127.0.0.1:2\"\n",
    );
    let heard = tokio::time::timeout(Duration::from_secs(20), subscription.next())
        .await
        .expect("a notification within 20 s")
        .unwrap()
        .expect("the subscription is open");
    assert!(
        matches!(heard, ServerNotification::ToolListChangedNotification(_)),
        "{heard:?}"
    );
    assert_eq!(environment_enum(&client).await, json!(["a", "b"]));
    subscription.cancel().await.unwrap();
    client.cancel().await.unwrap();
}

/// Regression: the file was read in quadratic time (20,000 entries took 4 s, minutes in a
/// debug build), and every `wss://` dial read all the system's root certificates again.
#[tokio::test]
async fn twenty_thousand_environments_of_a_file_are_all_offered() {
    let dir = temp_dir("envbig");
    let file = dir.join("environments.toml");
    let ids: Vec<String> = (0..20_000).map(|i| format!("pod-{i}")).collect();
    let listing: String = ids
        .iter()
        .map(|id| format!("[[environments]]\nid = \"{id}\"\nurl = \"ws://127.0.0.1:1\"\n\n"))
        .collect();
    write_file(&file, &listing);
    let log = dir.join("mcp.log");
    let (client, _, _) = stdio_client(&[
        "--codex-compat",
        "--log-file",
        log.to_str().unwrap(),
        "--environments",
        file.to_str().unwrap(),
    ])
    .await;
    let offered = environment_enum(&client).await;
    let mut offered: Vec<&str> = offered
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    offered.sort_unstable();
    let mut expected: Vec<&str> = ids.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(offered, expected);
    // Nothing listens on port 1: the last one's session fails, naming it.
    let last = exec(&client, "pod-19999", "true").await;
    assert!(
        text(&last).starts_with(
            "exec_command failed: Failed to create process: environment pod-19999: cannot reach ws://127.0.0.1:1: "
        ),
        "{}",
        text(&last)
    );
    client.cancel().await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
