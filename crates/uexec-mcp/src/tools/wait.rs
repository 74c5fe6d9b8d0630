//! `wait`: several sessions, one call. Its schema, its arguments, the call, the result (each
//! session's snapshot or error, in the order asked) and the heartbeat that keeps a client's
//! request timeout at bay while it waits on quiet sessions.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use rmcp::RoleServer;
use serde_json::{json, Value};
use uexec_core::limits::{
    DEFAULT_MAX_OUTPUT_TOKENS, DEFAULT_WAIT_YIELD_TIME_MS, MAX_EMPTY_POLL_YIELD_TIME_MS,
    MAX_WAIT_SESSIONS, MIN_YIELD_TIME_MS,
};
use uexec_core::{ExecError, SessionStore, Snapshot, StoreConfig, WaitRequest};

use super::parse::{
    boolean, err, field, integer, kind, object, reject_unknown, until, ArgError, Args, Dialect,
};
use super::render::{self, snapshot_fields, Answer};
use super::schema::{exit_notices_schema, to_schema, until_schema};

pub const NAME: &str = "wait";

/// Field names of `wait`.
pub const FIELDS: &[&str] = &[
    "session_ids",
    "all",
    "until",
    "yield_time_ms",
    "max_output_tokens",
];

/// `wait`: several sessions, one call.
pub fn tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "session_ids": {"type": "array", "items": {"type": "integer"}, "description": format!("Sessions to wait on (1 to {MAX_WAIT_SESSIONS}, each once).")},
            "all": {"type": "boolean", "default": false, "description": "Return when every session exits or meets `until`, not the first. Default: false."},
            "until": until_schema(),
            "yield_time_ms": {"type": "integer", "default": DEFAULT_WAIT_YIELD_TIME_MS, "description": format!("The window: the longest this call waits, in milliseconds. Default {DEFAULT_WAIT_YIELD_TIME_MS}; clamped between {MIN_YIELD_TIME_MS} and {MAX_EMPTY_POLL_YIELD_TIME_MS}. Progress notifications are sent while it waits.")},
            "max_output_tokens": {"type": "integer", "default": DEFAULT_MAX_OUTPUT_TOKENS, "description": format!("Token budget of each session's returned output. Default {DEFAULT_MAX_OUTPUT_TOKENS}, which is also the maximum.")}
        },
        "required": ["session_ids"],
        "additionalProperties": false
    });
    let output = json!({
        "type": "object",
        "properties": {
            "sessions": {"type": "array", "items": {"type": "object", "description": "One snapshot per session, in the order asked (as exec_command's result), or {session_id, error}."}},
            "exit_notices": exit_notices_schema()
        },
        "required": ["sessions"]
    });
    Tool::new(
        NAME,
        "Wait on several running sessions in one call instead of polling each: returns when the first of them (or every one, with all: true) exits or meets `until`, or when the window ends, with each session's new output. Use it to wait for a test suite and a build at once, or for whichever of several servers is ready first.",
        to_schema(schema),
    )
    .with_raw_output_schema(to_schema(output))
}

/// `wait` arguments.
pub fn request(arguments: Option<&Args>) -> Result<WaitRequest, ArgError> {
    let args = object(arguments);
    reject_unknown(&args, FIELDS)?;
    let ids = match field(&args, "session_ids") {
        None => return Err(err("session_ids", "required")),
        Some(Value::Array(items)) => items,
        Some(v) => {
            return Err(err(
                "session_ids",
                format!("expected an array, got {}", kind(v)),
            ))
        }
    };
    let mut session_ids = Vec::with_capacity(ids.len());
    for item in ids {
        let id = item
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| err("session_ids", format!("{item} is not a session id")))?;
        session_ids.push(id);
    }
    Ok(WaitRequest {
        session_ids,
        all: boolean(&args, "all")?.unwrap_or(false),
        until: until(&args)?,
        yield_time_ms: integer(&args, "yield_time_ms")?,
        max_output_tokens: integer(&args, "max_output_tokens")?,
    })
}

/// Each session's snapshot (or error), in the order asked.
pub type Waited = Vec<(i32, Result<Snapshot, ExecError>)>;

/// Waits on the sessions of `store`, with this connection's defaults.
pub async fn call(
    store: &Arc<SessionStore>,
    config: &StoreConfig,
    arguments: Option<&Args>,
    dialect: Dialect,
) -> Answer {
    observe(store, config, arguments)
        .await
        .map(|(_, waited)| result(waited, dialect))
}

/// Waits on the sessions of `store`; the request and what it saw (a task waits on from
/// there: `crate::tasks::wait`).
pub async fn observe(
    store: &Arc<SessionStore>,
    config: &StoreConfig,
    arguments: Option<&Args>,
) -> Result<(WaitRequest, Waited), String> {
    let req = request(arguments).map_err(|e| e.to_string())?;
    let waited = store
        .wait_for(config, req.clone())
        .await
        .map_err(|e| render::error_text(&e))?;
    Ok((req, waited))
}

/// The sessions of a `wait` that its window left unsatisfied (each still running, none
/// exited nor met `until`), to wait on further; empty when the wait returned for good: the
/// first session met (or, with `all`, every one did), or none is left to wait on.
pub fn unsatisfied(all: bool, waited: &Waited) -> Vec<i32> {
    let windowed = |s: &Snapshot| s.reason == uexec_core::Reason::Window;
    let open: Vec<i32> = waited
        .iter()
        .filter(|(_, r)| r.as_ref().is_ok_and(windowed))
        .map(|(id, _)| *id)
        .collect();
    let met = waited
        .iter()
        .any(|(_, r)| r.as_ref().is_ok_and(|s| !windowed(s)));
    if met && !all {
        return Vec::new();
    }
    open
}

/// The `wait` result: each session's snapshot (or error) in the order asked.
pub fn result(results: Waited, dialect: Dialect) -> CallToolResult {
    let mut text = String::new();
    let mut items = Vec::with_capacity(results.len());
    for (id, result) in results {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(&format!("=== Session {id} ===\n"));
        match result {
            Ok(s) => {
                text.push_str(&render::snapshot_text(&s, dialect));
                let mut item = snapshot_fields(&s, true);
                item.entry("session_id").or_insert(json!(id));
                items.push(Value::Object(item));
            }
            Err(e) => {
                text.push_str(&format!("wait failed for session {id}: {e}"));
                items.push(json!({"session_id": id, "error": render::error_text(&e)}));
            }
        }
    }
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(json!({ "sessions": items }));
    result
}

/// How often `wait` says it is still waiting.
const WAIT_HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(2);

/// Progress notifications every `WAIT_HEARTBEAT` (2 s) while it lives (a call drops it when it
/// returns): `progress` is the milliseconds waited so far (it only grows), the message says so.
pub struct Heartbeat(tokio::task::JoinHandle<()>);

impl Heartbeat {
    pub fn start(peer: rmcp::service::Peer<RoleServer>, token: rmcp::model::ProgressToken) -> Self {
        Self(tokio::spawn(beat(peer, token)))
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn beat(peer: rmcp::service::Peer<RoleServer>, token: rmcp::model::ProgressToken) {
    let start = tokio::time::Instant::now();
    let mut ticks = tokio::time::interval_at(start + WAIT_HEARTBEAT, WAIT_HEARTBEAT);
    loop {
        ticks.tick().await;
        let waited = start.elapsed();
        let param =
            rmcp::model::ProgressNotificationParam::new(token.clone(), waited.as_millis() as f64)
                .with_message(format!("still waiting ({:.0} s)", waited.as_secs_f64()));
        if peer.notify_progress(param).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse::args;
    use super::*;

    #[test]
    fn wait_errors_name_the_field() {
        for (a, f) in [
            (json!({}), "session_ids"),
            (json!({"session_ids": 5}), "session_ids"),
            (json!({"session_ids": ["a"]}), "session_ids"),
            (json!({"session_ids": [1000], "all": "yes"}), "all"),
            (json!({"session_ids": [1000], "bogus": 1}), "bogus"),
        ] {
            let e = request(Some(&args(a.clone()))).expect_err("must fail");
            assert_eq!(e.field, f, "{a}");
        }
    }
}
