//! `exec_command`'s tasks: a call that asked for one (`background: true`) whose command still
//! runs at the end of its window, from a client that declared the extension, answers with a
//! task that follows the session. Without `background` the call's result is the snapshot and
//! its session id, in every client: a task hides the id from the model (interactive Claude
//! Code backgrounds every task), which then cannot poll, type or stop.
//!
//! 1. **Creation**: the call runs as always (its window, its `until`); a result that names
//!    a running session becomes `CreateTaskResult`, in the table before it is sent.
//! 2. **Working**: the task follows the session without taking its output (the session's
//!    owner may still poll it with `write_stdin`); every [`STATUS_EVERY`] its status message
//!    says how long it has run, how much it printed and its last line, and its
//!    `pollIntervalMs` how quiet the session is.
//! 3. **Completed**: at the exit, one result: how the session ended (its id and name, the
//!    exit code, the run's whole time, where its transcript is, as far as it is on disk),
//!    then one snapshot whose output is the first window's (which the model never saw: the
//!    task stood in for it) and the rest since, bounded as every result (head and tail, the
//!    bytes between counted). A session whose end someone else reported says so.
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

use rmcp::model::{CallToolResult, ContentBlock, CreateTaskResult};
use rmcp::service::{Peer, RoleServer};
use rmcp::task_manager::{TaskContext, TaskExit};
use serde_json::json;
use uexec_core::backend::Signal;
use uexec_core::limits::DEFAULT_MAX_OUTPUT_TOKENS;
use uexec_core::{SessionStore, Snapshot, StoreConfig};

use super::ask::{Asked, Asker};
use super::kept::{ended_line, Kept};
use super::{Pulse, Tasks, STATUS_EVERY};
use crate::tools::parse::Dialect;
use crate::tools::render::snapshot_fields;
use crate::tools::write_stdin;

/// How long a cancel waits after each signal before the next, stronger one.
pub const CANCEL_STEP: Duration = Duration::from_secs(2);
/// Bytes of recent output read for a status message's last line.
const LAST_LINE_BYTES: usize = 4096;

/// Everything a task needs to follow its session and make the final result.
pub struct Follow {
    pub store: Arc<SessionStore>,
    pub session_id: i32,
    /// The snapshot of the call's window, which the task stood in for.
    pub window: Snapshot,
    pub config: StoreConfig,
    pub dialect: Dialect,
    /// Results carry `structuredContent` (`--structured`); otherwise the text alone.
    pub structured: bool,
    /// Where `notifications/tasks` goes (a client of the initialize handshake).
    pub peer: Option<Peer<RoleServer>>,
    /// The client answers form elicitations: a question becomes `input_required`.
    pub elicits: bool,
    /// The client opens URL-mode elicitations, and is on this machine: a password prompt is
    /// a one-time loopback page.
    pub opens_pages: bool,
    /// The client answers form elicitations only (Codex's default), and is on this machine:
    /// a password prompt is a one-time page all the same, offered in a form's message that
    /// asks the person to say when they are done (or to cancel).
    pub pages_by_form: bool,
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
        structured,
        peer: _,
        elicits,
        opens_pages,
        pages_by_form,
    } = follow;
    let mut asker = Asker::new(elicits, opens_pages, pages_by_form);
    let mut printed = output_bytes(&store, session_id);
    let mut last_output = Instant::now();
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
        match asker.at_prompt(&store, session_id, &context, &pulse).await {
            None => context.set_status_message(status_line(&store, session_id)),
            Some(Asked::Still) => {}
            Some(Asked::Ended) => break,
            Some(Asked::Cancelled) => return cancelled(&store, session_id, &context).await,
        }
    }
    drop(asker);
    context.set_status_message(format!("session {session_id} ended"));
    Ok(ended(&store, session_id, window, &config, dialect, structured).await)
}

/// The result of a task whose session ended: how (id and name, exit, the run's whole time,
/// the transcript), then one snapshot of everything since the model last read the session
/// (the window it never saw, and the rest), bounded as every result.
async fn ended(
    store: &Arc<SessionStore>,
    session_id: i32,
    window: Snapshot,
    config: &StoreConfig,
    dialect: Dialect,
    structured: bool,
) -> CallToolResult {
    let poll = serde_json::Map::from_iter([("session_id".to_owned(), json!(session_id))]);
    let last = match write_stdin::request(Some(&poll), dialect) {
        Ok(request) => store.write_stdin_for(config, request).await,
        Err(e) => return error(format!("write_stdin failed: {e}")),
    };
    let last = match last {
        Ok(last) => last,
        // Someone else reported its end (a poll of the model's, a person's kill): how it
        // ended, and where its output went.
        Err(e) => {
            return match ended_line(store, session_id, None) {
                Some((line, _)) => CallToolResult::success(vec![ContentBlock::text(format!(
                    "{line}\nIts end was reported already, to another call, which read its output."
                ))]),
                None => error(format!(
                    "session {session_id}: {}",
                    crate::tools::render::error_text(&e)
                )),
            };
        }
    };
    let stopped = last.transcript_stop.clone();
    let budget = DEFAULT_MAX_OUTPUT_TOKENS.saturating_mul(4);
    let mut kept = Kept::new(budget);
    kept.add(Ok(window));
    kept.add(Ok(last));
    let Some(Ok(mut whole)) = kept.into_result() else {
        return error(format!("session {session_id}: nothing was kept"));
    };
    let ended = ended_line(store, session_id, stopped.as_ref());
    if let Some((_, ran)) = &ended {
        // The run's whole time, not the last poll's window.
        whole.wall_time = *ran;
    }
    let line = ended.map(|(line, _)| line);
    let text = crate::tools::render::snapshot_text(&whole, dialect);
    let mut content = Vec::with_capacity(2);
    content.extend(line.map(ContentBlock::text));
    content.push(ContentBlock::text(text));
    let mut result = CallToolResult::success(content);
    if structured {
        result.structured_content = Some(serde_json::Value::Object(snapshot_fields(
            &whole,
            dialect.extended,
        )));
    }
    result
}

/// An error result saying `text`.
fn error(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
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
pub(super) fn status_line(store: &SessionStore, session_id: i32) -> String {
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
