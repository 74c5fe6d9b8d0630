//! `keep_session`, a person's tool at the daemon (`uexec keep`): an agent's session kept
//! running after the agent's last client has gone, instead of being ended with it (the
//! daemon's linger, `crate::daemon`), or no longer kept. Its schema, its arguments and the
//! call.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use serde_json::json;
use uexec_core::SessionStore;

use super::parse::{boolean, object, reject_unknown, session_id, ArgError, Args};
use super::render::{self, Answer};
use super::schema::to_schema;

pub const NAME: &str = "keep_session";

pub fn tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "session_id": {"type": "integer", "description": "A running session, whoever owns it."},
            "kept": {"type": "boolean", "description": "false: no longer kept, so it ends with its owner's clients again (default true)."}
        },
        "required": ["session_id"],
        "additionalProperties": false
    });
    Tool::new(
        NAME,
        "Keep a session running after its owner's last client has gone (an agent's sessions otherwise end then, after its linger); list_sessions shows it kept. kept: false undoes it.",
        to_schema(schema),
    )
}

/// `keep_session`: the session, and whether it is to be kept.
pub fn request(arguments: Option<&Args>) -> Result<(i32, bool), ArgError> {
    let args = object(arguments);
    reject_unknown(&args, &["session_id", "kept"])?;
    Ok((session_id(&args)?, boolean(&args, "kept")?.unwrap_or(true)))
}

/// Keeps the session (in `store`, its owner's), or no longer.
pub fn call(store: &Arc<SessionStore>, arguments: Option<&Args>) -> Answer {
    let (id, kept) = request(arguments).map_err(|e| e.to_string())?;
    store.keep(id, kept).map_err(|e| render::error_text(&e))?;
    let text = if kept {
        format!("Session {id} kept: it runs on after its owner's clients are gone")
    } else {
        format!("Session {id} no longer kept: it ends with its owner's clients")
    };
    let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
    r.structured_content = Some(json!({"session_id": id, "kept": kept}));
    Ok(r)
}
