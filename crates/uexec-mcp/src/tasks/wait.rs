//! `wait`'s tasks: a `wait` whose window ended with every session it waits on still running,
//! none having met `until`, from a client that declared the extension, answers with a task
//! that waits on as `wait` itself would have, were its window endless: it completes when the
//! first session (or, with `all`, every one) exits or meets `until`. This is how a model goes
//! on working and is woken by a session's end: interactive Claude Code backgrounds the task
//! and hands the model its result when it completes.
//!
//! It waits window after window (the call's own `yield_time_ms`, as a client calling `wait`
//! again would), keeping what each window read, the call's own first: every session's output
//! since the model last read it is in the result, its first and last [`wait`] budget's worth
//! when it printed more, with the bytes left out between them counted, and each session that
//! ended says how, after how long, and where its transcript is ([`super::kept`]). A session
//! another call is waiting on or polling is locked for a window at most, as with any
//! `wait`. `tasks/cancel` stops the waiting (not the sessions) and settles `cancelled`.
//! While it works, its status message names each session, how long it has run, how much it
//! printed and its last line.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{CallToolResult, ContentBlock, CreateTaskResult};
use rmcp::service::{Peer, RoleServer};
use rmcp::task_manager::{TaskContext, TaskExit};
use uexec_core::limits::DEFAULT_MAX_OUTPUT_TOKENS;
use uexec_core::{SessionStore, StoreConfig, WaitRequest};

use super::ask::{Asked, Asker};
use super::kept::{ended_line, Kept};
use super::{Pulse, Tasks, STATUS_EVERY};
use crate::tools::wait::{self, Waited};

/// Everything a `wait` task needs.
pub struct Waiting {
    pub store: Arc<SessionStore>,
    pub config: StoreConfig,
    /// The call's request.
    pub request: WaitRequest,
    /// The sessions its window left unsatisfied ([`wait::unsatisfied`]).
    pub following: Vec<i32>,
    /// What the call's window saw of each session, in the order asked: the task stands in
    /// for that result, so the model has read none of it.
    pub seen: Waited,
    /// Results carry `structuredContent` (`--structured`); otherwise the text alone.
    pub structured: bool,
    pub dialect: crate::tools::parse::Dialect,
    /// What the client lets a task ask its person (as `exec_command`'s: [`super::ask`]).
    pub asks: (bool, bool, bool),
    /// Where `notifications/tasks` goes (a client of the initialize handshake).
    pub peer: Option<Peer<RoleServer>>,
}

impl Tasks<SessionStore> {
    /// Makes a task that waits on `waiting.following`; the answer to the call.
    pub fn wait(&self, waiting: Waiting) -> CreateTaskResult {
        let store = waiting.store.clone();
        let peer = waiting.peer.clone();
        let status = status_line(
            &store,
            &waiting.following,
            Duration::ZERO,
            waiting.request.all,
        );
        self.spawn_followed(&store, status, peer, move |context, pulse| {
            Box::pin(run(waiting, context, pulse))
        })
    }
}

async fn run(
    waiting: Waiting,
    context: TaskContext,
    pulse: Pulse,
) -> Result<CallToolResult, TaskExit> {
    let Waiting {
        store,
        config,
        request,
        following,
        seen,
        structured,
        dialect,
        asks: (elicits, opens_pages, pages_by_form),
        peer: _,
    } = waiting;
    // A session that waits at a question while the task waits on it asks the person.
    let mut askers: HashMap<i32, Asker> = following
        .iter()
        .map(|id| (*id, Asker::new(elicits, opens_pages, pages_by_form)))
        .collect();
    let budget = request
        .max_output_tokens
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS)
        .saturating_mul(4);
    let mut kept: HashMap<i32, Kept> = HashMap::new();
    // In the order asked: the window's own result for a session the task does not follow
    // (it met `until` or failed then), else what the task kept of it.
    let mut order = Vec::with_capacity(seen.len());
    let mut settled: HashMap<i32, _> = HashMap::new();
    for (id, result) in seen {
        order.push(id);
        if following.contains(&id) {
            kept.entry(id)
                .or_insert_with(|| Kept::new(budget))
                .add(result);
        } else {
            settled.insert(id, result);
        }
    }
    let mut open = following.clone();
    let started = Instant::now();
    let mut last_output = Instant::now();
    let mut failed = None;
    while !open.is_empty() {
        let mut next = request.clone();
        next.session_ids = open.clone();
        let call = store.wait_for(&config, next);
        tokio::pin!(call);
        let mut ticks = tokio::time::interval(STATUS_EVERY);
        let waited = loop {
            tokio::select! {
                waited = &mut call => break waited,
                _ = ticks.tick() => {
                    pulse.quiet_for(last_output.elapsed());
                    context.set_status_message(status_line(&store, &open, started.elapsed(), request.all));
                    for id in &open {
                        let Some(asker) = askers.get_mut(id) else { continue };
                        if let Some(Asked::Cancelled) = asker.at_prompt(&store, *id, &context, &pulse).await {
                            context.set_status_message(format!("stopped waiting on {}", ids(&open)));
                            return Err(TaskExit::Cancelled);
                        }
                    }
                }
                () = context.cancelled() => {
                    context.set_status_message(format!("stopped waiting on {}", ids(&open)));
                    return Err(TaskExit::Cancelled);
                }
            }
        };
        let waited = match waited {
            Ok(waited) => waited,
            Err(e) => {
                failed = Some(crate::tools::render::error_text(&e));
                break;
            }
        };
        if waited
            .iter()
            .any(|(_, r)| r.as_ref().is_ok_and(|s| !s.output.is_empty()))
        {
            last_output = Instant::now();
        }
        let still = wait::unsatisfied(request.all, &waited);
        for (id, result) in waited {
            if let Some(k) = kept.get_mut(&id) {
                k.add(result);
            }
        }
        open = still;
    }
    context.set_status_message(format!("waited on {}", ids(&following)));
    let mut all: Waited = Vec::with_capacity(order.len());
    for id in order {
        let result = match settled.remove(&id) {
            Some(result) => Some(result),
            None => kept.remove(&id).and_then(Kept::into_result),
        };
        if let Some(result) = result {
            all.push((id, result));
        }
    }
    // How each session that ended did, first: what a model woken by the end reads first.
    let ends: Vec<String> = all
        .iter()
        .filter_map(|(id, r)| {
            let s = r.as_ref().ok()?;
            s.exit_code()?;
            ended_line(&store, *id, s.transcript_stop.as_ref()).map(|(line, _)| line)
        })
        .collect();
    let mut result = wait::result(all, dialect);
    if !ends.is_empty() {
        result
            .content
            .insert(0, ContentBlock::text(ends.join("\n")));
    }
    if let Some(why) = failed {
        result
            .content
            .push(ContentBlock::text(format!("wait failed: {why}")));
    }
    if !structured {
        result.structured_content = None;
    }
    Ok(result)
}

/// `waiting on sessions 3, 5 for 12.0 s (until the first exits or meets until): session 3
/// (npm test) running for 14.1 s, 4.2 KiB printed; last line: PASS app.test.ts; ...`.
fn status_line(store: &SessionStore, open: &[i32], waited: Duration, all: bool) -> String {
    let which = if all { "every one" } else { "the first" };
    let each: Vec<String> = open
        .iter()
        .map(|id| super::exec::status_line(store, *id))
        .collect();
    format!(
        "waiting on {} for {:.1} s (until {which} exits or meets until): {}",
        ids(open),
        waited.as_secs_f64(),
        each.join("; ")
    )
}

/// `session 3` or `sessions 3, 5`.
fn ids(ids: &[i32]) -> String {
    let list: Vec<String> = ids.iter().map(i32::to_string).collect();
    match list.len() {
        1 => format!("session {}", list[0]),
        _ => format!("sessions {}", list.join(", ")),
    }
}
