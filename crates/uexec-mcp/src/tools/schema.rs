//! The schema pieces several tools share: the snapshot a result carries (SPEC §4), `until`,
//! the hygiene switches, exit notices and where a transcript stopped, and what a server
//! offers beyond the SPEC. Each description states its default and its effective range
//! (SPEC §10); each tool's own schema is in its file.

use std::sync::Arc;

use rmcp::model::JsonObject;
use serde_json::{json, Value};
use uexec_core::limits::TIMEOUT_EXIT_CODE;
use uexec_core::until::{MAX_IDLE_MS, MAX_PATTERN_BYTES, MIN_IDLE_MS, PROMPT_QUIET_MS};
use uexec_core::StoreConfig;

/// What a server's tools offer beyond the SPEC.
#[derive(Debug, Clone, Copy)]
pub struct Offer<'a> {
    pub environments: &'a [String],
    /// uexec's own arguments and result fields (off with `--codex-compat`).
    pub extended: bool,
    pub config: &'a StoreConfig,
}

pub(crate) fn to_schema(v: Value) -> Arc<JsonObject> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(JsonObject::new()),
    }
}

/// The structured form of a snapshot (SPEC §4); absent fields are omitted. The extended
/// dialect adds why the call returned, a match, a timeout, a secret prompt and exit notices.
pub(crate) fn snapshot_schema(extended: bool) -> Arc<JsonObject> {
    let mut schema = json!({
        "type": "object",
        "properties": {
            "chunk_id": {"type": "string", "description": "Six lowercase hex digits naming this chunk of output."},
            "wall_time_seconds": {"type": "number", "description": "How long this call watched the command, in seconds (4 decimals): for exec_command from the spawn (the early-exit grace and the window), for a poll its window."},
            "exit_code": {"type": "integer", "description": "Present once the process has exited; the session is then gone."},
            "session_id": {"type": "integer", "description": "Present while the process is still running: pass it to write_stdin."},
            "original_token_count": {"type": "integer", "description": "ceil(bytes / 4) of all output collected by this call, before truncation."},
            "output": {"type": "string", "description": "Output printed since the previous call, possibly truncated in the middle."}
        },
        "required": ["chunk_id", "wall_time_seconds", "original_token_count", "output"],
        "additionalProperties": false
    });
    if extended {
        let props = &mut schema["properties"];
        props["reason"] = json!({"type": "string", "enum": ["exited", "matched", "idle", "prompt", "window"], "description": "Why the call returned: the process exited, until.pattern matched, the output went idle, the session waits for input, or the window ended."});
        props["match"] = json!({"type": "object", "properties": {"text": {"type": "string"}, "offset": {"type": "integer", "description": "Byte offset of the match in everything the session printed."}}, "description": "What until.pattern matched (escape sequences removed)."});
        props["timed_out_ms"] = json!({"type": "integer", "description": format!("Present when timeout_ms killed the command; exit_code is then {TIMEOUT_EXIT_CODE}.")});
        props["cpu_seconds"] = json!({"type": "number", "description": "Present once the process exited, where sessions have a cgroup: the CPU time (user and system) it and every process it started used."});
        props["left_running"] = json!({"type": "object", "description": "Present when the command exited and left processes running (`cmd &`, a daemonising server): how many, and the first of them; they are killed now, as a session ends with its command. To keep a server running, start it as a command of its own, without `&`.", "properties": {"count": {"type": "integer"}, "processes": {"type": "array", "items": {"type": "object", "properties": {"pid": {"type": "integer"}, "command": {"type": "string"}}}}}});
        props["limits_hit"] = json!({"type": "array", "description": "Present when the session's processes ran into a limit of its cgroup: memory_max (the OOM killer killed oom_kills of them) or pids_max (refused_forks forks failed); max is the limit.", "items": {"type": "object", "properties": {"limit": {"type": "string", "enum": ["memory_max", "pids_max"]}, "max": {"type": "integer"}, "oom_kills": {"type": "integer"}, "refused_forks": {"type": "integer"}}}});
        props["awaiting_secret"] = json!({"type": "boolean", "description": "Present (true) when a tty session waits for input with echo off: a password prompt. Ask the person to answer it."});
        props["sandbox"] = json!({"type": "object", "description": "Present when the command runs sandboxed: profile, network, the layers applied (and missing_layers a best-effort fallback ran without), denied (false, true or \"likely\") and the output lines that are its evidence.", "properties": {"profile": {"type": "string"}, "network": {"type": "string"}, "layers": {"type": "array", "items": {"type": "string"}}, "missing_layers": {"type": "array", "items": {"type": "string"}}, "denied": {"type": ["boolean", "string"]}, "evidence": {"type": "array", "items": {"type": "string"}}}});
        props["notices"] = json!({"type": "array", "items": {"type": "string"}, "description": "Present when the command's rules spoke since the last result (uexec mcp --rules-at exec): each exec they refused (`refused at exec: PROGRAM ARGS (forbidden by rule FILE:LINE …)`; the command itself saw Permission denied), or that they judged the script's text only."});
        props["exit_notices"] = exit_notices_schema();
        props["transcript"] = json!({"type": "string", "description": "Path of the session's transcript: every byte it printed (read_output pages through it)."});
        props["omitted_range"] = json!({"type": "object", "properties": {"start": {"type": "integer"}, "end": {"type": "integer"}}, "description": "Session byte offsets of every byte this result's output left out: the middle dropped past 1 MiB ([… N bytes omitted …]) and what max_output_tokens cut (…N tokens truncated…), as one range (the text's `bytes A..B left out here`); every byte outside it is in the output, cleaned where strip_ansi or collapse_cr asked (a line redrawn at a carriage return counts whole). omitted_readable says which of them read_output has."});
        props["omitted_readable"] = json!({"type": "object", "properties": {"start": {"type": "integer"}, "end": {"type": "integer"}}, "description": "The part of omitted_range on disk: read_output with offset: start has it. Absent when none is; smaller than omitted_range when bytes rotated away (before it) or the transcript stopped (after it)."});
        props["transcript_stopped"] = json!(transcript_stopped_schema());
        schema["required"] = json!([
            "chunk_id",
            "wall_time_seconds",
            "original_token_count",
            "output",
            "reason"
        ]);
    }
    to_schema(schema)
}

/// `transcript_stopped`, in results and `read_output` pages.
pub(crate) fn transcript_stopped_schema() -> Value {
    json!({"type": "object", "properties": {"at": {"type": "integer", "description": "Session offset of the first byte not on disk."}, "error": {"type": "string", "description": "Why, as the OS says it (e.g. No space left on device)."}}, "description": "Present when the transcript stopped early (its disk filled or failed): bytes from at on are lost; the command ran on. At 0 with no transcript: none could be made."})
}

pub(crate) fn exit_notices_schema() -> Value {
    json!({
        "type": "array",
        "description": "Sessions of yours that exited while no call watched them, each announced once.",
        "items": {
            "type": "object",
            "properties": {
                "session_id": {"type": "integer"},
                "command": {"type": "string"},
                "exit_code": {"type": "integer"},
                "failure": {"type": "string"},
                "timed_out_ms": {"type": "integer"},
                "seconds_ago": {"type": "number"},
                "text": {"type": "string"}
            },
            "required": ["session_id", "command", "seconds_ago", "text"]
        }
    })
}

pub(crate) fn until_schema() -> Value {
    json!({
        "type": "object",
        "description": format!("Return before the window ends when this holds (the window stays the cap; the result's `reason` says which). Any of: `pattern`, a regex (Rust syntax, multi-line: ^ and $ match at line ends; at most {MAX_PATTERN_BYTES} bytes) matched against the output this call returns with terminal escapes removed, e.g. \"ready on :[0-9]+\" or \"(?i)error\"; `idle_ms` ({MIN_IDLE_MS}..{MAX_IDLE_MS}), return once the output has been quiet this long after at least one byte of output; `prompt: true`, return when the session waits for input (quiet for {PROMPT_QUIET_MS} ms with an unfinished last line such as `$ ` or `[y/N] `, or a password prompt with echo off); `exit: true`, return only at the exit (alone)."),
        "properties": {
            "pattern": {"type": "string", "description": "Regex matched against the output (escape sequences removed)."},
            "idle_ms": {"type": "integer", "description": format!("Quiet time after output, {MIN_IDLE_MS}..{MAX_IDLE_MS} ms.")},
            "exit": {"type": "boolean", "description": "Only the exit ends the wait (default false)."},
            "prompt": {"type": "boolean", "description": "Return when the session waits for input (default false)."}
        },
        "additionalProperties": false
    })
}

pub(crate) fn hygiene_properties(props: &mut Value, config: &StoreConfig) {
    props["strip_ansi"] = json!({"type": "boolean", "default": config.hygiene.strip_ansi, "description": format!("Remove terminal escape sequences (colours, cursor moves, titles) from the returned output. Default: {} (this server's setting); an exec_command's choice holds for its later polls.", config.hygiene.strip_ansi)});
    props["collapse_cr"] = json!({"type": "boolean", "default": config.hygiene.collapse_cr, "description": format!("Render carriage returns as a terminal shows them, so progress bars that redraw a line cost one line. Default: {} (this server's setting).", config.hygiene.collapse_cr)});
}
