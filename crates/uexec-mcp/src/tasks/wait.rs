//! `wait`'s tasks: a `wait` whose window ended with every session it waits on still running,
//! none having met `until`, from a client that declared the extension, answers with a task
//! that waits on as `wait` itself would have, were its window endless: it completes when the
//! first session (or, with `all`, every one) exits or meets `until`.
//!
//! It waits window after window (the call's own `yield_time_ms`, as a client calling `wait`
//! again would), keeping what each window read: every session's output is in the result,
//! its first and last [`wait`](crate::tools::wait) budget's worth when it printed more,
//! with the bytes left out between them counted (the transcript has every byte). A session
//! another call is waiting on or polling is locked for a window at most, as with any
//! `wait`. `tasks/cancel` stops the waiting (not the sessions) and settles `cancelled`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{CallToolResult, CreateTaskResult};
use rmcp::service::{Peer, RoleServer};
use rmcp::task_manager::{TaskContext, TaskExit};
use uexec_core::limits::DEFAULT_MAX_OUTPUT_TOKENS;
use uexec_core::snapshot::omitted_marker;
use uexec_core::{ExecError, SessionStore, Snapshot, StoreConfig, WaitRequest};

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
    /// The window's result, which the task stood in for.
    pub window: CallToolResult,
    /// Where `notifications/tasks` goes (a client of the initialize handshake).
    pub peer: Option<Peer<RoleServer>>,
}

impl Tasks<SessionStore> {
    /// Makes a task that waits on `waiting.following`; the answer to the call.
    pub fn wait(&self, waiting: Waiting) -> CreateTaskResult {
        let store = waiting.store.clone();
        let peer = waiting.peer.clone();
        let status = status_line(&waiting.following, Duration::ZERO, waiting.request.all);
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
        window,
        peer: _,
    } = waiting;
    let budget = request
        .max_output_tokens
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS)
        .saturating_mul(4);
    let mut kept: HashMap<i32, Kept> = following
        .iter()
        .map(|id| (*id, Kept::new(budget)))
        .collect();
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
                    context.set_status_message(status_line(&open, started.elapsed(), request.all));
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
    let rest: Waited = following
        .iter()
        .filter_map(|id| {
            kept.remove(id)
                .and_then(|k| k.into_result())
                .map(|r| (*id, r))
        })
        .collect();
    let mut result = window;
    result.content.extend(wait::result(rest).content);
    if let Some(why) = failed {
        result.content.push(rmcp::model::ContentBlock::text(format!(
            "wait failed: {why}"
        )));
    }
    Ok(result)
}

/// One session's output over every window, bounded: its first and last `budget / 2` bytes,
/// and the count of those between.
struct Kept {
    half: usize,
    head: String,
    tail: String,
    omitted: u64,
    tokens: u64,
    wall: Duration,
    last: Option<Result<Snapshot, ExecError>>,
}

impl Kept {
    fn new(budget: u64) -> Self {
        Self {
            half: usize::try_from(budget / 2).unwrap_or(usize::MAX),
            head: String::new(),
            tail: String::new(),
            omitted: 0,
            tokens: 0,
            wall: Duration::ZERO,
            last: None,
        }
    }

    fn add(&mut self, result: Result<Snapshot, ExecError>) {
        if let Ok(s) = &result {
            self.tokens += s.original_token_count;
            self.wall += s.wall_time;
            let mut text = s.output.as_str();
            if self.head.len() < self.half {
                let mut room = (self.half - self.head.len()).min(text.len());
                while !text.is_char_boundary(room) {
                    room -= 1;
                }
                self.head.push_str(&text[..room]);
                text = &text[room..];
            }
            self.tail.push_str(text);
            if self.tail.len() > self.half {
                let mut cut = self.tail.len() - self.half;
                while !self.tail.is_char_boundary(cut) {
                    cut += 1;
                }
                self.omitted += cut as u64;
                self.tail.drain(..cut);
            }
        }
        self.last = Some(result);
    }

    /// The last window's snapshot, with the output of every window.
    fn into_result(self) -> Option<Result<Snapshot, ExecError>> {
        let mut last = self.last?;
        if let Ok(s) = &mut last {
            s.output = if self.omitted == 0 {
                format!("{}{}", self.head, self.tail)
            } else {
                format!("{}{}{}", self.head, omitted_marker(self.omitted), self.tail)
            };
            s.original_token_count = self.tokens;
            s.wall_time = self.wall;
            s.omitted_range = None;
            s.omitted_coverage = None;
        }
        Some(last)
    }
}

/// `waiting on sessions 3, 5 for 12.0 s (until the first exits or meets until)`.
fn status_line(open: &[i32], waited: Duration, all: bool) -> String {
    let which = if all { "every one" } else { "the first" };
    format!(
        "waiting on {} for {:.1} s (until {which} exits or meets until)",
        ids(open),
        waited.as_secs_f64()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_output_is_bounded_and_counts_what_it_left_out() {
        let mut kept = Kept::new(8);
        let snapshot = |text: &str| {
            Ok(Snapshot {
                chunk_id: "000000".into(),
                wall_time: Duration::from_secs(1),
                status: uexec_core::Status::Running { session_id: 1000 },
                original_token_count: 2,
                output: text.into(),
                reason: uexec_core::Reason::Window,
                matched: None,
                timed_out_ms: None,
                awaiting_secret: false,
                silent_pipe: false,
                transcript: None,
                omitted_range: None,
                omitted_coverage: None,
                transcript_stop: None,
                sandbox: None,
                usage: None,
                ending: Default::default(),
            })
        };
        kept.add(snapshot("abcdef"));
        kept.add(snapshot("ghijkl"));
        let Some(Ok(s)) = kept.into_result() else {
            panic!("a snapshot");
        };
        assert_eq!(s.output, format!("abcd{}ijkl", omitted_marker(4)));
        assert_eq!(
            (s.original_token_count, s.wall_time),
            (4, Duration::from_secs(2))
        );
    }
}
