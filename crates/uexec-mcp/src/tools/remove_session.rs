//! `remove_session`, a person's tool at the daemon: forget an ended session (`uexec rm`),
//! its transcript with it; a running one only with `force`, which kills it. Its schema, its
//! arguments and the call.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use serde_json::json;
use uexec_core::SessionStore;

use super::parse::{boolean, object, reject_unknown, session_id, ArgError, Args};
use super::render::{self, Answer};
use super::schema::to_schema;

pub const NAME: &str = "remove_session";

pub fn tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "session_id": {"type": "integer", "description": "An ended session (listed by list_sessions, with all: true for those already reported), whoever owns it."},
            "force": {"type": "boolean", "default": false, "description": "Remove it even if it still runs: it is killed first, with every process it started. Default: false (a running session is refused)."}
        },
        "required": ["session_id"],
        "additionalProperties": false
    });
    Tool::new(
        NAME,
        "Forget an ended session and delete its transcript: it is no longer listed, nor its output readable. A running session is refused unless force.",
        to_schema(schema),
    )
}

/// `remove_session`: (session, force).
pub fn request(arguments: Option<&Args>) -> Result<(i32, bool), ArgError> {
    let args = object(arguments);
    reject_unknown(&args, &["session_id", "force"])?;
    Ok((
        session_id(&args)?,
        boolean(&args, "force")?.unwrap_or(false),
    ))
}

/// Removes the session from `store`, its owner's.
pub fn call(store: &Arc<SessionStore>, arguments: Option<&Args>) -> Answer {
    let (id, force) = request(arguments).map_err(|e| e.to_string())?;
    store
        .remove(id, force)
        .map(|()| {
            let mut r =
                CallToolResult::success(vec![ContentBlock::text(format!("Session {id} removed"))]);
            r.structured_content = Some(json!({"session_id": id, "removed": true}));
            r
        })
        .map_err(|e| render::error_text(&e))
}
