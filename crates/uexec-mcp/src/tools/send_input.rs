//! `send_input`, a person's tool at the daemon: type into any session without taking its
//! output (that stays for its owner). Its schema, its arguments and the call.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use serde_json::json;
use uexec_core::SessionStore;

use super::parse::{boolean, object, reject_unknown, session_id, string, ArgError, Args};
use super::render::{self, Answer};
use super::schema::to_schema;

pub const NAME: &str = "send_input";

pub fn tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "session_id": {"type": "integer", "description": "Any session, whoever owns it."},
            "chars": {"type": "string", "default": "", "description": "Bytes to type (a tty session) or to write to its stdin pipe; \"\\u0003\" interrupts a pipe session."},
            "eof": {"type": "boolean", "default": false, "description": "Close the session's stdin pipe afterwards. Default: false."}
        },
        "required": ["session_id"],
        "additionalProperties": false
    });
    Tool::new(
        NAME,
        "Type into a session without taking its output (that stays for its owner).",
        to_schema(schema),
    )
}

/// `send_input`: (session, chars, eof).
pub fn request(arguments: Option<&Args>) -> Result<(i32, String, bool), ArgError> {
    let args = object(arguments);
    reject_unknown(&args, &["session_id", "chars", "eof"])?;
    Ok((
        session_id(&args)?,
        string(&args, "chars")?.unwrap_or_default(),
        boolean(&args, "eof")?.unwrap_or(false),
    ))
}

/// Writes to the session (in `store`, its owner's).
pub async fn call(store: &Arc<SessionStore>, arguments: Option<&Args>) -> Answer {
    let (id, chars, eof) = request(arguments).map_err(|e| e.to_string())?;
    store
        .send_input(id, &chars, eof)
        .await
        .map(|()| {
            let mut r = CallToolResult::success(vec![ContentBlock::text(format!(
                "Sent {} bytes to session {id}{}",
                chars.len(),
                if eof { " and closed its stdin" } else { "" }
            ))]);
            r.structured_content =
                Some(json!({"session_id": id, "bytes": chars.len(), "eof": eof}));
            r
        })
        .map_err(|e| render::error_text(&e))
}
