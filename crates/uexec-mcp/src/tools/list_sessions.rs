//! `list_sessions`: the caller's sessions still running (and the environments it may name),
//! or, for a person at the daemon, every owner's. Its schema, its (empty) arguments, and
//! the list as a result.

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use serde_json::json;
use uexec_core::SessionStore;

use super::parse::{object, reject_unknown, ArgError, Args};
use super::render::Answer;
use super::schema::to_schema;
use crate::stores::OwnerTable;

pub const NAME: &str = "list_sessions";

/// The schema of `list_sessions` (its output lists the agent's view, not a person's).
pub fn tool() -> Tool {
    let schema = json!({"type": "object", "properties": {}, "additionalProperties": false});
    let output = json!({
        "type": "object",
        "properties": {
            "sessions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "session_id": {"type": "integer"},
                        "command": {"type": "string"},
                        "cwd": {"type": "string"},
                        "tty": {"type": "boolean"},
                        "running_seconds": {"type": "number"}
                    },
                    "required": ["session_id", "command", "cwd", "tty", "running_seconds"]
                }
            },
            "environments": {"type": "array", "items": {"type": "string"}, "description": "Environments exec_command's environment_id may name now (absent when there are none)."}
        },
        "required": ["sessions"]
    });
    Tool::new(
        NAME,
        "List the sessions still running in the background: id, command, working directory, whether it has a terminal, and how long it has been running.",
        to_schema(schema),
    )
    .with_raw_output_schema(to_schema(output))
}

/// `list_sessions` takes nothing.
pub fn request(arguments: Option<&Args>) -> Result<(), ArgError> {
    reject_unknown(&object(arguments), &[])
}

/// The sessions of `store`, and the `environments` exec_command may name now.
pub fn call(store: &SessionStore, environments: &[String], arguments: Option<&Args>) -> Answer {
    request(arguments)
        .map(|()| result(store, environments))
        .map_err(|e| e.to_string())
}

/// Every owner's sessions, for a person at the daemon.
pub fn call_person(owners: &OwnerTable, arguments: Option<&Args>) -> Answer {
    request(arguments)
        .map(|()| every_owners(owners))
        .map_err(|e| e.to_string())
}

fn result(store: &SessionStore, environments: &[String]) -> CallToolResult {
    let sessions = store.list_sessions();
    let mut text = if sessions.is_empty() {
        "No running sessions.".to_owned()
    } else {
        format!("{} running session(s):", sessions.len())
    };
    let mut items = Vec::new();
    for s in &sessions {
        let secs = (s.running_time.as_secs_f64() * 10.0).round() / 10.0;
        text.push_str(&format!(
            "\n- session {} ({}, {:.1}s, cwd {}): {}",
            s.session_id,
            if s.tty { "tty" } else { "pipes" },
            secs,
            s.cwd.display(),
            s.command
        ));
        items.push(json!({
            "session_id": s.session_id,
            "command": s.command,
            "cwd": s.cwd.display().to_string(),
            "tty": s.tty,
            "running_seconds": secs,
        }));
    }
    let mut structured = json!({ "sessions": items });
    if !environments.is_empty() {
        text.push_str(&format!(
            "\nEnvironments (exec_command's environment_id; default: local): {}",
            environments.join(", ")
        ));
        structured["environments"] = json!(environments);
    }
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(structured);
    result
}

/// Every owner's sessions, with owner, state, pid and last line.
fn every_owners(owners: &OwnerTable) -> CallToolResult {
    let mut items = Vec::new();
    let mut text = String::new();
    for (owner, store) in owners.all() {
        for s in store.list_sessions() {
            let secs = (s.running_time.as_secs_f64() * 10.0).round() / 10.0;
            text.push_str(&format!(
                "\n- session {} [{owner}] ({}, {}, {secs:.1}s, cwd {}): {} | {}",
                s.session_id,
                if s.tty { "tty" } else { "pipes" },
                if s.exited { "exited" } else { "running" },
                s.cwd.display(),
                s.command,
                s.last_line
            ));
            let mut item = json!({
                "session_id": s.session_id,
                "owner": owner,
                "command": s.command,
                "cwd": s.cwd.display().to_string(),
                "tty": s.tty,
                "state": if s.exited { "exited" } else { "running" },
                "running_seconds": secs,
                "last_line": s.last_line,
            });
            if let Some(pid) = s.pid {
                item["pid"] = json!(pid);
            }
            if let Some(t) = &s.transcript {
                item["transcript"] = json!(t.display().to_string());
            }
            items.push(item);
        }
    }
    let head = if items.is_empty() {
        "No sessions.".to_owned()
    } else {
        format!("{} session(s):", items.len())
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(head + &text)]);
    result.structured_content = Some(json!({ "sessions": items }));
    result
}
