//! Questions a session asks while a task watches it (an exec_command with `background:
//! true`, or a `wait`): a form for the person whose answer is typed, a password prompt never
//! a form field, and a client without form elicitation told to answer with write_stdin.

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, GetTaskParams, GetTaskResult,
    TaskPayload, TaskStatus, UpdateTaskParams,
};
use rmcp::service::RunningService;
use rmcp::RoleClient;
use serde_json::{json, Value};

use crate::helpers::args;
use crate::mcp_tasks::{
    background, client_of, exec, result_text, session_in, settled, task_client, told_of, TaskClient,
};

/// Answers the question `key` of task `id` with `y`, and checks the command got it and ended.
async fn answer_y(client: &RunningService<RoleClient, TaskClient>, id: &str, key: &str) {
    let answer = json!({"action": "accept", "content": {"answer": "y"}});
    client
        .update_task(UpdateTaskParams::new(
            id.to_owned(),
            [(key.to_owned(), answer)].into_iter().collect(),
        ))
        .await
        .unwrap();
    let done = settled(client, id).await;
    assert_eq!(done.task.status(), TaskStatus::Completed);
    let text = result_text(&done.task.payload);
    assert!(
        text.contains("got y") && text.contains("exited with code 0"),
        "{text}"
    );
}

/// Polls `tasks/get` until `holds` (or the task ends); the last state seen.
async fn until_task(
    client: &RunningService<RoleClient, TaskClient>,
    id: &str,
    holds: impl Fn(&GetTaskResult) -> bool,
) -> GetTaskResult {
    for _ in 0..200 {
        let got = client.get_task(GetTaskParams::new(id)).await.unwrap();
        if holds(&got) || got.task.status().is_terminal() {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {id}: the state awaited never came");
}

/// A client that declares tasks and form elicitation.
async fn eliciting_client() -> (RunningService<RoleClient, TaskClient>, TaskClient) {
    let elicits = TaskClient {
        elicits: true,
        ..TaskClient::default()
    };
    client_of(&[], elicits).await
}

async fn start_task(client: &RunningService<RoleClient, TaskClient>, arguments: Value) -> String {
    match client.call_tool_once(background(arguments)).await.unwrap() {
        CallToolResponse::Task(created) => created.task.task_id,
        other => panic!("a task: {other:?}"),
    }
}

#[tokio::test]
async fn a_question_the_command_asks_becomes_a_form_and_the_answer_is_typed() {
    let (client, handler) = eliciting_client().await;
    let id = start_task(
        &client,
        json!({"cmd": "printf 'Continue? [y/N] '; read a; echo \"got $a\"", "login": false,
               "yield_time_ms": 300, "stdin": "pipe"}),
    )
    .await;
    let asking = until_task(&client, &id, |t| {
        t.task.status() == TaskStatus::InputRequired
    })
    .await;
    let TaskPayload::InputRequired { input_requests } = &asking.task.payload else {
        panic!("input_required: {asking:?}");
    };
    let (key, request) = input_requests.iter().next().expect("one question");
    let asked = serde_json::to_string(request).unwrap();
    assert!(
        asked.contains("Continue? [y/N]") && asked.contains("answer"),
        "{asked}"
    );
    // The client was told it asks, without asking.
    told_of(&handler, &id, TaskStatus::InputRequired).await;
    answer_y(&client, &id, key).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_password_prompt_is_never_a_form_field() {
    let (client, _) = eliciting_client().await;
    let id = start_task(
        &client,
        json!({"cmd": "read -s -p 'Password: ' p; echo done", "login": false,
               "yield_time_ms": 300, "tty": true}),
    )
    .await;
    // A form-only client is sent to the one-time page: the form has no field to type a
    // secret into, only the page's link (mcp_tasks_page.rs fills the page in).
    let asking = until_task(&client, &id, |t| {
        t.task.status() == TaskStatus::InputRequired
    })
    .await;
    let TaskPayload::InputRequired { input_requests } = &asking.task.payload else {
        panic!("input_required: {asking:?}");
    };
    let (_, request) = input_requests.iter().next().expect("one question");
    let asked = serde_json::to_value(request).unwrap();
    assert_eq!(
        asked["params"]["requestedSchema"]["properties"],
        json!({}),
        "{asked}"
    );
    let message = asked["params"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("http://127.0.0.1:") && message.contains("never passes through the model"),
        "{message}"
    );
    client
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .unwrap();
    assert_eq!(
        settled(&client, &id).await.task.status(),
        TaskStatus::Cancelled
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn without_form_elicitation_a_question_is_left_to_write_stdin() {
    let (client, _) = task_client(&[]).await;
    let id = start_task(
        &client,
        json!({"cmd": "printf 'Name? '; read a; echo \"hi $a\"", "login": false,
               "yield_time_ms": 300, "stdin": "pipe"}),
    )
    .await;
    let said = |t: &GetTaskResult| t.task.task.status_message.clone().unwrap_or_default();
    let waiting = until_task(&client, &id, |t| {
        said(t).contains("waits for input at: Name?")
    })
    .await;
    assert_eq!(waiting.task.status(), TaskStatus::Working, "{waiting:?}");
    assert!(said(&waiting).contains("write_stdin"), "{}", said(&waiting));
    client
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .unwrap();
    settled(&client, &id).await;
    client.cancel().await.unwrap();
}

/// A `wait` task on a session that waits at a question asks the person as an exec_command
/// task does (interactive Claude Code backgrounds the wait and shows the form): the answer
/// is typed, and the task ends with what followed.
#[tokio::test]
async fn a_wait_on_a_session_at_a_question_asks_the_person() {
    let (client, handler) = eliciting_client().await;
    let r = client
        .call_tool_once(exec(json!({
            "cmd": "printf 'Continue? [y/N] '; read a; echo \"got $a\"", "login": false,
            "yield_time_ms": 250, "stdin": "pipe"
        })))
        .await
        .unwrap();
    let CallToolResponse::Complete(r) = r else {
        panic!("the snapshot: {r:?}");
    };
    let text = crate::helpers::text(&r);
    let session = session_in(&text);
    let waiting = client
        .call_tool_once(CallToolRequestParams::new("wait").with_arguments(args(
            json!({"session_ids": [session], "yield_time_ms": 250}),
        )))
        .await
        .unwrap();
    let CallToolResponse::Task(created) = waiting else {
        panic!("a task: {waiting:?}");
    };
    let id = created.task.task_id.clone();
    let asking = until_task(&client, &id, |t| {
        t.task.status() == TaskStatus::InputRequired
    })
    .await;
    let TaskPayload::InputRequired { input_requests } = &asking.task.payload else {
        panic!("input_required: {asking:?}");
    };
    let (key, request) = input_requests.iter().next().expect("one question");
    let asked = serde_json::to_string(request).unwrap();
    assert!(asked.contains("Continue? [y/N]"), "{asked}");
    told_of(&handler, &id, TaskStatus::InputRequired).await;
    answer_y(&client, &id, key).await;
    client.cancel().await.unwrap();
}
