//! `list_approvals` and `answer_approval`, a person's tools at the daemon (`uexec approvals`,
//! `uexec approve ID [--always]`, `uexec deny ID [--reason TEXT]`): the commands the rules
//! hold for a person whose agent's client cannot ask them, and the person's answer.

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use serde_json::json;
use uexec_core::spawn::Answer;

use super::parse::{boolean, err, integer, object, reject_unknown, string, ArgError, Args};
use super::render::Answer as Result_;
use super::schema::to_schema;
use crate::approve::held::Held;

pub const LIST: &str = "list_approvals";
pub const ANSWER: &str = "answer_approval";

pub fn list_tool() -> Tool {
    let schema = json!({"type": "object", "properties": {}, "additionalProperties": false});
    Tool::new(
        LIST,
        "The commands the command rules hold for a person's yes, whose agent's client cannot ask (no elicitation): id, owner, command, working directory, the rule and why, and since when.",
        to_schema(schema),
    )
}

pub fn answer_tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "id": {"type": "integer", "description": "The held command's id (list_approvals)."},
            "approve": {"type": "boolean", "description": "true: run it; false: refuse it."},
            "always": {"type": "boolean", "description": "With approve: also the commands that start the same way, for the rest of the asking connection (never wider than the prefix asked about). Default false."},
            "reason": {"type": "string", "description": "With approve: false, what the agent reads."}
        },
        "required": ["id", "approve"],
        "additionalProperties": false
    });
    Tool::new(
        ANSWER,
        "Answer a held command: run it (approve: true, always for its prefix with always: true) or refuse it (approve: false, with a reason the agent reads).",
        to_schema(schema),
    )
}

/// What waits, as text and data.
pub fn list(held: &Held) -> Result_ {
    let waiting = held.list();
    let mut text = String::new();
    let mut items = Vec::with_capacity(waiting.len());
    for w in &waiting {
        let since = uexec_core::rfc3339::format(w.since);
        text.push_str(&format!(
            "{}\t{}\t{}\t{}\n\t{}\n",
            w.id, w.owner, since, w.command, w.why
        ));
        items.push(json!({
            "id": w.id, "owner": w.owner, "command": w.command, "cwd": w.cwd,
            "why": w.why, "since": since,
        }));
    }
    if waiting.is_empty() {
        text.push_str("No command waits for approval.");
    }
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(json!({ "approvals": items }));
    Ok(result)
}

/// `answer_approval` arguments: the id, the answer, whether always.
pub fn request(arguments: Option<&Args>) -> Result<(u64, Answer, bool), ArgError> {
    let args = object(arguments);
    reject_unknown(&args, &["id", "approve", "always", "reason"])?;
    let id = integer(&args, "id")?
        .ok_or_else(|| err("id", "required"))
        .and_then(|n| {
            u64::try_from(n).map_err(|_| err("id", format!("{n} is not an approval id")))
        })?;
    let approve = boolean(&args, "approve")?.ok_or_else(|| err("approve", "required"))?;
    let always = boolean(&args, "always")?.unwrap_or(false);
    let reason = string(&args, "reason")?;
    if approve && reason.is_some() {
        return Err(err("reason", "is for a refusal (approve: false)"));
    }
    if !approve && always {
        return Err(err("always", "is for an approval (approve: true)"));
    }
    let answer = if approve {
        Answer::Yes
    } else {
        Answer::No { reason }
    };
    Ok((id, answer, always))
}

/// The person's answer, passed to the waiting call.
pub fn answer(held: &Held, arguments: Option<&Args>) -> Result_ {
    let (id, answer, always) = request(arguments).map_err(|e| e.to_string())?;
    let approved = answer == Answer::Yes;
    let command = held.answer(id, answer, always)?;
    let text = match (approved, always) {
        (true, true) => format!("Approved {id}, and its prefix for that connection: {command}"),
        (true, false) => format!("Approved {id}: {command}"),
        (false, _) => format!("Refused {id}: {command}"),
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content =
        Some(json!({"id": id, "approved": approved, "always": always, "command": command}));
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::super::parse::args;
    use super::*;

    #[test]
    fn an_answer_s_errors_name_the_field() {
        for (a, field) in [
            (json!({"approve": true}), "id"),
            (json!({"id": 1}), "approve"),
            (json!({"id": -1, "approve": true}), "id"),
            (json!({"id": 1, "approve": "yes"}), "approve"),
            (json!({"id": 1, "approve": true, "reason": "x"}), "reason"),
            (json!({"id": 1, "approve": false, "always": true}), "always"),
            (json!({"id": 1, "approve": true, "bogus": 1}), "bogus"),
        ] {
            let e = request(Some(&args(a.clone()))).expect_err("bad");
            assert_eq!(e.field, field, "{a}");
        }
        assert_eq!(
            request(Some(&args(
                json!({"id": 3, "approve": false, "reason": "no"})
            ))),
            Ok((
                3,
                Answer::No {
                    reason: Some("no".into())
                },
                false
            ))
        );
    }
}
