//! `write_stdin`: poll a running session, type into it or interrupt it. Its schema (with
//! `until`, `eof` and hygiene unless `--codex-compat`), its arguments and the call.

use std::sync::Arc;

use rmcp::model::Tool;
use serde_json::json;
use uexec_core::limits::{
    DEFAULT_MAX_OUTPUT_TOKENS, DEFAULT_WRITE_YIELD_TIME_MS, MAX_EMPTY_POLL_YIELD_TIME_MS,
    MAX_YIELD_TIME_MS, MIN_EMPTY_POLL_YIELD_TIME_MS, MIN_YIELD_TIME_MS,
};
use uexec_core::{SessionStore, StoreConfig, WriteRequest};

use super::parse::{
    boolean, hygiene, integer, object, reject_unknown, session_id, string, until, ArgError, Args,
    Dialect,
};
use super::render::{self, snapshot_result, Answer};
use super::schema::{hygiene_properties, snapshot_schema, to_schema, until_schema, Offer};

pub const NAME: &str = "write_stdin";

/// Field names of `write_stdin`.
pub const FIELDS: &[&str] = &["session_id", "chars", "yield_time_ms", "max_output_tokens"];

/// uexec's own `write_stdin` fields (not with `--codex-compat`).
pub const EXTENDED_FIELDS: &[&str] = &["until", "eof", "strip_ansi", "collapse_cr"];

pub fn tool(offer: Offer<'_>) -> Tool {
    let mut schema = json!({
        "type": "object",
        "properties": {
            "session_id": {"type": "integer", "description": "session_id returned by exec_command while the command was running."},
            "chars": {"type": "string", "default": "", "description": "Bytes to type into the session. Default empty: just poll for new output. With tty=true sessions, \"\\u0003\" is Ctrl-C and \"\\u0004\" Ctrl-D; on pipe sessions only \"\\u0003\" (interrupt) is accepted."},
            "yield_time_ms": {"type": "integer", "default": DEFAULT_WRITE_YIELD_TIME_MS, "description": format!("How long to watch for output after writing, in milliseconds. Default {DEFAULT_WRITE_YIELD_TIME_MS}. Writes are clamped between {MIN_YIELD_TIME_MS} and {MAX_YIELD_TIME_MS}; an empty poll waits between {MIN_EMPTY_POLL_YIELD_TIME_MS} and {MAX_EMPTY_POLL_YIELD_TIME_MS} ms and returns as soon as the process exits.")},
            "max_output_tokens": {"type": "integer", "default": DEFAULT_MAX_OUTPUT_TOKENS, "description": format!("Token budget of the returned output (1 token ~ 4 bytes). Default {DEFAULT_MAX_OUTPUT_TOKENS}, which is also the maximum.")}
        },
        "required": ["session_id"],
        "additionalProperties": false
    });
    if offer.extended {
        let props = &mut schema["properties"];
        props["until"] = until_schema();
        props["eof"] = json!({"type": "boolean", "default": false, "description": "Close the session's stdin pipe after writing chars (sessions started with stdin: \"pipe\"). Default: false."});
        hygiene_properties(props, offer.config);
    }
    Tool::new(
        NAME,
        "Poll a running session for new output, type into it, or interrupt it. Returns the output printed since the previous call (nothing is lost or repeated) and the exit code once the process has exited; after that the session_id is no longer valid.",
        to_schema(schema),
    )
    .with_raw_output_schema(snapshot_schema(offer.extended))
}

/// `write_stdin` arguments.
pub fn request(arguments: Option<&Args>, dialect: Dialect) -> Result<WriteRequest, ArgError> {
    let args = object(arguments);
    let mut known = FIELDS.to_vec();
    if dialect.extended {
        known.extend_from_slice(EXTENDED_FIELDS);
    }
    reject_unknown(&args, &known)?;
    let session_id = session_id(&args)?;
    Ok(WriteRequest {
        session_id,
        chars: string(&args, "chars")?.unwrap_or_default(),
        yield_time_ms: integer(&args, "yield_time_ms")?,
        max_output_tokens: integer(&args, "max_output_tokens")?,
        until: until(&args)?,
        eof: boolean(&args, "eof")?.unwrap_or(false),
        hygiene: hygiene(&args)?,
    })
}

/// Writes to the session in `store` and watches it, with this connection's defaults.
pub async fn call(
    store: &Arc<SessionStore>,
    config: &StoreConfig,
    arguments: Option<&Args>,
    dialect: Dialect,
) -> Answer {
    let req = request(arguments, dialect).map_err(|e| e.to_string())?;
    store
        .write_stdin_for(config, req)
        .await
        .map(|s| snapshot_result(s, dialect))
        .map_err(|e| match e {
            // uexec's dialect says what became of a session it remembers.
            uexec_core::ExecError::UnknownProcess(id) if dialect.extended => {
                match store.ended(id) {
                    Some(end) => format!("{}: {}", render::error_text(&e), gone(id, &end)),
                    None => render::error_text(&e),
                }
            }
            e => render::error_text(&e),
        })
}

/// `session 48213 exited (code 0) 3 s ago, and that was reported already`.
fn gone(id: i32, end: &uexec_core::SessionEnd) -> String {
    let ago = end.at.elapsed().unwrap_or_default().as_secs();
    let how = match (&end.failure, end.exit_code) {
        (Some(failure), _) => format!("failed ({failure})"),
        (None, Some(code)) => format!("exited (code {code})"),
        (None, None) => "exited".to_owned(),
    };
    format!("session {id} {how} {ago} s ago, and that was reported already")
}

#[cfg(test)]
mod tests {
    use super::super::parse::args;
    use super::*;
    use serde_json::json;

    #[test]
    fn write_errors_name_the_field() {
        for (a, f) in [
            (json!({}), "session_id"),
            (json!({"session_id": "abc"}), "session_id"),
            (json!({"session_id": 1000, "chars": 5}), "chars"),
            (json!({"session_id": 1u64 << 40}), "session_id"),
        ] {
            assert_eq!(
                request(Some(&args(a)), Dialect::default())
                    .expect_err("must fail")
                    .field,
                f
            );
        }
    }
}
