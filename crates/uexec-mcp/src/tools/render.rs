//! Results as the model reads them, for the tools that share a shape: a snapshot (the text
//! for the model, the same facts as data), where a transcript stopped, and the exit notices
//! any result may carry.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{json, Map, Value};
use uexec_core::snapshot::Head;
use uexec_core::{ExecError, ExitNotice, Snapshot};

use super::parse::Dialect;

/// A tool's answer: its result, or why it failed (the server says `{name} failed: {why}`).
pub type Answer = Result<CallToolResult, String>;

/// A snapshot as a tool result: the text for the model, the same facts as data. uexec's
/// dialect adds its lines and fields (why it returned, a match, a timeout, a secret prompt).
pub fn snapshot_result(s: Snapshot, dialect: Dialect) -> CallToolResult {
    let structured = snapshot_fields(&s, dialect.extended);
    let text = snapshot_text(&s, dialect);
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(Value::Object(structured));
    result
}

/// A snapshot's text in `dialect`: Codex's, byte for byte; or uexec's, which says each fact
/// once in what the model reads: no `Chunk ID` (no tool takes one; `--structured` has it),
/// and no `Wall time` where the client writes its own (Codex puts `Wall time:` and
/// `Output:` around every MCP result).
pub fn snapshot_text(s: &Snapshot, dialect: Dialect) -> String {
    if dialect.extended {
        s.to_text_annotated_with(head(dialect))
    } else {
        s.to_text()
    }
}

/// The first lines of uexec's text in `dialect` ([`snapshot_text`]).
pub fn head(dialect: Dialect) -> Head {
    if !dialect.extended {
        return Head::CODEX;
    }
    Head {
        chunk_id: false,
        wall_time: !dialect.wrapped,
    }
}

pub(crate) fn snapshot_fields(s: &Snapshot, extended: bool) -> Map<String, Value> {
    let mut structured = Map::new();
    structured.insert("chunk_id".into(), json!(s.chunk_id));
    let wall: f64 = s.wall_time_text().parse().unwrap_or(0.0);
    structured.insert("wall_time_seconds".into(), json!(wall));
    if let Some(code) = s.exit_code() {
        structured.insert("exit_code".into(), json!(code));
    }
    if let Some(id) = s.session_id() {
        structured.insert("session_id".into(), json!(id));
    }
    structured.insert("original_token_count".into(), json!(s.original_token_count));
    // The same output as the text: uexec's dialect counts every line printed.
    let output = if extended {
        s.annotated_output()
    } else {
        s.output.as_str().into()
    };
    structured.insert("output".into(), json!(output));
    if extended {
        structured.insert("reason".into(), json!(s.reason.as_str()));
        if let Some(m) = &s.matched {
            structured.insert("match".into(), json!({"text": m.text, "offset": m.offset}));
        }
        if let Some(ms) = s.timed_out_ms {
            structured.insert("timed_out_ms".into(), json!(ms));
        }
        if s.awaiting_secret {
            structured.insert("awaiting_secret".into(), json!(true));
        }
        if let Some(u) = &s.usage {
            let secs = (u.cpu_seconds() * 1000.0).round() / 1000.0;
            structured.insert("cpu_seconds".into(), json!(secs));
        }
        ending_fields(&s.ending, &mut structured);
        if let Some(dir) = &s.transcript {
            structured.insert("transcript".into(), json!(dir.display().to_string()));
        }
        if let Some(r) = s.omitted_range.as_ref().map(|o| &o.range) {
            structured.insert(
                "omitted_range".into(),
                json!({"start": r.start, "end": r.end}),
            );
        }
        if let Some(r) = s
            .omitted_coverage
            .as_ref()
            .and_then(|c| c.readable.as_ref())
        {
            structured.insert(
                "omitted_readable".into(),
                json!({"start": r.start, "end": r.end}),
            );
        }
        if let Some(stop) = &s.transcript_stop {
            structured.insert("transcript_stopped".into(), stop_fields(stop));
        }
        if let Some(sandbox) = &s.sandbox {
            let denied = match sandbox.denied {
                uexec_core::policy::Denied::No => json!(false),
                uexec_core::policy::Denied::Yes => json!(true),
                uexec_core::policy::Denied::Likely => json!("likely"),
            };
            let names = |layers: &[uexec_core::policy::Layer]| {
                layers.iter().map(|l| l.as_str()).collect::<Vec<_>>()
            };
            structured.insert(
                "sandbox".into(),
                json!({
                    "profile": sandbox.profile.as_str(),
                    "network": sandbox.network.as_str(),
                    "layers": names(&sandbox.layers),
                    "missing_layers": names(&sandbox.missing),
                    "denied": denied,
                    "evidence": sandbox.evidence,
                }),
            );
        }
        if !s.notices.is_empty() {
            structured.insert("notices".into(), json!(s.notices));
        }
    }
    structured
}

/// What an exited command left running and the limits it reached, as data.
fn ending_fields(ending: &uexec_core::usage::Ending, structured: &mut Map<String, Value>) {
    use uexec_core::usage::{LimitHit, TreeEnd};
    if let Some(TreeEnd::LeftRunning { count, named }) = &ending.tree {
        let processes: Vec<Value> = named
            .iter()
            .map(|p| json!({"pid": p.pid, "command": p.command}))
            .collect();
        structured.insert(
            "left_running".into(),
            json!({"count": count, "processes": processes}),
        );
    }
    let hits: Vec<Value> = ending
        .limits_hit
        .iter()
        .map(|hit| match *hit {
            LimitHit::Memory { kills, max_bytes } => {
                json!({"limit": "memory_max", "max": max_bytes, "oom_kills": kills})
            }
            LimitHit::Pids { refused, max } => {
                json!({"limit": "pids_max", "max": max, "refused_forks": refused})
            }
        })
        .collect();
    if !hits.is_empty() {
        structured.insert("limits_hit".into(), Value::Array(hits));
    }
}

/// Where and why a transcript stopped, as data.
pub(crate) fn stop_fields(stop: &uexec_core::transcript::TranscriptStop) -> Value {
    json!({"at": stop.at, "error": stop.error})
}

/// Adds exit notices to a result: one line each after the text, and `exit_notices` in the
/// structured content (an error result gets the lines only).
pub(crate) fn attach_exit_notices(result: &mut CallToolResult, notices: Vec<ExitNotice>) {
    if notices.is_empty() {
        return;
    }
    let mut lines = String::from("\n\nExit notices (sessions that ended while nobody watched):");
    let mut items = Vec::with_capacity(notices.len());
    for n in &notices {
        let text = n.text();
        lines.push_str(&format!("\n- {text}"));
        let mut item = json!({
            "session_id": n.session_id,
            "command": n.command,
            "seconds_ago": (n.age().as_secs_f64() * 10.0).round() / 10.0,
            "text": text,
        });
        if let Some(code) = n.exit_code {
            item["exit_code"] = json!(code);
        }
        if let Some(failure) = &n.failure {
            item["failure"] = json!(failure);
        }
        if let Some(ms) = n.timed_out_ms {
            item["timed_out_ms"] = json!(ms);
        }
        if let Some(by) = &n.stopped_by {
            item["stopped_by"] = json!(by);
        }
        items.push(item);
    }
    match result.content.last_mut() {
        Some(ContentBlock::Text(text)) => text.text.push_str(&lines),
        _ => result
            .content
            .push(ContentBlock::text(lines.trim_start().to_owned())),
    }
    if result.is_error != Some(true) {
        let structured = result.structured_content.get_or_insert_with(|| json!({}));
        if let Some(obj) = structured.as_object_mut() {
            obj.insert("exit_notices".into(), Value::Array(items));
        }
    }
}

/// An engine error as the model reads it: the engine's words, plus what only this face
/// knows (the engine names no tool and no flag):
/// - a closed stdin: Codex's own words, how to get one that stays open;
/// - a person typing, or a secret prompt: how the person does it (`uexec attach`);
/// - a sandbox or network wider than the server's policy: the flag a person would change.
pub fn error_text(e: &ExecError) -> String {
    use uexec_core::policy::Widening;
    let hint = match e {
        ExecError::StdinClosed { .. } => {
            return format!("{e}; rerun exec_command with tty=true to keep stdin open")
        }
        ExecError::Leased { session_id } => {
            return format!("writing to session {session_id} failed: a person is typing in this session (uexec attach --write): poll it (empty chars) to see what happens, and write again once they detach")
        }
        ExecError::SecretPrompt { session_id } => {
            return format!("writing to session {session_id} failed: the session waits for a secret (a password prompt, echo off): do not type secrets; ask the person to answer it (with `uexec mcp --daemon` they can: `uexec attach {session_id} --write`). Ctrl-C (\"\\u0003\") aborts the prompt")
        }
        ExecError::Widening(Widening::Profile { asked, .. }) => {
            format!("--sandbox {}", asked.as_str())
        }
        ExecError::Widening(Widening::Network { field, .. }) if *field == "network" => {
            "--network on".to_owned()
        }
        ExecError::Widening(Widening::Network { .. }) => "--network-allow HOST".to_owned(),
        ExecError::Widening(Widening::AllowEntry { entry, .. }) => {
            format!("--network-allow {entry}")
        }
        ExecError::Widening(Widening::Limit { field, .. }) => limit_flag(field),
        ExecError::Limit { machine: true, .. } => {
            return format!("{e}. `uexec doctor` says what this machine supports; run the command without limits, or ask the user")
        }
        ExecError::Limit { field, .. } => {
            return format!(
                "{e}. Only a person can enable it, by restarting uexec mcp with {} (max: no ceiling, calls set their own); ask the user if the command needs it.",
                limit_flag(field)
            )
        }
        _ => return e.to_string(),
    };
    format!(
        "{e}. Only a person can widen it, by restarting uexec mcp with {hint}; ask the user if the command needs it."
    )
}

/// The flag of a call's limit (`limits.memory_max`): `--memory-max BYTES`.
fn limit_flag(field: &str) -> String {
    let name = field.strip_prefix("limits.").unwrap_or(field);
    let value = if name == "memory_max" { "BYTES" } else { "N" };
    format!("--{} {value}", name.replace('_', "-"))
}

#[cfg(test)]
mod error_tests {
    use super::*;

    #[test]
    fn uexec_s_text_leaves_out_what_no_model_reads_and_codex_s_keeps_it() {
        let codex = Dialect::default();
        let own = Dialect {
            extended: true,
            ..Dialect::default()
        };
        let wrapped = Dialect {
            wrapped: true,
            ..own
        };
        assert_eq!(head(codex), Head::CODEX);
        // A wrapping client changes nothing in Codex's own text.
        assert_eq!(
            head(Dialect {
                wrapped: true,
                ..codex
            }),
            Head::CODEX
        );
        assert_eq!(
            head(own),
            Head {
                chunk_id: false,
                wall_time: true
            }
        );
        assert_eq!(
            head(wrapped),
            Head {
                chunk_id: false,
                wall_time: false
            }
        );
    }

    #[test]
    fn a_limit_a_call_cannot_have_names_the_flag_a_person_would_change() {
        use uexec_core::policy::Widening;
        let above = error_text(&ExecError::Widening(Widening::Limit {
            field: "limits.memory_max",
            asked: "2 GiB".into(),
            ceiling: "1 GiB".into(),
        }));
        assert!(
            above.ends_with("restarting uexec mcp with --memory-max BYTES; ask the user if the command needs it."),
            "{above}"
        );
        let off = error_text(&ExecError::Limit {
            field: "limits.pids_max",
            reason: "this server did not enable the pids controller".into(),
            machine: false,
        });
        assert!(
            off.starts_with("invalid arguments: limits.pids_max: this server did not enable")
                && off.contains("restarting uexec mcp with --pids-max N (max: no ceiling"),
            "{off}"
        );
        let never = error_text(&ExecError::Limit {
            field: "limits.memory_max",
            reason: "this machine cannot limit a session's memory".into(),
            machine: true,
        });
        assert!(
            never.contains("`uexec doctor`") && !never.contains("restarting"),
            "{never}"
        );
    }

    #[test]
    fn a_closed_stdin_reads_as_codex_words_it() {
        assert_eq!(
            error_text(&ExecError::StdinClosed { session_id: 7 }),
            "stdin is closed for this session; rerun exec_command with tty=true to keep stdin open"
        );
    }

    #[test]
    fn a_person_at_the_session_is_named_with_the_verb_that_put_them_there() {
        let leased = error_text(&ExecError::Leased { session_id: 7 });
        assert!(
            leased.contains("a person is typing in this session (uexec attach --write)"),
            "{leased}"
        );
        let secret = error_text(&ExecError::SecretPrompt { session_id: 7 });
        assert!(secret.contains("`uexec attach 7 --write`"), "{secret}");
        assert!(
            secret.ends_with("Ctrl-C (\"\\u0003\") aborts the prompt"),
            "{secret}"
        );
    }
}
