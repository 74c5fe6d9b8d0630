//! MCP Tasks through a client that declares the extension: an exec_command still running at
//! the end of its window keeps its session id, unless it asked for a task (`background`);
//! then tasks/get says it works, and gives the result with nothing left out; the client is
//! told of the end; tasks/cancel stops the command; a `wait` becomes a task that wakes the
//! model at the end; and a client without the extension, `--no-tasks` or Codex's surface see
//! no task.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    GetTaskParams, GetTaskResult, TaskPayload, TaskStatus, TaskStatusNotificationParams,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{json, Value};

use crate::helpers::{args, eventually, marker, procs_with, scratch_dir, stdio_client, UEXEC};

/// A client that declares the tasks extension and records `notifications/tasks`.
#[derive(Clone, Default)]
pub(crate) struct TaskClient {
    pub(crate) told: Arc<Mutex<Vec<TaskStatusNotificationParams>>>,
    /// Declares form elicitation too.
    pub(crate) elicits: bool,
}

impl ClientHandler for TaskClient {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.capabilities = ClientCapabilities::builder().enable_tasks().build();
        if self.elicits {
            info.capabilities.elicitation = serde_json::from_value(json!({"form": {}})).ok();
        }
        info
    }

    async fn on_task_status(
        &self,
        params: TaskStatusNotificationParams,
        _context: NotificationContext<RoleClient>,
    ) {
        self.told.lock().unwrap().push(params);
    }
}

pub(crate) async fn task_client(
    extra: &[&str],
) -> (RunningService<RoleClient, TaskClient>, TaskClient) {
    client_of(extra, TaskClient::default()).await
}

pub(crate) async fn client_of(
    extra: &[&str],
    handler: TaskClient,
) -> (RunningService<RoleClient, TaskClient>, TaskClient) {
    let dir = scratch_dir("tasks");
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let mut cmd = tokio::process::Command::new(UEXEC);
    cmd.args(["mcp", "--in-process"])
        .args(extra)
        .current_dir(&dir)
        .env("HOME", dir.join("home"));
    let client = handler
        .clone()
        .serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap();
    (client, handler)
}

pub(crate) fn exec(arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new("exec_command").with_arguments(args(arguments))
}

/// exec_command with `background: true`: a task, if it outlives its window.
pub(crate) fn background(mut arguments: Value) -> CallToolRequestParams {
    arguments["background"] = json!(true);
    exec(arguments)
}

/// Polls `tasks/get` (as the extension has clients do) until the task is terminal.
pub(crate) async fn settled(
    client: &RunningService<RoleClient, TaskClient>,
    id: &str,
) -> GetTaskResult {
    for _ in 0..200 {
        let got = client.get_task(GetTaskParams::new(id)).await.unwrap();
        if got.task.status().is_terminal() {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {id} did not end");
}

/// Waits until the client was told (`notifications/tasks`), without asking, that task `id`
/// is `status`.
pub(crate) async fn told_of(handler: &TaskClient, id: &str, status: TaskStatus) {
    let told = handler.told.clone();
    eventually(
        &format!("notifications/tasks: {id} {status:?}"),
        Duration::from_secs(5),
        || {
            told.lock()
                .unwrap()
                .iter()
                .any(|n| n.task.task.task_id == id && n.status() == status)
        },
    )
    .await;
}

/// The session a running snapshot's text names (`Process running with session ID N`).
pub(crate) fn session_in(text: &str) -> i64 {
    text.split("Process running with session ID ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a session id: {text}"))
}

/// The text of a completed task's result (its content blocks, joined).
pub(crate) fn result_text(payload: &TaskPayload) -> String {
    let TaskPayload::Completed { result } = payload else {
        panic!("not completed: {payload:?}");
    };
    crate::raw_mcp::text_of(&serde_json::Value::Object(result.clone()))
}

#[tokio::test]
async fn a_command_still_running_at_its_window_becomes_a_task_that_ends_with_its_result() {
    let (client, handler) = task_client(&[]).await;
    assert!(
        client
            .peer_info()
            .is_some_and(|info| info.capabilities.supports_tasks()),
        "the server declares the extension"
    );
    // Gated on a file, so the test says when it ends.
    let gate = scratch_dir("tasks-gate").join("go");
    let cmd = format!(
        "echo first; while [ ! -e '{}' ]; do sleep 0.02; done; echo second; exit 3",
        gate.display()
    );
    let created = client
        .call_tool_once(background(
            json!({"cmd": cmd, "login": false, "yield_time_ms": 500, "name": "gated"}),
        ))
        .await
        .unwrap();
    let CallToolResponse::Task(created) = created else {
        panic!("a running command that asked for the background is a task: {created:?}");
    };
    let id = created.task.task_id.clone();
    assert_eq!(created.task.status, TaskStatus::Working);
    assert_eq!(created.task.poll_interval_ms, Some(1000));
    assert!(created.task.ttl_ms.is_some_and(|ms| ms >= 3_600_000));

    // Found at once, working, its status naming the command.
    let got = client
        .get_task(GetTaskParams::new(id.clone()))
        .await
        .unwrap();
    assert_eq!(got.task.status(), TaskStatus::Working, "{got:?}");
    let said = got.task.task.status_message.clone().unwrap_or_default();
    assert!(said.contains("running for"), "{said}");
    // `echo first` printed 6 bytes, and its line is the last one.
    assert!(
        said.contains("6 B printed") && said.ends_with("last line: first"),
        "{said}"
    );

    std::fs::write(&gate, "").unwrap();
    let done = settled(&client, &id).await;
    assert_eq!(done.task.status(), TaskStatus::Completed);
    let said = done.task.task.status_message.clone().unwrap_or_default();
    assert!(said.ends_with("ended"), "no longer running: {said}");
    let TaskPayload::Completed { result } = &done.task.payload else {
        panic!("completed: {done:?}");
    };
    // The text a model reads, not the JSON of its last chunk (no --structured).
    assert!(
        result.get("structuredContent").is_none(),
        "text only: {result:?}"
    );
    let text = result_text(&done.task.payload);
    // How it ended first: its id and name, the code, the run's time, every byte's place.
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("Session ")
            && first.contains("\"gated\"")
            && first.contains("exited with code 3 after")
            && first.contains("Transcript: ")
            && first.contains("every byte"),
        "{text}"
    );
    // The window's output and the rest, once each: nothing the command printed is lost.
    assert_eq!(text.matches("first\n").count(), 1, "{text}");
    assert!(text.contains("second"), "{text}");
    assert!(text.contains("Process exited with code 3"), "{text}");
    // The run's whole time (it outlived a 500 ms window), not the last poll's.
    let wall: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("Wall time: "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a wall time: {text}"));
    assert!(wall >= 0.5, "{wall} s: {text}");

    // And the client was told, without asking.
    told_of(&handler, &id, TaskStatus::Completed).await;

    // An unknown task is an error naming it.
    let error = client
        .get_task(GetTaskParams::new("no-such-task"))
        .await
        .expect_err("unknown");
    assert!(format!("{error:?}").contains("no-such-task"), "{error:?}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_command_that_exits_within_its_window_answers_at_once() {
    let (client, _) = task_client(&[]).await;
    let r = client
        .call_tool_once(exec(json!({"cmd": "echo quick", "login": false})))
        .await
        .unwrap();
    let CallToolResponse::Complete(r) = r else {
        panic!("no task for a command that ended: {r:?}");
    };
    let text = crate::helpers::text(&r);
    assert!(
        text.contains("quick") && text.contains("exited with code 0"),
        "{text}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn cancelling_a_task_interrupts_its_command_and_settles_cancelled() {
    let (client, _) = task_client(&[]).await;
    let m = marker();
    let created = client
        .call_tool_once(background(
            json!({"cmd": format!("sleep {m}"), "login": false, "yield_time_ms": 300}),
        ))
        .await
        .unwrap();
    let CallToolResponse::Task(created) = created else {
        panic!("a task: {created:?}");
    };
    let id = created.task.task_id.clone();
    client
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .unwrap();
    let status = settled(&client, &id).await.task.status();
    assert_eq!(status, TaskStatus::Cancelled);
    assert!(procs_with(&m).is_empty(), "the command is gone");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn write_stdin_keeps_working_on_a_tasks_session() {
    let (client, _) = task_client(&[]).await;
    let created = client
        .call_tool_once(background(json!({
            "cmd": "read line; echo got $line", "login": false, "yield_time_ms": 300, "stdin": "pipe"
        })))
        .await
        .unwrap();
    let CallToolResponse::Task(created) = created else {
        panic!("a task: {created:?}");
    };
    // The task's status says which session it follows; write_stdin types into it.
    let said = created.task.status_message.clone().unwrap_or_default();
    let session: i64 = said
        .strip_prefix("session ")
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no session in {said:?}"));
    let r = client
        .call_tool_once(
            CallToolRequestParams::new("write_stdin").with_arguments(args(
                json!({"session_id": session, "chars": "hi\n", "yield_time_ms": 5000, "until": {"exit": true}}),
            )),
        )
        .await
        .unwrap();
    let CallToolResponse::Complete(r) = r else {
        panic!("write_stdin is never a task: {r:?}");
    };
    let text = crate::helpers::text(&r);
    assert!(text.contains("got hi"), "{text}");
    // Its end was reported there: the task says so, and ends all the same.
    let done = settled(&client, &created.task.task_id).await;
    let text = result_text(&done.task.payload);
    assert!(text.contains("reported already"), "{text}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn clients_without_the_extension_and_codex_compat_see_no_task() {
    // A plain client: the same running snapshot as ever.
    let (client, _, _) = stdio_client(&[]).await;
    let r = client
        .call_tool_once(exec(
            json!({"cmd": "sleep 5", "login": false, "yield_time_ms": 250}),
        ))
        .await
        .unwrap();
    assert!(matches!(r, CallToolResponse::Complete(_)), "{r:?}");
    client.cancel().await.unwrap();
    // Codex's surface declares no extension and makes no task, whoever asks.
    let (client, _) = task_client(&["--codex-compat"]).await;
    assert!(!client
        .peer_info()
        .is_some_and(|info| info.capabilities.supports_tasks()));
    let r = client
        .call_tool_once(exec(
            json!({"cmd": "sleep 5", "login": false, "yield_time_ms": 250}),
        ))
        .await
        .unwrap();
    assert!(matches!(r, CallToolResponse::Complete(_)), "{r:?}");
    client.cancel().await.unwrap();
    // --no-tasks: none declared, none made; a call that asks is told why, and keeps its id.
    let (client, _) = task_client(&["--no-tasks"]).await;
    assert!(!client
        .peer_info()
        .is_some_and(|info| info.capabilities.supports_tasks()));
    let r = client
        .call_tool_once(background(
            json!({"cmd": "sleep 5", "login": false, "yield_time_ms": 250}),
        ))
        .await
        .unwrap();
    let CallToolResponse::Complete(r) = r else {
        panic!("no task with --no-tasks: {r:?}");
    };
    let text = crate::helpers::text(&r);
    assert!(
        text.starts_with("background: no task here")
            && text.contains("Process running with session ID"),
        "said before the snapshot, not after its output: {text}"
    );
    client.cancel().await.unwrap();
}

/// The session id is the model's in a client that declares tasks (interactive Claude Code
/// does, and backgrounds every task, hiding the id): a running command answers with its
/// snapshot, the model polls it, and a `wait` on it is the task that wakes the model at the
/// end, with the exit code and the output it has not read.
#[tokio::test]
async fn a_running_command_keeps_its_session_id_and_a_wait_on_it_is_the_task() {
    let (client, handler) = task_client(&[]).await;
    let gate = scratch_dir("tasks-gate").join("go");
    let cmd = format!(
        "echo one; while [ ! -e '{}' ]; do sleep 0.02; done; echo two; exit 4",
        gate.display()
    );
    let r = client
        .call_tool_once(exec(
            json!({"cmd": cmd, "login": false, "yield_time_ms": 300}),
        ))
        .await
        .unwrap();
    let CallToolResponse::Complete(r) = r else {
        panic!("the snapshot, not a task: {r:?}");
    };
    let text = crate::helpers::text(&r);
    assert!(text.contains("one"), "{text}");
    let session = session_in(&text);
    // Polled by the model, as in any client.
    let poll = client
        .call_tool_once(
            CallToolRequestParams::new("write_stdin")
                .with_arguments(args(json!({"session_id": session, "yield_time_ms": 250}))),
        )
        .await
        .unwrap();
    assert!(matches!(poll, CallToolResponse::Complete(_)), "{poll:?}");
    // A wait that outlives its window is the task.
    let waiting = client
        .call_tool_once(CallToolRequestParams::new("wait").with_arguments(args(
            json!({"session_ids": [session], "yield_time_ms": 250}),
        )))
        .await
        .unwrap();
    let CallToolResponse::Task(created) = waiting else {
        panic!("a wait on a running session is a task: {waiting:?}");
    };
    let id = created.task.task_id.clone();
    let said = created.task.status_message.clone().unwrap_or_default();
    assert!(
        said.contains(&format!("session {session}")) && said.contains("running for"),
        "{said}"
    );
    std::fs::write(&gate, "").unwrap();
    let done = settled(&client, &id).await;
    assert_eq!(done.task.status(), TaskStatus::Completed);
    let TaskPayload::Completed { result } = &done.task.payload else {
        panic!("completed: {done:?}");
    };
    assert!(result.get("structuredContent").is_none(), "{result:?}");
    let text = result_text(&done.task.payload);
    assert!(
        text.starts_with(&format!("Session {session} ("))
            && text.contains("exited with code 4 after")
            && text.contains("Transcript: "),
        "{text}"
    );
    // What the model had not read, and only that (it read `one` in the first result).
    assert!(text.contains("two") && !text.contains("one\n"), "{text}");
    told_of(&handler, &id, TaskStatus::Completed).await;
    client.cancel().await.unwrap();
}
