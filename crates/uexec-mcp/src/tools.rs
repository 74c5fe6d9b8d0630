//! The tools as MCP clients see them: names, schemas and descriptions in our own words.
//! Each description states its default and its effective range (SPEC §10).

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool};
use serde_json::{json, Value};
use uexec_core::limits::{
    DEFAULT_EXEC_YIELD_TIME_MS, DEFAULT_MAX_OUTPUT_TOKENS, DEFAULT_WAIT_YIELD_TIME_MS,
    DEFAULT_WRITE_YIELD_TIME_MS, MAX_EMPTY_POLL_YIELD_TIME_MS, MAX_TIMEOUT_MS, MAX_WAIT_SESSIONS,
    MAX_YIELD_TIME_MS, MIN_EMPTY_POLL_YIELD_TIME_MS, MIN_TIMEOUT_MS, MIN_YIELD_TIME_MS,
    TIMEOUT_EXIT_CODE, TIMEOUT_KILL_GRACE_MS,
};
use uexec_core::until::{MAX_IDLE_MS, MAX_PATTERN_BYTES, MIN_IDLE_MS, PROMPT_QUIET_MS};
use uexec_core::StoreConfig;

pub const EXEC_COMMAND: &str = "exec_command";
pub const WRITE_STDIN: &str = "write_stdin";
pub const LIST_SESSIONS: &str = "list_sessions";
pub const TERMINATE_SESSION: &str = "terminate_session";
pub const WAIT: &str = "wait";
pub const READ_OUTPUT: &str = "read_output";
pub const SEND_INPUT: &str = "send_input";
pub const AWAIT_EXIT: &str = "await_exit";

fn object(v: Value) -> Arc<JsonObject> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(JsonObject::new()),
    }
}

/// The structured form of a snapshot (SPEC §4); absent fields are omitted. The extended
/// dialect adds why the call returned, a match, a timeout, a secret prompt and exit notices.
fn snapshot_schema(extended: bool) -> Arc<JsonObject> {
    let mut schema = json!({
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
    });
    if extended {
        let props = &mut schema["properties"];
        props["reason"] = json!({"type": "string", "enum": ["exited", "matched", "idle", "prompt", "window"], "description": "Why the call returned: the process exited, until.pattern matched, the output went idle, the session waits for input, or the window ended."});
        props["match"] = json!({"type": "object", "properties": {"text": {"type": "string"}, "offset": {"type": "integer", "description": "Byte offset of the match in everything the session printed."}}, "description": "What until.pattern matched (escape sequences removed)."});
        props["timed_out_ms"] = json!({"type": "integer", "description": format!("Present when timeout_ms killed the command; exit_code is then {TIMEOUT_EXIT_CODE}.")});
        props["awaiting_secret"] = json!({"type": "boolean", "description": "Present (true) when a tty session waits for input with echo off: a password prompt. Ask the person to answer it."});
        props["sandbox"] = json!({"type": "object", "description": "Present when the command runs sandboxed: profile, network, the layers applied (and missing_layers a best-effort fallback ran without), denied (false, true or \"likely\") and the output lines that are its evidence.", "properties": {"profile": {"type": "string"}, "network": {"type": "string"}, "layers": {"type": "array", "items": {"type": "string"}}, "missing_layers": {"type": "array", "items": {"type": "string"}}, "denied": {"type": ["boolean", "string"]}, "evidence": {"type": "array", "items": {"type": "string"}}}});
        props["exit_notices"] = exit_notices_schema();
        props["transcript"] = json!({"type": "string", "description": "Path of the session's transcript: every byte it printed (read_output pages through it)."});
        props["omitted_range"] = json!({"type": "object", "properties": {"start": {"type": "integer"}, "end": {"type": "integer"}}, "description": "Session byte offsets this result left out ([… N bytes omitted …]); omitted_readable says which of them read_output has."});
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
    object(schema)
}

/// `transcript_stopped`, in results and `read_output` pages.
fn transcript_stopped_schema() -> Value {
    json!({"type": "object", "properties": {"at": {"type": "integer", "description": "Session offset of the first byte not on disk."}, "error": {"type": "string", "description": "Why, as the OS says it (e.g. No space left on device)."}}, "description": "Present when the transcript stopped early (its disk filled or failed): bytes from at on are lost; the command ran on. At 0 with no transcript: none could be made."})
}

fn exit_notices_schema() -> Value {
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

fn until_schema() -> Value {
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

fn hygiene_properties(props: &mut Value, config: &StoreConfig) {
    props["strip_ansi"] = json!({"type": "boolean", "default": config.hygiene.strip_ansi, "description": format!("Remove terminal escape sequences (colours, cursor moves, titles) from the returned output. Default: {} (this server's setting); an exec_command's choice holds for its later polls.", config.hygiene.strip_ansi)});
    props["collapse_cr"] = json!({"type": "boolean", "default": config.hygiene.collapse_cr, "description": format!("Render carriage returns as a terminal shows them, so progress bars that redraw a line cost one line. Default: {} (this server's setting).", config.hygiene.collapse_cr)});
}

/// `sandbox` and `network`, offering only what narrows this server's policy (a ceiling: see
/// `uexec_core::policy::narrow`).
fn sandbox_properties(props: &mut Value, config: &StoreConfig) {
    use uexec_core::policy::{narrow, show_allow_entry, Network, Profile};
    let ceiling = &config.sandbox;
    let profile = ceiling.profile.as_str();
    let profiles: Vec<&str> = [
        Profile::ReadOnly,
        Profile::WorkspaceWrite,
        Profile::DangerFullAccess,
    ]
    .into_iter()
    .filter(|p| narrow(ceiling.profile, &Network::On, Some(*p), None).is_ok())
    .map(Profile::as_str)
    .collect();
    let network = match &ceiling.network {
        Network::Allow(allow) => format!(
            "an allowlist of {}",
            allow
                .iter()
                .map(show_allow_entry)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => format!("\"{}\"", other.as_str()),
    };
    let denial = match ceiling.on_denial {
        uexec_core::policy::OnDenial::Terminate => "another host fails the command and names the host",
        uexec_core::policy::OnDenial::Record => "another host is refused and the result names it (sandbox.denied: true) while the command runs on",
    };
    props["sandbox"] = json!({"type": "string", "enum": profiles, "default": profile, "description": format!("What the command may write: \"read-only\" (nothing but a private $TMPDIR), \"workspace-write\" (also the server's working directory and writable roots, wherever the command runs; never .git nor uexec's own files), \"danger-full-access\" (no restriction). This server's policy is {profile}: a call may narrow it, never widen it (a wider one is refused and nothing runs). A result whose output shows a denial says so; ask the user if the command needs more.")});
    let (strings, allow): (&[&str], bool) = match ceiling.network {
        Network::On => (&["off", "on"], true),
        Network::Allow(_) => (&["off"], true),
        Network::Off => (&["off"], false),
    };
    let mut forms = vec![json!({"type": "string", "enum": strings})];
    if allow {
        forms.push(json!({"type": "object", "properties": {"allow": {"type": "array", "items": {"type": "string"}}}, "required": ["allow"], "additionalProperties": false}));
    }
    props["network"] = json!({"oneOf": forms, "description": format!("\"off\": the command gets only a loopback of its own (IPv4/IPv6 sockets fail). {{\"allow\": [\"host\", \"*.domain\", \"host:port\"]}}: only those hosts, through a proxy uexec runs at 127.0.0.1:3128 (HTTP, HTTPS via CONNECT, SOCKS5; HTTP_PROXY etc. are set); {denial}. This server's policy is {network}: a call may narrow it (on, then an allowlist within it, then off), never widen it.")});
}

/// What a server's tools offer beyond the SPEC.
#[derive(Debug, Clone, Copy)]
pub struct Offer<'a> {
    pub environments: &'a [String],
    /// `--extended`: uexec's own arguments and result fields.
    pub extended: bool,
    pub config: &'a StoreConfig,
}

/// `exec_command`; with named environments, an `environment_id` argument picks one.
pub fn exec_command(offer: Offer<'_>) -> Tool {
    let environments = offer.environments;
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
    if offer.extended {
        let props = &mut schema["properties"];
        props["until"] = until_schema();
        props["timeout_ms"] = json!({"type": "integer", "description": format!("Hard completion timeout, unlike the window: at this many ms after the start the command's process group gets SIGTERM, then SIGKILL {TIMEOUT_KILL_GRACE_MS} ms later, and it reports exit code {TIMEOUT_EXIT_CODE} with `timed_out_ms`. Range {MIN_TIMEOUT_MS}..{MAX_TIMEOUT_MS}. Default: none.")});
        props["stdin"] = json!({"type": "string", "enum": ["null", "pipe"], "default": "null", "description": "Pipe sessions only: \"pipe\" gives the command a stdin pipe that write_stdin writes (chars) and closes (eof: true), e.g. to feed JSON to a filter without a terminal. Default \"null\" (/dev/null)."});
        hygiene_properties(props, offer.config);
        sandbox_properties(props, offer.config);
    }
    Tool::new(
        EXEC_COMMAND,
        "Run a shell command and watch it for up to yield_time_ms. If it exits in that window you get its output and exit code. If it is still running (a dev server, a long test suite, a REPL) you get the output so far and a session_id: the command keeps running in the background, and write_stdin polls it, types into it or interrupts it.",
        object(schema),
    )
    .with_raw_output_schema(snapshot_schema(offer.extended))
}

pub fn write_stdin(offer: Offer<'_>) -> Tool {
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
        WRITE_STDIN,
        "Poll a running session for new output, type into it, or interrupt it. Returns the output printed since the previous call (nothing is lost or repeated) and the exit code once the process has exited; after that the session_id is no longer valid.",
        object(schema),
    )
    .with_raw_output_schema(snapshot_schema(offer.extended))
}

/// `wait`: several sessions, one call.
pub fn wait() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "session_ids": {"type": "array", "items": {"type": "integer"}, "description": format!("Sessions to wait on (1 to {MAX_WAIT_SESSIONS}, each once).")},
            "all": {"type": "boolean", "default": false, "description": "Return when every session exits or meets `until`, not the first. Default: false."},
            "until": until_schema(),
            "yield_time_ms": {"type": "integer", "default": DEFAULT_WAIT_YIELD_TIME_MS, "description": format!("The window: the longest this call waits, in milliseconds. Default {DEFAULT_WAIT_YIELD_TIME_MS}; clamped between {MIN_YIELD_TIME_MS} and {MAX_EMPTY_POLL_YIELD_TIME_MS}. Progress notifications are sent while it waits.")},
            "max_output_tokens": {"type": "integer", "default": DEFAULT_MAX_OUTPUT_TOKENS, "description": format!("Token budget of each session's returned output. Default {DEFAULT_MAX_OUTPUT_TOKENS}, which is also the maximum.")}
        },
        "required": ["session_ids"],
        "additionalProperties": false
    });
    let output = json!({
        "type": "object",
        "properties": {
            "sessions": {"type": "array", "items": {"type": "object", "description": "One snapshot per session, in the order asked (as exec_command's result), or {session_id, error}."}},
            "exit_notices": exit_notices_schema()
        },
        "required": ["sessions"]
    });
    Tool::new(
        WAIT,
        "Wait on several running sessions in one call instead of polling each: returns when the first of them (or every one, with all: true) exits or meets `until`, or when the window ends, with each session's new output. Use it to wait for a test suite and a build at once, or for whichever of several servers is ready first.",
        object(schema),
    )
    .with_raw_output_schema(object(output))
}

/// `read_output`: pages through a transcript.
pub fn read_output() -> Tool {
    let max = uexec_core::store::READ_OUTPUT_MAX_BYTES;
    let default = uexec_core::store::READ_OUTPUT_DEFAULT_BYTES;
    let schema = json!({
        "type": "object",
        "properties": {
            "session_id": {"type": "integer", "description": "The session, running or recently exited (its transcript is kept until the disk caps rotate it away). Give this or transcript."},
            "transcript": {"type": "string", "description": "A transcript path a result named (for a command that exited in its first call, whose session id you never saw); only your own sessions' transcripts are readable."},
            "offset": {"type": "integer", "description": "Byte offset in everything the session printed to start at. Default: the first byte kept. A result's omitted_range.start reads what it left out."},
            "limit": {"type": "integer", "default": default, "description": format!("Most bytes to return. Default {default}, at most {max}.")},
            "grep": {"type": "string", "description": "Only the lines matching this regex (Rust syntax), each prefixed with its byte offset; scans at most 64 MiB from offset."},
            "tail_lines": {"type": "integer", "description": "Only the last N lines (1 to 10000). Not with offset or grep."}
        },
        "additionalProperties": false
    });
    let output = json!({
        "type": "object",
        "properties": {
            "session_id": {"type": "integer"},
            "transcript": {"type": "string"},
            "offset": {"type": "integer"},
            "next_offset": {"type": "integer", "description": "Where the next page starts."},
            "total": {"type": "integer", "description": "Bytes in the transcript: what the session printed so far, unless transcript_stopped says the transcript stopped there."},
            "first_kept": {"type": "integer", "description": "Bytes before this offset were rotated away."},
            "transcript_stopped": transcript_stopped_schema(),
            "text": {"type": "string"},
            "matches": {"type": "integer"}
        },
        "required": ["transcript", "offset", "next_offset", "total", "first_kept", "text"]
    });
    Tool::new(
        READ_OUTPUT,
        "Read a session's full output from its transcript on disk, also after it exited: what a result cut out of the middle, the last lines, or the lines matching a regex.",
        object(schema),
    )
    .with_raw_output_schema(object(output))
}

/// The tools of a person at the daemon, besides the agents' own.
pub fn person_tools() -> Vec<Tool> {
    let send = json!({
        "type": "object",
        "properties": {
            "session_id": {"type": "integer", "description": "Any session, whoever owns it."},
            "chars": {"type": "string", "default": "", "description": "Bytes to type (a tty session) or to write to its stdin pipe; \"\\u0003\" interrupts a pipe session."},
            "eof": {"type": "boolean", "default": false, "description": "Close the session's stdin pipe afterwards. Default: false."}
        },
        "required": ["session_id"],
        "additionalProperties": false
    });
    let wait = json!({
        "type": "object",
        "properties": {
            "session_id": {"type": "integer", "description": "Any session, whoever owns it."},
            "yield_time_ms": {"type": "integer", "default": 30000, "description": "Longest wait, 0 to 300000 ms. Default 30000."}
        },
        "required": ["session_id"],
        "additionalProperties": false
    });
    vec![
        Tool::new(
            SEND_INPUT,
            "Type into a session without taking its output (that stays for its owner).",
            object(send),
        ),
        Tool::new(
            AWAIT_EXIT,
            "Wait for a session's exit without taking its output or its exit report (they stay for its owner); says the exit code.",
            object(wait),
        ),
    ]
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
pub fn all(codex_tools_only: bool, offer: Offer<'_>) -> Vec<Tool> {
    let mut tools = vec![exec_command(offer), write_stdin(offer)];
    if !codex_tools_only {
        tools.push(list_sessions());
        tools.push(terminate_session());
        tools.push(wait());
        if offer.config.transcripts.is_some() {
            tools.push(read_output());
        }
    }
    tools
}
