//! `prune_sessions`, a person's tool at the daemon: forget every ended session of every
//! owner (`uexec prune`), as `remove_session` forgets one; running ones stay. Its schema,
//! its (empty) arguments and the call.

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use serde_json::json;

use super::parse::{object, reject_unknown, ArgError, Args};
use super::render::Answer;
use super::schema::to_schema;
use crate::stores::OwnerTable;

pub const NAME: &str = "prune_sessions";

pub fn tool() -> Tool {
    let schema = json!({"type": "object", "properties": {}, "additionalProperties": false});
    Tool::new(
        NAME,
        "Forget every ended session of every owner and delete their transcripts; running sessions stay.",
        to_schema(schema),
    )
}

/// `prune_sessions` takes nothing.
pub fn request(arguments: Option<&Args>) -> Result<(), ArgError> {
    reject_unknown(&object(arguments), &[])
}

/// Prunes every owner's ended sessions.
pub fn call(owners: &OwnerTable, arguments: Option<&Args>) -> Answer {
    request(arguments).map_err(|e| e.to_string())?;
    let mut removed: Vec<i32> = Vec::new();
    for (_, store) in owners.all() {
        removed.extend(store.prune_ended());
    }
    let text = match removed.len() {
        0 => "No ended sessions to remove.".to_owned(),
        n => format!(
            "Removed {n} ended session(s): {}",
            removed
                .iter()
                .map(i32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
    r.structured_content = Some(json!({"removed": removed}));
    Ok(r)
}
