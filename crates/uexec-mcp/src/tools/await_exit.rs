//! `await_exit`, a person's tool at the daemon: wait for any session's exit without taking
//! its output or its exit report (they stay for its owner). Its schema, its arguments, the
//! call and the result.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use serde_json::json;
use uexec_core::{Outcome, SessionStore};

use super::parse::{err, integer, object, reject_unknown, session_id, ArgError, Args};
use super::render::Answer;
use super::schema::to_schema;

pub const NAME: &str = "await_exit";

pub fn tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "session_id": {"type": "integer", "description": "Any session, whoever owns it."},
            "yield_time_ms": {"type": "integer", "default": 30000, "description": "Longest wait, 0 to 300000 ms. Default 30000."}
        },
        "required": ["session_id"],
        "additionalProperties": false
    });
    Tool::new(
        NAME,
        "Wait for a session's exit without taking its output or its exit report (they stay for its owner); says the exit code.",
        to_schema(schema),
    )
}

/// `await_exit`: (session, milliseconds).
pub fn request(arguments: Option<&Args>) -> Result<(i32, u64), ArgError> {
    let args = object(arguments);
    reject_unknown(&args, &["session_id", "yield_time_ms"])?;
    let ms = match integer(&args, "yield_time_ms")? {
        None => 30_000,
        Some(ms) if (0..=300_000).contains(&ms) => ms as u64,
        Some(ms) => {
            return Err(err(
                "yield_time_ms",
                format!("{ms} is out of range (0..=300000)"),
            ))
        }
    };
    Ok((session_id(&args)?, ms))
}

/// Waits for the session (in `store`, its owner's).
pub async fn call(store: &Arc<SessionStore>, arguments: Option<&Args>) -> Answer {
    let (id, ms) = request(arguments).map_err(|e| e.to_string())?;
    store
        .await_exit(id, Duration::from_millis(ms))
        .await
        .map(|outcome| result(id, outcome))
        .map_err(|e| e.to_string())
}

fn result(id: i32, outcome: Option<Outcome>) -> CallToolResult {
    let (text, structured) = match outcome {
        None => (
            format!("Session {id} is still running"),
            json!({"session_id": id, "exited": false}),
        ),
        Some(o) => {
            let mut v = json!({"session_id": id, "exited": true});
            if let Some(code) = o.exit_code {
                v["exit_code"] = json!(code);
            }
            if let Some(f) = &o.failure {
                v["failure"] = json!(f);
            }
            let how = match (&o.failure, o.exit_code) {
                (Some(f), _) => format!("failed: {f}"),
                (None, Some(code)) => format!("exited with code {code}"),
                (None, None) => "exited".to_owned(),
            };
            (format!("Session {id} {how}"), v)
        }
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(structured);
    result
}
