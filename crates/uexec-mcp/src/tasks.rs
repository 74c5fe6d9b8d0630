//! MCP Tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663) for `exec_command`:
//! a call whose command still runs at the end of its window, from a client that declared
//! the extension, answers with a task instead of a snapshot, and the client is told when it
//! ends instead of polling for it.
//!
//! 1. **Creation**: the call runs as always (its window, its `until`); a result that names
//!    a running session becomes `CreateTaskResult`. The task is in [`rmcp`]'s task manager
//!    before that result is sent, so a `tasks/get` at once finds it.
//! 2. **Working**: the task follows the session without taking its output (the session's
//!    owner may still poll it with `write_stdin`); every [`STATUS_EVERY`] its status message
//!    says how long it has run, how much it printed and its last line.
//! 3. **Completed**: at the exit, the normal result: the first window's snapshot (which the
//!    model never saw: the task stood in for it), then a poll's (the rest since the last
//!    read, and the exit code), and where its transcript is. A session whose end someone else
//!    reported says so.
//! 4. **Input required**: a session that waits at a prompt (as `until: {prompt: true}` sees
//!    it) makes the task `input_required`, for a client that declared form elicitation: the
//!    question is a form with one field, `answer`, and `tasks/update` types it (and a
//!    newline). A password prompt (echo off) is never a form: the status message says to ask
//!    the person, and the secret never passes through the model. A declined question is not
//!    asked again until the session prints something new.
//! 5. **Cancelled** (`tasks/cancel`): Ctrl-C to the session's processes, then SIGTERM, then
//!    SIGKILL, [`CANCEL_STEP`] apart, until it exits.
//! 6. **Told**: a client of the initialize handshake hears `notifications/tasks` with the
//!    final state (the `subscriptions/listen` stream of the stateless protocol has no task
//!    filter yet; its clients hear the session's `resources/updated`, or poll `tasks/get`).
//!
//! The same machinery runs any other work as a task ([`Tasks::spawn_job`]): the official
//! conformance suite's fixture tools (`examples/conformance_fixtures.rs`) go through it.
//!
//! A task's entry lives [`TTL_MS`] from its creation (a task still working then fails; the
//! session runs on), and as long again once it ended, so that pollers see its end: memory
//! stays bounded by the tasks of the last two hours.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rmcp::model::{
    CallToolResult, CreateTaskResult, ElicitRequest, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationSchema, GetTaskResult, InputRequest, ServerNotification,
    TaskStatusNotification, TaskStatusNotificationParams,
};
use rmcp::service::{Peer, RoleServer};
use rmcp::task_manager::{TaskContext, TaskExit, TaskFuture, TaskManager, TaskOptions};
use rmcp::ErrorData as McpError;
use serde_json::json;
use uexec_core::backend::Signal;
use uexec_core::{SessionStore, StoreConfig};

use crate::tools::parse::Dialect;
use crate::tools::write_stdin;

/// How often a working task's status message is brought up to date.
pub const STATUS_EVERY: Duration = Duration::from_secs(2);
/// How long a cancel waits after each signal before the next, stronger one.
pub const CANCEL_STEP: Duration = Duration::from_secs(2);
/// How long a question waits for its answer at most (the task's time to live).
const WHILE_ASKING: Duration = Duration::from_millis(TTL_MS);
/// A task's time to live from its creation, in ms (one hour).
pub const TTL_MS: u64 = 3_600_000;
/// The polling interval a task suggests, in ms.
pub const POLL_INTERVAL_MS: u64 = 1_000;
/// Owner entries kept before those of forgotten tasks are pruned.
const PRUNE_OWNERS_AT: usize = 256;
/// Scheduler turns [`tell`] waits for the manager to record a task's end (it does so in the
/// same turn as the task's future returns: a few are plenty).
const TELL_TURNS: usize = 1000;
/// Bytes of recent output read for a status message's last line.
const LAST_LINE_BYTES: usize = 4096;

/// The tasks of one server, shared by its connections; each task belongs to its owner (for
/// exec_command, the store of the client that made it), and no other owner can see it.
pub struct Tasks<Owner = SessionStore> {
    manager: TaskManager,
    owners: Arc<Mutex<HashMap<String, Weak<Owner>>>>,
}

impl<Owner> Clone for Tasks<Owner> {
    fn clone(&self) -> Self {
        Self {
            manager: self.manager.clone(),
            owners: self.owners.clone(),
        }
    }
}

impl<Owner> Default for Tasks<Owner> {
    fn default() -> Self {
        Self {
            manager: TaskManager::default(),
            owners: Arc::default(),
        }
    }
}

/// Everything a task needs to follow its session and make the final result.
pub struct Follow {
    pub store: Arc<SessionStore>,
    pub session_id: i32,
    /// The snapshot of the call's window, which the task stood in for.
    pub window: CallToolResult,
    pub config: StoreConfig,
    pub dialect: Dialect,
    /// Where `notifications/tasks` goes (a client of the initialize handshake).
    pub peer: Option<Peer<RoleServer>>,
    /// The client answers form elicitations: a prompt becomes `input_required`.
    pub elicits: bool,
}

impl Tasks<SessionStore> {
    /// Makes a task that follows `follow.session_id` to its end; the answer to the call.
    pub fn create(&self, follow: Follow) -> CreateTaskResult {
        let store = follow.store.clone();
        let peer = follow.peer.clone();
        let options = TaskOptions::new()
            .with_ttl_ms(TTL_MS)
            .with_poll_interval_ms(POLL_INTERVAL_MS)
            .with_status_message(status_line(&follow.store, follow.session_id));
        self.spawn_job(&store, options, peer, move |context| {
            Box::pin(run(follow, context))
        })
    }
}

impl<Owner: Send + Sync + 'static> Tasks<Owner> {
    /// Runs `job` as a task of `owner`'s, the answer to its call: it is in the manager (a
    /// `tasks/get` at once finds it) before this returns, and `peer`, when given, hears
    /// `notifications/tasks` with its final state. exec_command's tasks are [`Self::create`];
    /// the conformance fixtures' (`examples/conformance_fixtures.rs`) come here directly.
    pub fn spawn_job(
        &self,
        owner: &Arc<Owner>,
        options: TaskOptions,
        peer: Option<Peer<RoleServer>>,
        job: impl FnOnce(TaskContext) -> TaskFuture,
    ) -> CreateTaskResult {
        let manager = self.manager.clone();
        let task = self.manager.spawn(options, move |context| {
            let id = context.task_id().to_owned();
            let work = job(context);
            Box::pin(async move {
                let settled = work.await;
                if let Some(peer) = peer {
                    tokio::spawn(tell(manager, id, peer));
                }
                settled
            })
        });
        let mut owners = self
            .owners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if owners.len() >= PRUNE_OWNERS_AT {
            // The manager forgets tasks past their time to live: so does this table, so
            // that it stays as small as the tasks of the last two hours.
            owners.retain(|id, o| o.strong_count() > 0 && self.manager.get_task(id).is_ok());
        }
        owners.insert(task.task_id.clone(), Arc::downgrade(owner));
        drop(owners);
        CreateTaskResult::new(task)
    }

    /// `tasks/get` for `owner`.
    pub fn get(&self, owner: &Arc<Owner>, task_id: &str) -> Result<GetTaskResult, McpError> {
        self.check(owner, task_id)?;
        self.manager.get_task(task_id).map(GetTaskResult::new)
    }

    /// `tasks/cancel`: acknowledged at once; the task settles `cancelled` once its work
    /// stopped (for exec_command, once the session is gone).
    pub fn cancel(&self, owner: &Arc<Owner>, task_id: &str) -> Result<(), McpError> {
        self.check(owner, task_id)?;
        self.manager.cancel_task(task_id)
    }

    /// `tasks/update`: the answers go to the task's outstanding input requests; an answer
    /// to none (exec_command's tasks ask for no input) is ignored, as the extension says of
    /// answers to requests that are not outstanding.
    pub fn update(
        &self,
        owner: &Arc<Owner>,
        task_id: &str,
        responses: impl IntoIterator<Item = (String, serde_json::Value)>,
    ) -> Result<(), McpError> {
        self.check(owner, task_id)?;
        self.manager.update_task(task_id, responses)
    }

    /// Another owner's task is no task of this one's: the same error as an unknown id.
    fn check(&self, owner: &Arc<Owner>, task_id: &str) -> Result<(), McpError> {
        let mut owners = self
            .owners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        owners.retain(|_, owner| owner.strong_count() > 0);
        match owners.get(task_id).and_then(Weak::upgrade) {
            Some(known) if !Arc::ptr_eq(&known, owner) => Err(McpError::invalid_params(
                format!("unknown task {task_id:?}"),
                Some(json!({ "taskId": task_id })),
            )),
            // Unknown here: the manager says so in its words (or it expired).
            _ => Ok(()),
        }
    }
}

/// Follows the session to its end (or cancels it), then makes the result.
async fn run(follow: Follow, context: TaskContext) -> Result<CallToolResult, TaskExit> {
    let Follow {
        store,
        session_id,
        window,
        config,
        dialect,
        peer: _,
        elicits,
    } = follow;
    let mut asked = 0u32;
    // The output a declined question was asked at: not asked again until it changes.
    let mut declined_at: Option<String> = None;
    loop {
        tokio::select! {
            exited = store.await_exit(session_id, STATUS_EVERY) => match exited {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) => {}
            },
            () = context.cancelled() => {
                cancel(&store, session_id).await;
                context.set_status_message(format!("session {session_id} cancelled"));
                return Err(TaskExit::Cancelled);
            }
        }
        let Some(prompt) = store.prompt(session_id) else {
            context.set_status_message(status_line(&store, session_id));
            continue;
        };
        let seen = store.recent_output(session_id, LAST_LINE_BYTES);
        if prompt.secret || !elicits || (declined_at.is_some() && declined_at == seen) {
            context.set_status_message(prompt_line(session_id, &prompt));
            continue;
        }
        asked += 1;
        let question = ask(&context, asked, session_id, &prompt.line);
        let answer = tokio::select! {
            answer = question => answer,
            _ = store.await_exit(session_id, WHILE_ASKING) => break,
            () = context.cancelled() => {
                cancel(&store, session_id).await;
                context.set_status_message(format!("session {session_id} cancelled"));
                return Err(TaskExit::Cancelled);
            }
        };
        match answer {
            Some(text) => {
                // Typed as a person would: the answer, then Enter.
                let _ = store
                    .send_input(session_id, &format!("{text}\n"), false)
                    .await;
                declined_at = None;
            }
            None => declined_at = seen,
        }
    }
    context.set_status_message(format!("session {session_id} ended"));
    let poll = serde_json::Map::from_iter([("session_id".to_owned(), json!(session_id))]);
    let last = match write_stdin::call(&store, &config, Some(&poll), dialect).await {
        Ok(result) => result,
        Err(message) => CallToolResult::error(vec![rmcp::model::ContentBlock::text(format!(
            "write_stdin failed: {message}"
        ))]),
    };
    let mut result = joined(window, last);
    // Where every byte it printed is, to page with read_output.
    let transcript = store
        .list_ended()
        .into_iter()
        .find(|s| s.session_id == session_id)
        .and_then(|s| s.transcript);
    if let Some(dir) = transcript {
        result.content.push(rmcp::model::ContentBlock::text(format!(
            "Transcript: {} (every byte; read_output {{\"transcript\": \"{}\"}} pages through it)",
            dir.display(),
            dir.display()
        )));
    }
    Ok(result)
}

/// The window's snapshot, then the last one: nothing the command printed is left out.
fn joined(window: CallToolResult, last: CallToolResult) -> CallToolResult {
    let mut result = last;
    let mut content = window.content;
    content.append(&mut result.content);
    result.content = content;
    result
}

/// Asks the client (a form elicitation, as the task's `inputRequests`) what to type at the
/// prompt `line`; `None` when it declined or cancelled.
async fn ask(context: &TaskContext, n: u32, session_id: i32, line: &str) -> Option<String> {
    let schema = ElicitationSchema::builder()
        .required_string("answer")
        .build()
        .ok()?;
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!(
            "session {session_id} waits for input at: {line}\nWhat should be typed (Enter follows)?"
        ),
        requested_schema: schema,
    };
    let request = InputRequest::Elicitation(ElicitRequest::new(params));
    let value = context
        .request_input(format!("prompt-{n}"), request)
        .await
        .ok()?;
    let result: ElicitResult = serde_json::from_value(value).ok()?;
    if result.action != ElicitationAction::Accept {
        return None;
    }
    let content = result.content?;
    content.get("answer")?.as_str().map(str::to_owned)
}

/// `session 7 waits at a password prompt (echo off): ...`.
fn prompt_line(session_id: i32, prompt: &uexec_core::Prompt) -> String {
    if prompt.secret {
        format!(
            "session {session_id} waits at a password prompt (echo off): {}; ask the person to answer it (uexec attach --write {session_id} in the daemon), never send secrets yourself",
            prompt.line
        )
    } else {
        format!(
            "session {session_id} waits for input at: {}; answer with write_stdin",
            prompt.line
        )
    }
}

/// Ctrl-C, then SIGTERM, then SIGKILL, each given [`CANCEL_STEP`] to end the session.
async fn cancel(store: &Arc<SessionStore>, session_id: i32) {
    for signal in [Signal::Interrupt, Signal::Terminate] {
        if store.signal(session_id, signal).await.is_err() {
            return; // gone already
        }
        if let Ok(Some(_)) | Err(_) = store.await_exit(session_id, CANCEL_STEP).await {
            return;
        }
    }
    let _ = store.terminate(session_id);
}

/// `session 7 (npm test) running for 12.3 s, 4.2 KiB printed; last line: PASS app.test.ts`.
fn status_line(store: &SessionStore, session_id: i32) -> String {
    let info = store
        .list_sessions()
        .into_iter()
        .find(|s| s.session_id == session_id);
    let Some(info) = info else {
        return format!("session {session_id} ended");
    };
    let mut line = format!(
        "session {session_id} ({}) running for {:.1} s, {} printed",
        info.command,
        info.running_time.as_secs_f64(),
        bytes_text(info.output_bytes)
    );
    let recent = store
        .recent_output(session_id, LAST_LINE_BYTES)
        .unwrap_or_default();
    if let Some(last) = recent.lines().rev().map(str::trim).find(|l| !l.is_empty()) {
        line.push_str(&format!("; last line: {last}"));
    }
    line
}

/// `512 B`, `4.2 KiB`, `3.1 MiB`.
fn bytes_text(n: u64) -> String {
    const KIB: f64 = 1024.0;
    let f = n as f64;
    if f < KIB {
        format!("{n} B")
    } else if f < KIB * KIB {
        format!("{:.1} KiB", f / KIB)
    } else {
        format!("{:.1} MiB", f / (KIB * KIB))
    }
}

/// Sends `notifications/tasks` with the task's final state once the manager has it (it
/// records the end right after the task's future returns).
async fn tell(manager: TaskManager, task_id: String, peer: Peer<RoleServer>) {
    let mut settled = None;
    for _ in 0..TELL_TURNS {
        match manager.get_task(&task_id) {
            Ok(task) if task.status().is_terminal() => {
                settled = Some(task);
                break;
            }
            Ok(_) => tokio::task::yield_now().await,
            Err(_) => return,
        }
    }
    let Some(settled) = settled else {
        return;
    };
    let notification = TaskStatusNotification::new(TaskStatusNotificationParams::from(settled));
    let _ = peer
        .send_notification(ServerNotification::TaskStatusNotification(notification))
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_owner_table_forgets_the_tasks_the_manager_forgot() {
        let tasks: Tasks<()> = Tasks::default();
        let owner = Arc::new(());
        let short = || TaskOptions::new().with_ttl_ms(1u64);
        let done = |_context: TaskContext| -> TaskFuture {
            Box::pin(async { Ok(CallToolResult::success(Vec::new())) })
        };
        for _ in 0..(3 * PRUNE_OWNERS_AT) {
            tasks.spawn_job(&owner, short(), None, done);
            // Past the 1 ms time to live of those before (and their retention after it).
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
        let kept = tasks.owners.lock().map(|o| o.len()).unwrap_or(usize::MAX);
        assert!(kept <= PRUNE_OWNERS_AT + 1, "{kept} owner entries kept");
    }
}
