//! Hooks through a real MCP client (issue 39 §3): `uexec mcp --hooks FILE` in Claude Code's
//! hooks JSON, with real hook scripts that append the event they are given to a file. A
//! PreToolUse hook's exit 2 blocks (its stderr reaches the model, nothing ran), its
//! `permissionDecision: deny` blocks, its `updatedInput` changes the command; a PostToolUse
//! hook runs once per exec_command: at the return of a quick command, at the exit of one
//! that outlives its window (no poll), never for write_stdin; a hook that hangs past its
//! timeout, or prints bad JSON, is said and the call goes on; a call that fails as a tool
//! runs PostToolUseFailure; a PermissionRequest hook answers for the person about a held
//! command; a bad file stops uexec.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::{json, Value};

use crate::helpers::{call, eventually, scratch_dir, text, Client, Recorder, UEXEC};

/// A bash hook in `dir` that appends its stdin (one line of JSON) to `NAME.log`, then runs
/// `then`.
fn hook(dir: &Path, name: &str, then: &str) -> String {
    let path = dir.join(format!("{name}.sh"));
    let log = dir.join(format!("{name}.log"));
    let body = format!(
        "#!/bin/bash\ninput=$(cat)\nprintf '%s\\n' \"$input\" >> '{}'\n{then}\n",
        log.display()
    );
    std::fs::write(&path, body).unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).unwrap();
    path.display().to_string()
}

/// The events a hook logged.
fn logged(dir: &Path, name: &str) -> Vec<Value> {
    std::fs::read_to_string(dir.join(format!("{name}.log")))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A scratch directory with `home/`.
fn place(kind: &str) -> PathBuf {
    let dir = scratch_dir(kind);
    std::fs::create_dir_all(dir.join("home")).unwrap();
    dir
}

/// `uexec mcp --in-process --hooks hooks.json` in `dir`, `hooks` its `hooks` key.
async fn server(dir: &Path, hooks: Value) -> Client {
    let settings = json!({"permissions": {"allow": []}, "hooks": hooks});
    std::fs::write(dir.join("hooks.json"), settings.to_string()).unwrap();
    let mut cmd = tokio::process::Command::new(UEXEC);
    cmd.args(["mcp", "--in-process", "--hooks"])
        .arg(dir.join("hooks.json"))
        .current_dir(dir)
        .env("HOME", dir.join("home"));
    Recorder::default()
        .serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap()
}

fn command_hook(matcher: &str, command: &str, timeout: u64) -> Value {
    json!([{"matcher": matcher, "hooks": [{"type": "command", "command": command, "timeout": timeout}]}])
}

async fn exec(client: &Client, cmd: &str) -> (bool, String) {
    let r = call(client, "exec_command", json!({"cmd": cmd, "login": false})).await;
    (r.is_error == Some(true), text(&r))
}

#[tokio::test]
async fn a_pre_tool_use_exit_2_blocks_and_the_model_reads_its_stderr() {
    let dir = place("hooks-block");
    let pre = hook(&dir, "pre", "echo 'no touching here' >&2\nexit 2");
    let client = server(&dir, json!({"PreToolUse": command_hook("Bash", &pre, 10)})).await;
    let (failed, said) = exec(&client, "touch marker").await;
    assert!(failed, "{said}");
    assert!(
        said.contains("no touching here") && said.contains("Nothing of the command ran"),
        "{said}"
    );
    assert!(!dir.join("marker").exists(), "the command ran");
    let events = logged(&dir, "pre");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["hook_event_name"], "PreToolUse");
    assert_eq!(events[0]["tool_name"], "exec_command");
    assert_eq!(events[0]["tool_input"]["cmd"], "touch marker");
    // Claude Code's Bash input names it `command`: a Bash hook reads it there.
    assert_eq!(events[0]["tool_input"]["command"], "touch marker");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_permission_decision_deny_blocks_and_updated_input_changes_the_command() {
    let dir = place("hooks-json");
    let deny = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny", "permissionDecisionReason": "rm is for people"}});
    let rewrite = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "allow", "updatedInput": {"command": "echo rewritten"}}});
    let pre = hook(
        &dir,
        "pre",
        &format!(
            "case \"$input\" in\n  *DENY_ME*) echo '{deny}' ;;\n  *REWRITE_ME*) echo '{rewrite}' ;;\nesac\nexit 0"
        ),
    );
    let client = server(
        &dir,
        json!({"PreToolUse": command_hook("exec_command", &pre, 10)}),
    )
    .await;
    let (failed, said) = exec(&client, "touch ran # DENY_ME").await;
    assert!(failed && said.contains("rm is for people"), "{said}");
    assert!(!dir.join("ran").exists(), "the command ran");
    let (failed, said) = exec(&client, "echo original REWRITE_ME").await;
    assert!(!failed, "{said}");
    assert!(
        said.contains("rewritten") && !said.contains("original"),
        "{said}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn post_tool_use_fires_once_per_exec_command_at_return_or_at_the_exit_never_for_write_stdin()
{
    let dir = place("hooks-post");
    let pre = hook(&dir, "pre", "exit 0");
    let post = hook(&dir, "post", "exit 0");
    let client = server(
        &dir,
        json!({"PreToolUse": command_hook("", &pre, 10), "PostToolUse": command_hook("Bash|exec_command", &post, 10)}),
    )
    .await;
    // 1. A quick command: its hook has run when the call answers.
    let (failed, said) = exec(&client, "echo quick; exit 3").await;
    assert!(!failed, "{said}");
    let events = logged(&dir, "post");
    assert_eq!(events.len(), 1, "{events:?}");
    let quick = &events[0];
    assert_eq!(quick["hook_event_name"], "PostToolUse");
    assert_eq!(quick["tool_input"]["cmd"], "echo quick; exit 3");
    assert_eq!(quick["tool_response"]["exit_code"], 3);
    assert_eq!(quick["tool_response"]["ended"], "in_window");
    assert!(quick["tool_response"]["output_tail"]
        .as_str()
        .unwrap()
        .contains("quick"));
    // The original call's id, the one its PreToolUse was told.
    let pre_events = logged(&dir, "pre");
    assert_eq!(quick["tool_use_id"], pre_events[0]["tool_use_id"]);
    assert!(quick["tool_use_id"].as_str().unwrap().starts_with("mcp-"));

    // 2. A command that outlives its window: its hook runs at its exit, with no poll.
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "sleep 1; echo late; exit 7", "login": false, "yield_time_ms": 250}),
    )
    .await;
    assert!(
        text(&r).contains("Process running with session ID"),
        "{}",
        text(&r)
    );
    eventually(
        "the PostToolUse at the exit",
        Duration::from_secs(30),
        || logged(&dir, "post").len() >= 2,
    )
    .await;
    let late = &logged(&dir, "post")[1];
    assert_eq!(late["tool_input"]["cmd"], "sleep 1; echo late; exit 7");
    assert_eq!(late["tool_response"]["exit_code"], 7);
    assert_eq!(late["tool_response"]["ended"], "after_return");
    assert_eq!(late["tool_use_id"], logged(&dir, "pre")[1]["tool_use_id"]);
    assert!(late["tool_response"]["duration_ms"].as_u64().unwrap() >= 1000);

    // 3. write_stdin: no hook of its own; its session's exec_command has one, once.
    let r = call(
        &client,
        "exec_command",
        json!({"cmd": "read line; echo got $line; exit 4", "login": false, "stdin": "pipe", "yield_time_ms": 250}),
    )
    .await;
    let said = text(&r);
    let id: i64 = said
        .split("session ID ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{said}"));
    let r = call(
        &client,
        "write_stdin",
        json!({"session_id": id, "chars": "hi\n", "yield_time_ms": 2000}),
    )
    .await;
    assert!(text(&r).contains("got hi"), "{}", text(&r));
    eventually(
        "the PostToolUse of the read",
        Duration::from_secs(30),
        || logged(&dir, "post").len() >= 3,
    )
    .await;
    // 4. One more quick command: its hook runs before it answers, after every earlier one.
    exec(&client, "true").await;
    let events = logged(&dir, "post");
    let cmds: Vec<&str> = events
        .iter()
        .map(|e| e["tool_input"]["cmd"].as_str().unwrap())
        .collect();
    assert_eq!(
        cmds,
        [
            "echo quick; exit 3",
            "sleep 1; echo late; exit 7",
            "read line; echo got $line; exit 4",
            "true"
        ],
        "once each, never for write_stdin"
    );
    assert!(events.iter().all(|e| e["tool_name"] == "exec_command"));
    assert_eq!(events[2]["tool_response"]["exit_code"], 4);
    client.cancel().await.unwrap();
}

/// A call that fails as a tool (here blocked by a PreToolUse hook) runs PostToolUseFailure
/// with the call's id, input and error; what it says reaches the model; PostToolUse does
/// not fire, since nothing ran.
#[tokio::test]
async fn a_failed_call_runs_post_tool_use_failure_not_post_tool_use() {
    let dir = place("hooks-failure");
    let pre = hook(
        &dir,
        "pre",
        "case \"$input\" in *deploy*) echo 'not in this repo' >&2; exit 2 ;; esac",
    );
    let post = hook(&dir, "post", "");
    let failure = hook(
        &dir,
        "failure",
        r#"echo '{"hookSpecificOutput": {"hookEventName": "PostToolUseFailure", "additionalContext": "try make check instead"}}'"#,
    );
    let client = server(
        &dir,
        json!({
            "PreToolUse": command_hook("Bash", &pre, 10),
            "PostToolUse": command_hook("", &post, 10),
            "PostToolUseFailure": command_hook("exec_command", &failure, 10),
        }),
    )
    .await;
    let (failed, said) = exec(&client, "make deploy").await;
    assert!(failed, "{said}");
    assert!(said.contains("try make check instead"), "{said}");
    let events = logged(&dir, "failure");
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_eq!(event["hook_event_name"], "PostToolUseFailure");
    assert_eq!(event["tool_name"], "exec_command");
    assert_eq!(event["tool_input"]["cmd"], "make deploy");
    assert!(
        event["error"]
            .as_str()
            .unwrap()
            .contains("not in this repo"),
        "{event}"
    );
    assert_eq!(
        event["tool_use_id"],
        logged(&dir, "pre")[0]["tool_use_id"],
        "the same call"
    );
    assert!(
        logged(&dir, "post").is_empty(),
        "PostToolUse fired for nothing run"
    );
    // A command that ran and failed is no tool failure: PostToolUse, not this.
    let (failed, said) = exec(&client, "exit 3").await;
    assert!(!failed, "{said}");
    assert_eq!(logged(&dir, "failure").len(), 1);
    assert_eq!(logged(&dir, "post").len(), 1);
    client.cancel().await.unwrap();
}

/// A command a `prompt` rule holds asks the PermissionRequest hooks first (Claude Code's and
/// Codex's event): an allow runs it with no one asked, a deny refuses it with the hook's
/// message; the record says which hook decided.
#[tokio::test]
async fn a_permission_request_hook_answers_for_the_person() {
    let dir = place("hooks-permission");
    std::fs::write(
        dir.join("team.rules"),
        "prefix_rule(pattern = [\"touch\"], decision = \"prompt\", justification = \"it writes\")\n",
    )
    .unwrap();
    let answer = hook(
        &dir,
        "permission",
        r#"case "$input" in
  *allowed*) echo '{"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}' ;;
  *) echo '{"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "deny", "message": "only allowed files"}}}' ;;
esac"#,
    );
    let settings = json!({"hooks": {"PermissionRequest": command_hook("", &answer, 10)}});
    std::fs::write(dir.join("hooks.json"), settings.to_string()).unwrap();
    let mut cmd = tokio::process::Command::new(UEXEC);
    cmd.args(["mcp", "--in-process", "--hooks"])
        .arg(dir.join("hooks.json"))
        .arg("--rules")
        .arg(dir.join("team.rules"))
        .current_dir(&dir)
        .env("HOME", dir.join("home"))
        .env_remove("XDG_STATE_HOME");
    let client = Recorder::default()
        .serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap();
    let (failed, said) = exec(&client, "touch allowed").await;
    assert!(!failed, "{said}");
    assert!(dir.join("allowed").exists());
    let (failed, said) = exec(&client, "touch other").await;
    assert!(failed && said.contains("only allowed files"), "{said}");
    assert!(!dir.join("other").exists());
    let events = logged(&dir, "permission");
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0]["hook_event_name"], "PermissionRequest");
    assert_eq!(events[0]["tool_input"]["cmd"], "touch allowed");
    assert!(events[0]["reason"].as_str().unwrap().contains("it writes"));
    client.cancel().await.unwrap();
    let record =
        std::fs::read_to_string(dir.join("home/.local/state/uexec/audit/audit.jsonl")).unwrap();
    let by: Vec<String> = record
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["by"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(by.len(), 2, "{record}");
    assert!(
        by.iter().all(|b| b.starts_with("PermissionRequest hook")),
        "{by:?}"
    );
}

#[tokio::test]
async fn a_hook_that_hangs_or_prints_bad_json_is_said_and_the_call_goes_on() {
    let dir = place("hooks-hang");
    let hang = hook(&dir, "hang", "exec sleep 60");
    let bad = hook(&dir, "bad", "echo '{oops'");
    let client = server(
        &dir,
        json!({"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": hang, "timeout": 1},
            {"type": "command", "command": bad}
        ]}]}),
    )
    .await;
    let started = std::time::Instant::now();
    let (failed, said) = exec(&client, "echo went on").await;
    assert!(!failed, "{said}");
    assert!(said.contains("went on"), "{said}");
    assert!(
        said.contains("did not finish within its timeout of 1 s") && said.contains("hang.sh"),
        "{said}"
    );
    assert!(
        said.contains("bad JSON") && said.contains("bad.sh"),
        "{said}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    client.cancel().await.unwrap();
}

#[test]
fn a_bad_hooks_file_stops_uexec_at_start_naming_where() {
    let dir = place("hooks-bad");
    let bad = dir.join("hooks.json");
    std::fs::write(
        &bad,
        "{\"hooks\": {\n  \"PreToolUze\": [{\"hooks\": []}]\n}}\n",
    )
    .unwrap();
    for mode in [&["--in-process"][..], &[][..]] {
        let out = std::process::Command::new(UEXEC)
            .arg("mcp")
            .args(mode)
            .arg("--hooks")
            .arg(&bad)
            .current_dir(&dir)
            .env("HOME", dir.join("home"))
            .env("XDG_RUNTIME_DIR", dir.join("home"))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(
            stderr.contains("hooks.json")
                && stderr.contains("PreToolUze")
                && stderr.contains("line 2"),
            "{mode:?}: {stderr}"
        );
    }
}
