//! `signal_session`, a person's tool at the daemon: send a signal (TERM, INT, HUP, ...) to a
//! session's process group, and nothing else (`uexec kill --signal`): the session ends, if
//! it does, as any exit does. Its schema, its arguments and the call.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use serde_json::json;
use uexec_core::backend::Signal;
use uexec_core::SessionStore;

use super::parse::{err, object, reject_unknown, session_id, string, ArgError, Args};
use super::render::{self, Answer};
use super::schema::to_schema;

pub const NAME: &str = "signal_session";

/// The signals' names, as the schema and errors list them.
fn names() -> Vec<&'static str> {
    Signal::ALL.iter().map(|s| s.name()).collect()
}

pub fn tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "session_id": {"type": "integer", "description": "A running session, whoever owns it."},
            "signal": {"type": "string", "enum": names(), "description": "The signal, sent to the session's process group (SIG prefix, lower case and numbers are taken too: sigterm, 15)."}
        },
        "required": ["session_id", "signal"],
        "additionalProperties": false
    });
    Tool::new(
        NAME,
        "Send a signal to a running session's process group; the session ends, if it does, as any exit (its exit code says the signal).",
        to_schema(schema),
    )
}

/// `signal_session`: (session, signal).
pub fn request(arguments: Option<&Args>) -> Result<(i32, Signal), ArgError> {
    let args = object(arguments);
    reject_unknown(&args, &["session_id", "signal"])?;
    let id = session_id(&args)?;
    let name = string(&args, "signal")?.ok_or_else(|| err("signal", "required"))?;
    let signal = Signal::parse(&name).ok_or_else(|| {
        err(
            "signal",
            format!("{name:?} is not one of {}", names().join(", ")),
        )
    })?;
    Ok((id, signal))
}

/// Signals the session (in `store`, its owner's).
pub async fn call(store: &Arc<SessionStore>, arguments: Option<&Args>) -> Answer {
    let (id, signal) = request(arguments).map_err(|e| e.to_string())?;
    store
        .signal(id, signal)
        .await
        .map(|()| {
            let mut r = CallToolResult::success(vec![ContentBlock::text(format!(
                "Sent SIG{} to session {id}",
                signal.name()
            ))]);
            r.structured_content = Some(json!({"session_id": id, "signal": signal.name()}));
            r
        })
        .map_err(|e| render::error_text(&e))
}
