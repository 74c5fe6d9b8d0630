//! `pause_session` and `resume_session`, a person's tools at the daemon (`uexec pause`,
//! `uexec resume`): freeze a running session's processes, every descendant with them, and
//! thaw them, where the session has a cgroup. One file for the pair: one argument, one
//! engine call, told apart by which way it goes. Their schemas, their arguments and the
//! call.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use serde_json::json;
use uexec_core::SessionStore;

use super::parse::{object, reject_unknown, session_id, ArgError, Args};
use super::render::{self, Answer};
use super::schema::to_schema;

pub const PAUSE: &str = "pause_session";
pub const RESUME: &str = "resume_session";

fn tool(name: &'static str, description: &'static str) -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "session_id": {"type": "integer", "description": "A running session, whoever owns it."}
        },
        "required": ["session_id"],
        "additionalProperties": false
    });
    Tool::new(name, description, to_schema(schema))
}

pub fn pause_tool() -> Tool {
    tool(
        PAUSE,
        "Freeze a running session and every process it started (cgroup.freeze), returning once the kernel says they are frozen; list_sessions shows it paused until resume_session. Refused for a session without a cgroup.",
    )
}

pub fn resume_tool() -> Tool {
    tool(
        RESUME,
        "Thaw a session pause_session froze, returning once the kernel says it runs again.",
    )
}

/// `pause_session` and `resume_session`: the session.
pub fn request(arguments: Option<&Args>) -> Result<i32, ArgError> {
    let args = object(arguments);
    reject_unknown(&args, &["session_id"])?;
    session_id(&args)
}

/// Freezes (`frozen`) or thaws the session (in `store`, its owner's).
pub async fn call(store: &Arc<SessionStore>, arguments: Option<&Args>, frozen: bool) -> Answer {
    let id = request(arguments).map_err(|e| e.to_string())?;
    store
        .pause(id, frozen)
        .await
        .map(|()| {
            let done = if frozen { "paused" } else { "resumed" };
            let mut r =
                CallToolResult::success(vec![ContentBlock::text(format!("Session {id} {done}"))]);
            r.structured_content = Some(json!({"session_id": id, "paused": frozen}));
            r
        })
        .map_err(|e| render::error_text(&e))
}
