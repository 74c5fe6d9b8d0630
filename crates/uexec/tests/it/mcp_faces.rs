//! What a plain `uexec mcp` offers (uexec's own arguments, results as text alone), what
//! `--structured` adds, and `--codex-compat`: Codex's exact tools, results and structured
//! form, as before the defaults flipped.

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{call, scratch_dir, stdio_client, structured, text, Client, UEXEC};

/// The properties of `tool`'s input schema, and whether it declares an output schema.
async fn schema_of(client: &Client, tool: &str) -> (Vec<String>, bool) {
    let tools = client.list_all_tools().await.unwrap();
    let tool = tools
        .iter()
        .find(|t| t.name == tool)
        .unwrap_or_else(|| panic!("{tool} offered"));
    let properties = tool
        .input_schema
        .get("properties")
        .and_then(Value::as_object);
    let mut names: Vec<String> = properties
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    names.sort();
    (names, tool.output_schema.is_some())
}

/// The session id a running result's text gives (`Process running with session ID N`).
fn session_in_text(t: &str) -> i64 {
    let at = t
        .find("Process running with session ID ")
        .unwrap_or_else(|| panic!("no session id in {t}"));
    t[at + 32..]
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no session id in {t}"))
}

#[tokio::test]
async fn a_plain_uexec_mcp_offers_uexecs_arguments_and_answers_in_text_alone() {
    let (client, _, _) = stdio_client(&[]).await;
    for tool in ["exec_command", "write_stdin", "list_sessions", "wait"] {
        let (_, output_schema) = schema_of(&client, tool).await;
        assert!(!output_schema, "{tool} declares an output schema");
    }
    let (exec, _) = schema_of(&client, "exec_command").await;
    for field in [
        "until",
        "timeout_ms",
        "stdin",
        "strip_ansi",
        "sandbox",
        "network",
    ] {
        assert!(exec.contains(&field.to_owned()), "{field} in {exec:?}");
    }
    let (write, _) = schema_of(&client, "write_stdin").await;
    assert!(write.contains(&"eof".to_owned()), "{write:?}");

    // Finished: its facts are lines of the text, and there is no JSON beside it.
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "printf 'a\\nb\\n'; exit 3"}),
    )
    .await;
    assert_eq!(r.structured_content, None, "{r:?}");
    let t = text(&r);
    assert!(t.contains("Process exited with code 3"), "{t}");
    assert!(t.contains("Reason: exited"), "{t}");
    assert!(t.contains("Output:\na\nb\n"), "{t}");

    // Running: the id is in the text, and a poll by it gets the rest.
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "read line; echo got $line", "yield_time_ms": 300, "stdin": "pipe"}),
    )
    .await;
    assert_eq!(r.structured_content, None, "{r:?}");
    let id = session_in_text(&text(&r));
    let r = call(
        &client,
        "write_stdin",
        json!({"session_id": id, "chars": "x\n", "yield_time_ms": 5000, "until": {"exit": true}}),
    )
    .await;
    let t = text(&r);
    assert_eq!(r.structured_content, None, "{r:?}");
    assert!(
        t.contains("got x") && t.contains("exited with code 0"),
        "{t}"
    );

    // list_sessions and wait speak text too.
    for (tool, arguments) in [
        ("list_sessions", json!({})),
        ("wait", json!({"session_ids": [id], "timeout_ms": 100})),
    ] {
        let r = call(&client, tool, arguments).await;
        assert_eq!(r.structured_content, None, "{tool}: {r:?}");
        assert!(!text(&r).is_empty(), "{tool}: {r:?}");
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_exit_notice_reaches_a_text_only_client_in_the_text() {
    let (client, _, _) = stdio_client(&[]).await;
    let gate = scratch_dir("faces").join("gate");
    let cmd = format!(
        "while [ ! -e '{}' ]; do sleep 0.02; done; exit 7",
        gate.display()
    );
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": cmd, "login": false, "yield_time_ms": 250}),
    )
    .await;
    let id = session_in_text(&text(&r));
    std::fs::write(&gate, "").unwrap();
    // Nobody watches it end: the next result of any tool says so, in its text.
    let mut said = String::new();
    for _ in 0..200 {
        let listed = call(&client, "list_sessions", json!({})).await;
        assert_eq!(listed.structured_content, None, "{listed:?}");
        said = text(&listed);
        if said.contains("Exit notices") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        said.contains(&format!("Session {id} (while [ ! -e "))
            && said.contains("exited with code 7"),
        "{said}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn structured_adds_the_facts_as_json_and_the_output_schemas() {
    let (client, _, _) = stdio_client(&["--structured"]).await;
    let (exec, output_schema) = schema_of(&client, "exec_command").await;
    assert!(output_schema);
    assert!(exec.contains(&"until".to_owned()), "{exec:?}");
    let r = call(&client, "exec_command", json!({"cmd": "exit 4"})).await;
    let s = structured(&r);
    assert_eq!(s["exit_code"], 4, "{s}");
    assert_eq!(s["reason"], "exited", "{s}");
    assert!(text(&r).contains("Reason: exited"), "{}", text(&r));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn codex_compat_is_codexs_exact_surface() {
    for flags in [&["--codex-compat"][..], &["--extended=false"]] {
        let (client, _, _) = stdio_client(flags).await;
        let (exec, output_schema) = schema_of(&client, "exec_command").await;
        assert!(output_schema, "{flags:?}");
        assert_eq!(
            exec,
            [
                "cmd",
                "login",
                "max_output_tokens",
                "shell",
                "tty",
                "workdir",
                "yield_time_ms"
            ],
            "{flags:?}"
        );
        let r = call(&client, "exec_command", json!({"cmd": "exit 5"})).await;
        assert_eq!(structured(&r)["exit_code"], 5, "{flags:?}");
        assert!(!text(&r).contains("Reason:"), "{flags:?}: {}", text(&r));
        client.cancel().await.unwrap();
    }
    // `--extended`, from configurations older than the flip, changes nothing.
    let (client, _, _) = stdio_client(&["--extended"]).await;
    let (exec, output_schema) = schema_of(&client, "exec_command").await;
    assert!(
        !output_schema && exec.contains(&"until".to_owned()),
        "{exec:?}"
    );
    client.cancel().await.unwrap();
}

#[test]
fn contradicting_faces_are_refused_naming_both_flags() {
    let out = Command::new(UEXEC)
        .args(["mcp", "--codex-compat", "--extended"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--codex-compat") && stderr.contains("--extended"),
        "{stderr}"
    );
    let out = Command::new(UEXEC)
        .args(["mcp", "--codex-compat=maybe"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--codex-compat"), "{stderr}");

    let help = Command::new(UEXEC)
        .args(["mcp", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--codex-compat") && help.contains("--structured"),
        "{help}"
    );
    assert!(!help.contains("--extended"), "a hidden alias: {help}");
}

/// A client that gives itself `name` at initialize.
#[derive(Clone)]
struct Named(&'static str);

impl rmcp::ClientHandler for Named {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut info = rmcp::model::ClientConfig::default();
        info.client_info = rmcp::model::Implementation::new(self.0, "0");
        info
    }
}

/// uexec's text says each fact once in what the model reads: no `Chunk ID` (no tool takes
/// one), and no `Wall time` for Codex, which writes its own around every MCP result; Claude
/// Code shows the text alone, so it keeps the wall time. Codex's surface keeps Codex's text.
#[tokio::test]
async fn each_fact_is_said_once_in_what_each_agent_shows() {
    use rmcp::ServiceExt;
    for (name, flags, chunk, wall) in [
        ("codex-mcp-client", &[][..], false, false),
        ("claude-code", &[][..], false, true),
        ("codex-mcp-client", &["--codex-compat"][..], true, true),
    ] {
        let dir = scratch_dir("faces-named");
        std::fs::create_dir_all(dir.join("home")).unwrap();
        let mut cmd = tokio::process::Command::new(UEXEC);
        cmd.args(["mcp", "--in-process"])
            .args(flags)
            .current_dir(&dir)
            .env("HOME", dir.join("home"));
        let client = Named(name)
            .serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap())
            .await
            .unwrap();
        let r = client
            .call_tool(
                rmcp::model::CallToolRequestParams::new("exec_command").with_arguments(
                    crate::helpers::args(json!({"cmd": "echo hi", "login": false})),
                ),
            )
            .await
            .unwrap();
        let t = text(&r);
        assert_eq!(t.contains("Chunk ID: "), chunk, "{name} {flags:?}: {t}");
        assert_eq!(t.contains("Wall time: "), wall, "{name} {flags:?}: {t}");
        assert!(
            t.contains("Process exited with code 0") && t.contains("Output:\nhi"),
            "{t}"
        );
        client.cancel().await.unwrap();
    }
}
