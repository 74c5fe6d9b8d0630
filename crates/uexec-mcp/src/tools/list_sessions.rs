//! `list_sessions`: the caller's sessions still running (and the environments it may name),
//! or, for a person at the daemon, every owner's, ended ones too (`all`: also those whose
//! exit was reported). Its schemas, its arguments, and the list as a result.

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use serde_json::json;
use uexec_core::{rfc3339, SessionInfo, SessionStore};

use super::parse::{boolean, object, reject_unknown, ArgError, Args};
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
                        "running_seconds": {"type": "number"},
                        "name": {"type": "string", "description": "The name it was given (absent when none)."},
                        "cpu_seconds": {"type": "number", "description": "CPU time its processes used, user and system (absent where sessions have no cgroup)."},
                        "memory_bytes": {"type": "integer", "description": "Memory in use (absent without the memory controller)."},
                        "memory_peak_bytes": {"type": "integer", "description": "The most memory used at once (absent without the memory controller)."},
                        "pids": {"type": "integer", "description": "Processes alive (absent without the pids controller)."},
                        "paused": {"type": "boolean", "description": "Frozen by a person (uexec pause) until resumed (absent when not)."}
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
        "List the sessions still running in the background: id, command, working directory, whether it has a terminal, how long it has been running, and the CPU time it used (where sessions have a cgroup).",
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

/// `list_sessions` as a person at the daemon sees it: `all` adds the ended sessions whose
/// exit was reported (until their transcript is pruned), as `docker ps -a` does.
pub fn person_tool() -> Tool {
    let mut tool = tool();
    let schema = json!({
        "type": "object",
        "properties": {
            "all": {"type": "boolean", "default": false, "description": "Also the sessions that ended and whose exit was reported, until their transcript is pruned (or they are removed). Default: false (running ones, and ended ones nobody was told of yet)."}
        },
        "additionalProperties": false
    });
    tool.input_schema = to_schema(schema);
    tool.description = Some("List every owner's sessions: id, owner, state (running, paused, or exited with its code and end time; kept: it outlives its owner's clients), command, working directory, whether it has a terminal, the CPU time (and memory, where counted) it used, and its last line of output.".into());
    tool
}

/// A person's `list_sessions`: whether `all`.
pub fn request_person(arguments: Option<&Args>) -> Result<bool, ArgError> {
    let args = object(arguments);
    reject_unknown(&args, &["all"])?;
    Ok(boolean(&args, "all")?.unwrap_or(false))
}

/// Every owner's sessions, for a person at the daemon.
pub fn call_person(owners: &OwnerTable, arguments: Option<&Args>) -> Answer {
    request_person(arguments)
        .map(|all| every_owners(owners, all))
        .map_err(|e| e.to_string())
}

fn result(store: &SessionStore, environments: &[String]) -> CallToolResult {
    let sessions = store.list_sessions();
    let running = sessions.iter().filter(|s| !s.exited).count();
    let mut text = match (sessions.len(), running) {
        (0, _) => "No running sessions.".to_owned(),
        (n, r) if n == r => format!("{n} running session(s):"),
        (n, r) => format!("{n} session(s), {r} running:"),
    };
    let mut items = Vec::new();
    for s in &sessions {
        let secs = (s.running_time.as_secs_f64() * 10.0).round() / 10.0;
        // Exited, its end not reported yet: never listed as running beside its notice.
        let ended = s
            .exited
            .then(|| match s.end.as_ref().and_then(|e| e.exit_code) {
                Some(code) => format!("exited with code {code}; write_stdin reports its end"),
                None => "exited; write_stdin reports its end".to_owned(),
            });
        text.push_str(&format!(
            "\n- session {} ({}, {}{}, cwd {}): {}",
            s.session_id,
            if s.tty { "tty" } else { "pipes" },
            ended.clone().unwrap_or_else(|| match s.paused {
                true => format!("paused, {secs:.1}s"),
                false => format!("{secs:.1}s"),
            }),
            figures_text(s),
            s.cwd.display(),
            s.command
        ));
        let mut item = json!({
            "session_id": s.session_id,
            "command": s.command,
            "cwd": s.cwd.display().to_string(),
            "tty": s.tty,
            "running_seconds": secs,
        });
        add_figures(&mut item, s);
        if s.exited {
            item["exited"] = json!(true);
            if let Some(code) = s.end.as_ref().and_then(|e| e.exit_code) {
                item["exit_code"] = json!(code);
            }
        }
        if let Some(name) = &s.name {
            item["name"] = json!(name);
            text.push_str(&format!(" (named {name})"));
        }
        items.push(item);
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

/// Every owner's sessions, oldest first, with owner, state, pid, last line and, for ended
/// ones, how and when they ended; with `all`, those whose exit was reported too.
fn every_owners(owners: &OwnerTable, all: bool) -> CallToolResult {
    let mut sessions: Vec<(String, SessionInfo)> = Vec::new();
    for (owner, store) in owners.all() {
        let ended = if all { store.list_ended() } else { Vec::new() };
        for s in store.list_sessions().into_iter().chain(ended) {
            sessions.push((owner.clone(), s));
        }
    }
    sessions.sort_by_key(|(_, s)| s.started);
    let mut items = Vec::new();
    let mut text = String::new();
    for (owner, s) in &sessions {
        let secs = (s.running_time.as_secs_f64() * 10.0).round() / 10.0;
        let state = match (s.exited, s.paused) {
            (true, _) => "exited",
            (false, true) => "paused",
            (false, false) => "running",
        };
        let mut how = state.to_owned();
        let mut item = json!({
            "session_id": s.session_id,
            "owner": owner,
            "command": s.command,
            "cwd": s.cwd.display().to_string(),
            "tty": s.tty,
            "state": state,
            "running_seconds": secs,
            "last_line": s.last_line,
            "started_at": rfc3339::format(s.started),
        });
        add_figures(&mut item, s);
        if let Some(pid) = s.pid {
            item["pid"] = json!(pid);
        }
        if let Some(name) = &s.name {
            item["name"] = json!(name);
        }
        if let Some(t) = &s.transcript {
            item["transcript"] = json!(t.display().to_string());
        }
        if let Some(end) = &s.end {
            let at = rfc3339::format(end.at);
            item["ended_at"] = json!(at);
            if let Some(code) = end.exit_code {
                item["exit_code"] = json!(code);
                how = format!("exited with code {code} at {at}");
            } else {
                how = format!("exited at {at}");
            }
            if let Some(failure) = &end.failure {
                item["failure"] = json!(failure);
            }
            if let Some(stopped) = &end.stopped {
                item["stopped"] = json!(stopped.as_str());
                match stopped {
                    uexec_core::Stopped::By(by) => {
                        item["stopped_by"] = json!(by);
                        how.push_str(&format!(", stopped by {by}"));
                    }
                    uexec_core::Stopped::Pruned => how.push_str(", pruned"),
                    uexec_core::Stopped::ClientGone => {
                        how.push_str(", stopped: its client went away")
                    }
                }
            }
        }
        if let Some(waiting) = s.waiting.filter(|_| !s.exited) {
            item["waiting"] = json!(waiting.as_str());
            how.push_str(&format!(", waiting for {}", waiting.as_str()));
        }
        if s.reported {
            item["reported"] = json!(true);
        }
        if s.kept && !s.exited {
            item["kept"] = json!(true);
            how.push_str(", kept");
        }
        text.push_str(&format!(
            "\n- session {}{} [{owner}] ({}, {how}, {secs:.1}s{}, cwd {}): {} | {}",
            s.session_id,
            s.name
                .as_ref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default(),
            if s.tty { "tty" } else { "pipes" },
            figures_text(s),
            s.cwd.display(),
            s.command,
            s.last_line
        ));
        items.push(item);
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

/// A session's figures in its item: the CPU time where it has a cgroup, memory and
/// processes where those are counted; a paused one says so. None is ever invented.
fn add_figures(item: &mut serde_json::Value, s: &SessionInfo) {
    if let Some(u) = &s.usage {
        item["cpu_seconds"] = json!((u.cpu_seconds() * 1000.0).round() / 1000.0);
        for (key, figure) in [
            ("memory_bytes", u.memory_bytes),
            ("memory_peak_bytes", u.memory_peak_bytes),
            ("pids", u.pids),
        ] {
            if let Some(n) = figure {
                item[key] = json!(n);
            }
        }
    }
    if s.paused && !s.exited {
        item["paused"] = json!(true);
    }
}

/// The figures in a text line: `, 1.25s CPU` (and `, 12.0 MiB`), or nothing when uncounted.
fn figures_text(s: &SessionInfo) -> String {
    let Some(u) = &s.usage else {
        return String::new();
    };
    let mut text = format!(", {:.2}s CPU", u.cpu_seconds());
    if let Some(bytes) = u.memory_bytes {
        text.push_str(&format!(", {:.1} MiB", bytes as f64 / (1024.0 * 1024.0)));
    }
    text
}
