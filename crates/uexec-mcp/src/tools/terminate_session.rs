//! `terminate_session`: kill a session and every process it started. Its schema, its
//! argument and the call.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use serde_json::json;
use uexec_core::{ExecError, SessionStore};

use super::parse::{object, reject_unknown, session_id, ArgError, Args};
use super::render::Answer;
use super::schema::to_schema;

pub const NAME: &str = "terminate_session";

pub fn tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "session_id": {"type": "integer", "description": "The session to kill, with every process it started."}
        },
        "required": ["session_id"],
        "additionalProperties": false
    });
    Tool::new(
        NAME,
        "Kill a running session and every process it started (SIGKILL to its process group). Use it to stop dev servers and watchers you no longer need.",
        to_schema(schema),
    )
}

/// `session_id` of `terminate_session`.
pub fn request(arguments: Option<&Args>) -> Result<i32, ArgError> {
    let args = object(arguments);
    reject_unknown(&args, &["session_id"])?;
    session_id(&args)
}

/// Kills the session of `store`.
/// Terminates the session; `by` someone else than its owner (a person), its owner's next
/// result says so.
pub fn call(store: &Arc<SessionStore>, arguments: Option<&Args>, by: Option<&str>) -> Answer {
    let id = request(arguments).map_err(|e| e.to_string())?;
    let ended = match by {
        Some(by) => store.terminate_by(id, by),
        None => store.terminate(id),
    };
    ended
        .map(|()| {
            CallToolResult::success(vec![ContentBlock::text(format!("Session {id} terminated"))])
        })
        .map_err(|e: ExecError| e.to_string())
}
