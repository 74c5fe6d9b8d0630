//! The server's sandbox policy is a ceiling: the model's `sandbox` and `network` arguments
//! may narrow it, never widen it, and its `workdir` is where a command runs, not what it may
//! write. In-process and through the daemon, on the real kernel.

use std::path::{Path, PathBuf};

use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::{json, Value};

use crate::helpers::{args, call, rand_suffix, structured, text, Client, Recorder, UEXEC};
use crate::place::DaemonPlace;

/// A fresh directory with a workspace (`ws`) and an empty HOME, and a marker path outside
/// the workspace.
fn scratch(name: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!(
        "uexec-ceiling-{name}-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    let ws = dir.join("ws");
    std::fs::create_dir_all(ws.join("home")).unwrap();
    (dir, ws)
}

/// `uexec mcp ARGS`, in `cwd`.
async fn server(cwd: &Path, extra: &[&str]) -> Client {
    let mut cmd = tokio::process::Command::new(UEXEC);
    cmd.args(["mcp", "--in-process"])
        .args(extra)
        .current_dir(cwd)
        .env("HOME", cwd.join("home"))
        .env_remove("XDG_RUNTIME_DIR");
    Recorder::default()
        .serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap()
}

async fn exec(client: &Client, mut arguments: Value) -> rmcp::model::CallToolResult {
    arguments["login"] = json!(false);
    call(client, "exec_command", arguments).await
}

/// The error text of a call that must fail.
async fn refused(client: &Client, mut arguments: Value) -> String {
    arguments["login"] = json!(false);
    let r = client
        .call_tool(CallToolRequestParams::new("exec_command").with_arguments(args(arguments)))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true), "must be refused: {}", text(&r));
    text(&r)
}

/// Every widening is refused, naming the field, the server's policy and the flag a person
/// would change, and runs nothing; a narrowing runs narrowed.
async fn check_ceiling(client: &Client, ws: &Path, outside: &Path) {
    let touch = format!("touch {}", outside.display());
    let e = refused(
        client,
        json!({"cmd": touch, "sandbox": "danger-full-access"}),
    )
    .await;
    assert!(
        e.starts_with("exec_command failed: invalid arguments: sandbox: \"danger-full-access\" is wider than this server's sandbox (\"workspace-write\")"),
        "{e}"
    );
    assert!(e.contains("--sandbox danger-full-access"), "{e}");
    let e = refused(client, json!({"cmd": touch, "network": "on"})).await;
    assert!(
        e.contains("invalid arguments: network: \"on\" is wider than this server's network policy (\"off\")"),
        "{e}"
    );
    assert!(e.contains("--network on"), "{e}");
    let e = refused(
        client,
        json!({"cmd": touch, "network": {"allow": ["example.com"]}}),
    )
    .await;
    assert!(
        e.contains("invalid arguments: network.allow: an allowlist is wider than this server's network policy (\"off\")"),
        "{e}"
    );
    assert!(!outside.exists(), "a refused call ran");

    // Narrower: read-only under workspace-write, off under off.
    let r = exec(
        client,
        json!({"cmd": "touch narrowed; echo rc=$?", "sandbox": "read-only", "network": "off"}),
    )
    .await;
    assert!(text(&r).contains("rc=1"), "{}", text(&r));
    assert!(!ws.join("narrowed").exists());
    assert_eq!(structured(&r)["sandbox"]["profile"], "read-only");
    // The server's own: workspace-write, network off.
    let r = exec(client, json!({"cmd": "touch mine && echo wrote"})).await;
    assert!(text(&r).contains("wrote"), "{}", text(&r));
    assert!(ws.join("mine").exists());
    assert_eq!(structured(&r)["sandbox"]["network"], "off");
}

#[tokio::test]
async fn a_call_may_narrow_the_servers_sandbox_but_never_widen_it() {
    let (dir, ws) = scratch("narrow");
    let client = server(
        &ws,
        &[
            "--structured",
            "--sandbox",
            "workspace-write",
            "--network",
            "off",
        ],
    )
    .await;
    check_ceiling(&client, &ws, &dir.join("escaped")).await;
    // The tool says so before the model tries: only narrower choices are offered.
    let tools = client.list_tools(None).await.unwrap();
    let exec = tools
        .tools
        .iter()
        .find(|t| t.name == "exec_command")
        .unwrap();
    let props = &exec.input_schema["properties"];
    assert_eq!(
        props["sandbox"]["enum"],
        json!(["read-only", "workspace-write"])
    );
    assert_eq!(
        props["network"]["oneOf"],
        json!([{"type": "string", "enum": ["off"]}])
    );
    client.cancel().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn an_allowlist_call_names_only_hosts_the_servers_allowlist_allows() {
    let (dir, ws) = scratch("allow");
    let client = server(
        &ws,
        &["--structured", "--network-allow", "*.example.com:443"],
    )
    .await;
    let e = refused(
        &client,
        json!({"cmd": "true", "network": {"allow": ["a.example.com:443", "example.com:443"]}}),
    )
    .await;
    assert!(
        e.contains("invalid arguments: network.allow[1]: \"example.com:443\" is not allowed by this server's allowlist (*.example.com:443)"),
        "{e}"
    );
    assert!(e.contains("--network-allow example.com:443"), "{e}");
    let e = refused(&client, json!({"cmd": "true", "network": "on"})).await;
    assert!(e.contains("network: \"on\" is wider"), "{e}");
    for narrower in [json!("off"), json!({"allow": ["api.example.com:443"]})] {
        let r = exec(&client, json!({"cmd": "echo ran", "network": narrower})).await;
        assert!(text(&r).contains("ran"), "{narrower}: {}", text(&r));
    }
    client.cancel().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn the_workdir_is_where_a_command_runs_not_what_it_may_write() {
    let (dir, ws) = scratch("workdir");
    let client = server(&ws, &["--structured", "--sandbox", "workspace-write"]).await;
    let escape = format!("uexec-escaped-{}", rand_suffix());
    for workdir in ["..", "/", dir.to_str().unwrap()] {
        let r = exec(
            &client,
            json!({
                "cmd": format!("pwd; touch {escape}; echo rc=$?; touch {}/inside && echo inside-ok", ws.display()),
                "workdir": workdir,
            }),
        )
        .await;
        let out = text(&r);
        let ran_in = if workdir == ".." {
            dir.as_path()
        } else {
            Path::new(workdir)
        };
        assert!(
            out.contains(&format!("{}\n", ran_in.display())),
            "it runs where it was asked: {out}"
        );
        assert!(out.contains("rc=1"), "{workdir}: {out}");
        assert!(
            !ran_in.join(&escape).exists(),
            "workdir {workdir} made {} writable",
            ran_in.display()
        );
        assert!(
            out.contains("inside-ok"),
            "the workspace stays writable: {out}"
        );
    }
    client.cancel().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn the_daemon_takes_each_connections_policy_as_its_ceiling() {
    let place = DaemonPlace::new("ceiling");
    let ws = &place.cwd;
    let outside = ws.parent().unwrap().join("escaped");
    let client = place
        .client(&[
            "--structured",
            "--sandbox",
            "workspace-write",
            "--network",
            "off",
        ])
        .await;
    check_ceiling(&client, ws, &outside).await;
    // Another owner without sandbox flags runs unsandboxed: the policy is the connection's.
    let other = place.client(&["--structured", "--owner", "other"]).await;
    let r = exec(
        &other,
        json!({"cmd": format!("touch {} && echo wrote", outside.display())}),
    )
    .await;
    assert!(text(&r).contains("wrote"), "{}", text(&r));
    assert!(structured(&r).get("sandbox").is_none(), "{}", text(&r));
    // A bad flag value is the client's error, before any daemon is asked.
    let out = place
        .command(&["mcp", "--daemon", "--sandbox", "readonly"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--sandbox"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    client.cancel().await.unwrap();
    other.cancel().await.unwrap();
    place.stop();
}
