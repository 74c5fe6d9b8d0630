//! `exec_command`'s tasks: a call whose command still runs at the end of its window, from a
//! client that declared the extension, answers with a task that follows the session.
//!
//! 1. **Creation**: the call runs as always (its window, its `until`); a result that names
//!    a running session becomes `CreateTaskResult`, in the table before it is sent.
//! 2. **Working**: the task follows the session without taking its output (the session's
//!    owner may still poll it with `write_stdin`); every [`STATUS_EVERY`] its status message
//!    says how long it has run, how much it printed and its last line, and its
//!    `pollIntervalMs` how quiet the session is.
//! 3. **Completed**: at the exit, the normal result: the first window's snapshot (which the
//!    model never saw: the task stood in for it), then a poll's (the rest since the last
//!    read, and the exit code), and where its transcript is. A session whose end someone else
//!    reported says so.
//! 4. **Input required**: a session that waits at a prompt (as `until: {prompt: true}` sees
//!    it) makes the task `input_required`, for a client that declared form elicitation: the
//!    question is a form with one field, `answer`, and `tasks/update` types it (and a
//!    newline). A password prompt (echo off) is never a form: for a client on this machine
//!    that declared URL-mode elicitation it is a one-time loopback page ([`super::page`])
//!    where the person types it; otherwise the status message says to ask the person. The
//!    secret never passes through the model. A question asked (or declined) is not asked
//!    again until the session prints something new.
//! 5. **Cancelled** (`tasks/cancel`): Ctrl-C to the session's processes, then SIGTERM, then
//!    SIGKILL, [`CANCEL_STEP`] apart, until it exits.
//! 6. **Told**: listeners of `subscriptions/listen` that asked for the task, and a client of
//!    the initialize handshake, hear `notifications/tasks` when it asks and when it ends.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolResult, CreateTaskResult, ElicitRequest, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationSchema, InputRequest, TaskStatus,
};
use rmcp::service::{Peer, RoleServer};
use rmcp::task_manager::{TaskContext, TaskExit};
use serde_json::json;
use uexec_core::backend::Signal;
use uexec_core::{SessionStore, StoreConfig};

use super::page::{self, Page};
use super::{Pulse, Tasks, STATUS_EVERY};
use crate::tools::parse::Dialect;
use crate::tools::write_stdin;

/// How long a cancel waits after each signal before the next, stronger one.
pub const CANCEL_STEP: Duration = Duration::from_secs(2);
/// How long a question waits for its answer at most.
const WHILE_ASKING: Duration = super::RETENTION;
/// Bytes of recent output read for a status message's last line.
const LAST_LINE_BYTES: usize = 4096;

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
    /// The client answers form elicitations: a question becomes `input_required`.
    pub elicits: bool,
    /// The client opens URL-mode elicitations, and is on this machine: a password prompt is
    /// a one-time loopback page.
    pub opens_pages: bool,
}

impl Tasks<SessionStore> {
    /// Makes a task that follows `follow.session_id` to its end; the answer to the call.
    pub fn create(&self, follow: Follow) -> CreateTaskResult {
        let store = follow.store.clone();
        let peer = follow.peer.clone();
        let status = status_line(&follow.store, follow.session_id);
        self.spawn_followed(&store, status, peer, move |context, pulse| {
            Box::pin(run(follow, context, pulse))
        })
    }
}

/// Follows the session to its end (or cancels it), then makes the result.
async fn run(
    follow: Follow,
    context: TaskContext,
    pulse: Pulse,
) -> Result<CallToolResult, TaskExit> {
    let Follow {
        store,
        session_id,
        window,
        config,
        dialect,
        peer: _,
        elicits,
        opens_pages,
    } = follow;
    let mut asked = 0u32;
    // The output a question was last asked at: not asked again until it changes.
    let mut asked_at: Option<String> = None;
    let mut printed = output_bytes(&store, session_id);
    let mut last_output = Instant::now();
    // The page the last password prompt was given (withdrawn when dropped).
    let mut page: Option<Page> = None;
    loop {
        tokio::select! {
            exited = store.await_exit(session_id, STATUS_EVERY) => match exited {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) => {}
            },
            () = context.cancelled() => return cancelled(&store, session_id, &context).await,
        }
        let now = output_bytes(&store, session_id);
        if now != printed {
            (printed, last_output) = (now, Instant::now());
        }
        pulse.quiet_for(last_output.elapsed());
        let Some(prompt) = store.prompt(session_id) else {
            context.set_status_message(status_line(&store, session_id));
            continue;
        };
        let seen = store.recent_output(session_id, LAST_LINE_BYTES);
        let can_ask = if prompt.secret { opens_pages } else { elicits };
        if !can_ask || (asked_at.is_some() && asked_at == seen) {
            let on_page = page.as_ref().filter(|p| p.open()).map(Page::url);
            context.set_status_message(prompt_line(session_id, &prompt, on_page.is_some()));
            continue;
        }
        asked += 1;
        asked_at = seen;
        let request = if prompt.secret {
            match page::open(&store, session_id, &prompt.line).await {
                Ok(opened) => page.insert(opened).request(session_id, &prompt.line),
                Err(why) => {
                    tracing::warn!("session {session_id}: {why}");
                    context.set_status_message(prompt_line(session_id, &prompt, false));
                    continue;
                }
            }
        } else {
            match form(session_id, &prompt.line) {
                Some(request) => request,
                None => continue,
            }
        };
        pulse.announce(|status| status == TaskStatus::InputRequired);
        let question = context.request_input(format!("prompt-{asked}"), request);
        let answer = tokio::select! {
            answer = question => answer.ok().and_then(|v| serde_json::from_value::<ElicitResult>(v).ok()),
            _ = store.await_exit(session_id, WHILE_ASKING) => break,
            () = context.cancelled() => return cancelled(&store, session_id, &context).await,
        };
        let accepted = answer.filter(|a| a.action == ElicitationAction::Accept);
        if prompt.secret {
            // Accepted: the person answers on the page (what they type never comes here).
            if accepted.is_none() {
                page = None;
            }
            let on_page = page.as_ref().is_some_and(Page::open);
            context.set_status_message(prompt_line(session_id, &prompt, on_page));
            continue;
        }
        let typed = accepted
            .and_then(|a| a.content)
            .and_then(|c| c.get("answer")?.as_str().map(str::to_owned));
        if let Some(text) = typed {
            // Typed as a person would: the answer, then Enter.
            let _ = store
                .send_input(session_id, &format!("{text}\n"), false)
                .await;
            asked_at = None;
        }
    }
    drop(page);
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

/// The form that asks what to type at the prompt `line`: one field, `answer`.
fn form(session_id: i32, line: &str) -> Option<InputRequest> {
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
    Some(InputRequest::Elicitation(ElicitRequest::new(params)))
}

impl Page {
    /// The URL-mode elicitation that sends the person to this page.
    fn request(&self, session_id: i32, line: &str) -> InputRequest {
        let params = ElicitRequestParams::UrlElicitationParams {
            meta: None,
            message: format!(
                "session {session_id} waits at a password prompt: {line}\nOpen this page to type the password into it yourself (it works once); it never passes through the model."
            ),
            url: self.url().to_owned(),
            elicitation_id: self.elicitation_id().to_owned(),
        };
        InputRequest::Elicitation(ElicitRequest::new(params))
    }
}

/// Stops the session (Ctrl-C, TERM, KILL) and settles the task `cancelled`.
async fn cancelled(
    store: &Arc<SessionStore>,
    session_id: i32,
    context: &TaskContext,
) -> Result<CallToolResult, TaskExit> {
    cancel(store, session_id).await;
    context.set_status_message(format!("session {session_id} cancelled"));
    Err(TaskExit::Cancelled)
}

/// Bytes the session printed so far.
fn output_bytes(store: &SessionStore, session_id: i32) -> u64 {
    store
        .list_sessions()
        .into_iter()
        .find(|s| s.session_id == session_id)
        .map_or(0, |s| s.output_bytes)
}

/// `session 7 waits at a password prompt (echo off): ...`.
fn prompt_line(session_id: i32, prompt: &uexec_core::Prompt, on_page: bool) -> String {
    if prompt.secret && on_page {
        format!(
            "session {session_id} waits at a password prompt (echo off): {}; the person was given a one-time page to type it (or uexec attach --write {session_id} in the daemon), never send secrets yourself",
            prompt.line
        )
    } else if prompt.secret {
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
