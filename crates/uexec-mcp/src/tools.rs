//! The tools as MCP clients see them: names, schemas and descriptions in our own words.
//! Each description states its default and its effective range (SPEC §10).

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool};
use serde_json::{json, Value};
use uexec_core::limits::{
    DEFAULT_EXEC_YIELD_TIME_MS, DEFAULT_MAX_OUTPUT_TOKENS, DEFAULT_WRITE_YIELD_TIME_MS,
    MAX_EMPTY_POLL_YIELD_TIME_MS, MAX_YIELD_TIME_MS, MIN_EMPTY_POLL_YIELD_TIME_MS,
    MIN_YIELD_TIME_MS,
};

pub const EXEC_COMMAND: &str = "exec_command";
pub const WRITE_STDIN: &str = "write_stdin";
pub const LIST_SESSIONS: &str = "list_sessions";
pub const TERMINATE_SESSION: &str = "terminate_session";

fn object(v: Value) -> Arc<JsonObject> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(JsonObject::new()),
    }
}

/// The structured form of a snapshot (SPEC §4); absent fields are omitted.
fn snapshot_schema() -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "properties": {
            "chunk_id": {"type": "string", "description": "Six lowercase hex digits naming this chunk of output."},
            "wall_time_seconds": {"type": "number", "description": "Length of the observation window in seconds (4 decimals)."},
            "exit_code": {"type": "integer", "description": "Present once the process has exited; the session is then gone."},
            "session_id": {"type": "integer", "description": "Present while the process is still running: pass it to write_stdin."},
            "original_token_count": {"type": "integer", "description": "ceil(bytes / 4) of all output collected by this call, before truncation."},
            "output": {"type": "string", "description": "Output printed since the previous call, possibly truncated in the middle."}
        },
        "required": ["chunk_id", "wall_time_seconds", "original_token_count", "output"],
        "additionalProperties": false
    }))
}

/// `exec_command`; with named environments, an `environment_id` argument picks one.
pub fn exec_command(environments: &[String]) -> Tool {
    let mut schema = json!({
        "type": "object",
        "properties": {
            "cmd": {"type": "string", "description": "Shell command to run, e.g. `cargo test` or `npm run dev`. Required, non-empty."},
            "workdir": {"type": "string", "description": "Working directory. Relative paths are joined to the server's working directory; empty or omitted means the server's working directory. Must exist."},
            "shell": {"type": "string", "description": "Shell binary that runs `cmd` (default: $SHELL, else /bin/bash, else /bin/sh)."},
            "login": {"type": "boolean", "default": true, "description": "Run the shell as a login shell (`-lc`, loading profiles) instead of `-c`. Default: true."},
            "tty": {"type": "boolean", "default": false, "description": "Run in a pseudo-terminal (24x80) so you can type into it later with write_stdin (REPLs, prompts, Ctrl-C/Ctrl-D). Default: false (pipes; stdin is /dev/null)."},
            "yield_time_ms": {"type": "integer", "default": DEFAULT_EXEC_YIELD_TIME_MS, "description": format!("How long to watch the command before returning, in milliseconds. Default {DEFAULT_EXEC_YIELD_TIME_MS}; clamped between {MIN_YIELD_TIME_MS} and {MAX_YIELD_TIME_MS}. Returns earlier when the command exits.")},
            "max_output_tokens": {"type": "integer", "default": DEFAULT_MAX_OUTPUT_TOKENS, "description": format!("Token budget of the returned output (1 token ~ 4 bytes); longer output is cut in the middle. Default {DEFAULT_MAX_OUTPUT_TOKENS}, which is also the maximum.")}
        },
        "required": ["cmd"],
        "additionalProperties": false
    });
    if !environments.is_empty() {
        schema["properties"]["environment_id"] = json!({
            "type": "string",
            "enum": environments,
            "description": format!("Run the command in this environment (another machine's exec server) instead of locally. Default: local. Configured: {}.", environments.join(", ")),
        });
    }
    Tool::new(
        EXEC_COMMAND,
        "Run a shell command and watch it for up to yield_time_ms. If it exits in that window you get its output and exit code. If it is still running (a dev server, a long test suite, a REPL) you get the output so far and a session_id: the command keeps running in the background, and write_stdin polls it, types into it or interrupts it.",
        object(schema),
    )
    .with_raw_output_schema(snapshot_schema())
}

pub fn write_stdin() -> Tool {
    let schema = json!({
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
    Tool::new(
        WRITE_STDIN,
        "Poll a running session for new output, type into it, or interrupt it. Returns the output printed since the previous call (nothing is lost or repeated) and the exit code once the process has exited; after that the session_id is no longer valid.",
        object(schema),
    )
    .with_raw_output_schema(snapshot_schema())
}

pub fn list_sessions() -> Tool {
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
        LIST_SESSIONS,
        "List the sessions still running in the background: id, command, working directory, whether it has a terminal, and how long it has been running.",
        object(schema),
    )
    .with_raw_output_schema(object(output))
}

pub fn terminate_session() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "session_id": {"type": "integer", "description": "The session to kill, with every process it started."}
        },
        "required": ["session_id"],
        "additionalProperties": false
    });
    Tool::new(
        TERMINATE_SESSION,
        "Kill a running session and every process it started (SIGKILL to its process group). Use it to stop dev servers and watchers you no longer need.",
        object(schema),
    )
}

/// The tools this server offers.
pub fn all(codex_tools_only: bool, environments: &[String]) -> Vec<Tool> {
    let mut tools = vec![exec_command(environments), write_stdin()];
    if !codex_tools_only {
        tools.push(list_sessions());
        tools.push(terminate_session());
    }
    tools
}
