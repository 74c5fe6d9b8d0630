//! PostToolUse, exactly once per `exec_command` that ran, with the call's id and input.
//!
//! Why the store's event stream and not a new seam in core: core publishes one End per
//! session, when its process exits (the lifecycle watcher of a stored session, or the call
//! that saw it end), whether or not anyone polls; the End carries the call id, the exit
//! code, the duration, the output and the transcript; and a subscriber that takes no output
//! is queued every Begin and End, none lost. So one follower per call, subscribed before the
//! spawn, sees its End once and runs the hooks once:
//!
//! 1. [`watch`] subscribes and starts the follower; the call goes through the door;
//! 2. the call tells it how it returned ([`Returned`]): refused (nothing ran: no hook),
//!    ended in its window (the call waits for the hooks, and their words are in its
//!    result), or still running (the hooks run at the exit, in this process, whoever is
//!    connected then); a call dropped mid-way (cancelled) tells nothing, and its command,
//!    if it was spawned, is followed to its end all the same;
//! 3. the End of the call's session: the hooks run, each with its timeout.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use serde_json::{json, Map, Value};
use tokio::sync::oneshot;
use uexec_core::{Event, EventKind, EventStream, SessionStore};

use super::run::{run, trouble, Ran};
use super::{HookCommand, TOOL_NAMES};

/// How long a call that ended in its window waits for its End, besides its hooks' time.
const END_WAIT_MS: u64 = 5_000;
/// The last bytes of the output a PostToolUse hook is given (the transcript has the rest).
const OUTPUT_TAIL_MAX_BYTES: usize = 4096;

/// How the call returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Returned {
    /// Refused or failed before its command ran.
    Refused,
    /// Its command ended within its window.
    Exited,
    /// Its command outlived its window.
    Running,
}

/// One call's PostToolUse hooks, as the call holds them.
pub(super) struct Watch {
    returned: oneshot::Sender<Returned>,
    report: oneshot::Receiver<Vec<String>>,
    budget: Duration,
}

/// What the hooks are told besides the End.
pub(super) struct PostToolUse {
    pub hooks: Vec<HookCommand>,
    pub input: Value,
    pub call_id: String,
    pub dir: PathBuf,
}

/// Subscribes to `store`'s events and follows the call (step 1).
pub(super) fn watch(store: &Arc<SessionStore>, post: PostToolUse) -> Watch {
    let events = store.subscribe_changes();
    let (returned, returned_rx) = oneshot::channel();
    let (report_tx, report) = oneshot::channel();
    let longest = post.hooks.iter().map(|h| h.timeout).max();
    let budget = longest.unwrap_or_default() + Duration::from_millis(END_WAIT_MS);
    tokio::spawn(follow(events, post, returned_rx, report_tx));
    Watch {
        returned,
        report,
        budget,
    }
}

impl Watch {
    /// Step 2; for a command that ended in the window, what its hooks said.
    pub(super) async fn returned(self, how: Returned) -> Vec<String> {
        // The follower is gone only when the store is: nothing to run then.
        let _ = self.returned.send(how);
        if how != Returned::Exited {
            return Vec::new();
        }
        match tokio::time::timeout(self.budget, self.report).await {
            Ok(Ok(notes)) => notes,
            Ok(Err(_)) => Vec::new(),
            Err(_) => vec![format!(
                "PostToolUse hooks: not done {} s after the command ended; they go on without this call",
                self.budget.as_secs()
            )],
        }
    }
}

/// The follower (steps 2 and 3).
async fn follow(
    mut events: EventStream,
    post: PostToolUse,
    mut returned: oneshot::Receiver<Returned>,
    report: oneshot::Sender<Vec<String>>,
) {
    let mut begun = false;
    let mut how: Option<Option<Returned>> = None;
    let end = 'end: loop {
        tokio::select! {
            said = &mut returned, if how.is_none() => {
                let said = said.ok();
                how = Some(said);
                match said {
                    Some(Returned::Refused) => return,
                    // Cancelled: a spawn, if there was one, published its Begin already.
                    None if !begun => {
                        while let Some(Some(event)) = events.recv().now_or_never() {
                            if let Some(end) = ours(&event, &post.call_id, &mut begun) {
                                break 'end end;
                            }
                        }
                        if !begun {
                            return;
                        }
                    }
                    _ => {}
                }
            }
            event = events.recv() => {
                let Some(event) = event else {
                    tracing::warn!(call_id = %post.call_id, "PostToolUse: the store ended before the command did; no hook ran");
                    return;
                };
                if let Some(end) = ours(&event, &post.call_id, &mut begun) {
                    break end;
                }
            }
        }
    };
    let how = match how {
        Some(how) => how,
        None => returned.await.ok(),
    };
    if how == Some(Returned::Refused) {
        return;
    }
    let notes = fire(&post, &end, how != Some(Returned::Running)).await;
    if let Err(notes) = report.send(notes) {
        for note in notes {
            tracing::info!(call_id = %post.call_id, "{note}");
        }
    }
}

/// The End of the call's session, if `event` is it (its Begin noted).
fn ours(event: &Arc<Event>, call_id: &str, begun: &mut bool) -> Option<Arc<Event>> {
    if event.call_id != call_id {
        return None;
    }
    match event.kind {
        EventKind::Begin { .. } => {
            *begun = true;
            None
        }
        EventKind::End { .. } => Some(event.clone()),
        _ => None,
    }
}

/// Runs the hooks on `end`; what they said for the model, and every trouble logged.
async fn fire(post: &PostToolUse, end: &Event, in_window: bool) -> Vec<String> {
    let EventKind::End {
        exit_code,
        status,
        aggregated_output,
        duration,
        failure,
        transcript,
        ..
    } = &end.kind
    else {
        return Vec::new();
    };
    let signal = exit_code
        .filter(|c| (129..=192).contains(c))
        .map(|c| c - 128);
    let response = json!({
        "session_id": end.session_id,
        "exit_code": exit_code,
        "signal": signal,
        "status": if *status == uexec_core::EndStatus::Completed { "completed" } else { "failed" },
        "duration_ms": u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
        "output_tail": tail(aggregated_output),
        "transcript_path": transcript,
        "failure": failure,
        "ended": if in_window { "in_window" } else { "after_return" },
    });
    let event = json!({
        "session_id": post.call_id,
        "hook_event_name": "PostToolUse",
        "tool_name": TOOL_NAMES[0],
        "tool_input": post.input,
        "tool_use_id": post.call_id,
        "tool_response": response,
        "cwd": post.dir,
    });
    run_all("PostToolUse", &post.hooks, &event, &post.dir, &post.call_id).await
}

/// Runs every hook of `name` on `event` at once, each with its timeout: what they said for
/// the model ([`said_as`]), every trouble logged and said too.
pub(super) async fn run_all(
    name: &str,
    hooks: &[HookCommand],
    event: &Value,
    dir: &std::path::Path,
    call_id: &str,
) -> Vec<String> {
    let ran = futures::future::join_all(hooks.iter().map(|h| run(h, event, dir))).await;
    let mut notes = Vec::new();
    for (hook, ran) in hooks.iter().zip(ran) {
        if let Some(trouble) = trouble(name, hook, &ran) {
            tracing::warn!(call_id = %call_id, "{trouble}");
            notes.push(trouble);
            continue;
        }
        notes.extend(said_as(name, hook, &ran));
    }
    notes
}

/// What a PostToolUse (or PostToolUseFailure) hook of `event` that ran says to the model: its
/// stderr on exit 2, its JSON's `reason` (with `decision: block`) and `additionalContext`.
fn said_as(event: &str, hook: &HookCommand, ran: &Ran) -> Vec<String> {
    let Ran::Exited {
        code: Some(code),
        stdout,
        stderr,
    } = ran
    else {
        return Vec::new();
    };
    let who = format!("{event} hook {:?}", hook.command);
    if *code == 2 {
        return vec![format!("{who}: {}", stderr.trim())];
    }
    let text = stdout.trim();
    if !text.starts_with('{') {
        return Vec::new();
    }
    let json: Map<String, Value> = match serde_json::from_str(text) {
        Ok(json) => json,
        Err(e) => {
            let trouble = format!("{who} printed bad JSON ({e}); ignored");
            tracing::warn!("{trouble}");
            return vec![trouble];
        }
    };
    let mut notes = Vec::new();
    if let Some(reason) = json.get("reason").and_then(Value::as_str) {
        notes.push(format!("{who}: {reason}"));
    }
    let context = json
        .get("hookSpecificOutput")
        .and_then(|s| s.get("additionalContext"))
        .and_then(Value::as_str);
    if let Some(context) = context {
        notes.push(format!("{who}: {context}"));
    }
    notes
}

/// The last `OUTPUT_TAIL_MAX_BYTES` of `output`, from a character's start.
fn tail(output: &str) -> &str {
    let mut from = output.len().saturating_sub(OUTPUT_TAIL_MAX_BYTES);
    while !output.is_char_boundary(from) {
        from += 1;
    }
    &output[from..]
}
