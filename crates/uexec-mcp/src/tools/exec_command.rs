//! `exec_command`: run a shell command and watch it for a window; what is still running
//! after it is a session that `write_stdin` polls. Its schema (with `environment_id` when
//! environments are configured, and uexec's own arguments unless `--codex-compat`), its arguments,
//! the call and the error text that names the flag a person would change.

use std::sync::Arc;

use rmcp::model::Tool;
use serde_json::{json, Value};
use uexec_core::limits::{
    DEFAULT_EXEC_YIELD_TIME_MS, DEFAULT_MAX_OUTPUT_TOKENS, MAX_TIMEOUT_MS, MAX_YIELD_TIME_MS,
    MIN_TIMEOUT_MS, MIN_YIELD_TIME_MS, TIMEOUT_EXIT_CODE, TIMEOUT_KILL_GRACE_MS,
};
use uexec_core::{
    check_session_name, ExecRequest, SessionStore, StoreConfig, MAX_SESSION_NAME_CHARS,
};

use super::parse::{
    boolean, err, field, hygiene, integer, kind, object, reject_unknown, string, until, ArgError,
    Args, Dialect,
};
use super::render;
use super::schema::{hygiene_properties, snapshot_schema, to_schema, until_schema, Offer};

pub const NAME: &str = "exec_command";

/// Field names of `exec_command`.
pub const FIELDS: &[&str] = &[
    "cmd",
    "workdir",
    "shell",
    "login",
    "tty",
    "yield_time_ms",
    "max_output_tokens",
];

/// uexec's own `exec_command` fields (not with `--codex-compat`).
pub const EXTENDED_FIELDS: &[&str] = &[
    "until",
    "timeout_ms",
    "stdin",
    "strip_ansi",
    "collapse_cr",
    "sandbox",
    "network",
    "name",
    "limits",
    "background",
];

/// `exec_command`; with named environments, an `environment_id` argument picks one.
pub fn tool(offer: Offer<'_>) -> Tool {
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
        props["name"] = json!({"type": "string", "description": format!("A name for the session, unique among your running sessions, that people can use instead of its id (`uexec logs NAME`): 1 to {MAX_SESSION_NAME_CHARS} letters, digits, '.', '_' or '-', not all digits. Default: none.")});
        props["stdin"] = json!({"type": "string", "enum": ["null", "pipe"], "default": "null", "description": "Pipe sessions only: \"pipe\" gives the command a stdin pipe that write_stdin writes (chars) and closes (eof: true), e.g. to feed JSON to a filter without a terminal. Default \"null\" (/dev/null)."});
        hygiene_properties(props, offer.config);
        sandbox_properties(props, offer.config);
        props["limits"] = limits_schema(offer.config);
        props["background"] = json!({"type": "boolean", "default": false, "description": "true: if the command is still running at the end of the window, hand it to the client as a background task instead of returning a session_id: you are told when it ends, with its exit code, its output and its transcript. Only for commands you will not type into or poll (a build, a test suite you wait for); clients without MCP Tasks get the usual result with a session_id. Default: false (the session_id is yours: poll it with write_stdin, or let `wait` tell you when it ends)."});
    }
    Tool::new(
        NAME,
        "Run a shell command and watch it for up to yield_time_ms. If it exits in that window you get its output and exit code. If it is still running (a dev server, a long test suite, a REPL) you get the output so far and a session_id: the command keeps running in the background, and write_stdin polls it, types into it or interrupts it.",
        to_schema(schema),
    )
    .with_raw_output_schema(snapshot_schema(offer.extended))
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

/// `limits`, saying this server's ceilings: a call may only lower them.
fn limits_schema(config: &StoreConfig) -> Value {
    use uexec_core::policy::{show_bytes, show_count};
    let ceiling = config.limits;
    let memory = ceiling.memory_max.map_or("none".to_owned(), show_bytes);
    let pids = ceiling.pids_max.map_or("none".to_owned(), show_count);
    json!({
        "type": "object",
        "description": format!("Limits of this command and every process it starts, together (its cgroup), for a build or test that may run away. memory_max: most memory in bytes (a number, or a string with K, M or G: \"512M\"); above it the kernel's OOM killer kills one of its processes, and the result says so (limits_hit). pids_max: most processes and threads at once; a fork beyond it fails. This server's limits (memory_max {memory}, pids_max {pids}) are ceilings: a call may only lower them. Where this machine or server cannot apply a limit, the call is refused, naming it. Default: the server's."),
        "properties": {
            "memory_max": {"type": ["integer", "string"], "description": "Bytes, e.g. 536870912 or \"512M\"."},
            "pids_max": {"type": "integer", "description": "Processes and threads at once."}
        },
        "additionalProperties": false
    })
}

/// `limits`: `{"memory_max": BYTES or "512M", "pids_max": N}` (the server's CPU limit is
/// its own).
fn limits(args: &Args) -> Result<uexec_core::policy::Limits, ArgError> {
    use uexec_core::policy::{check_bytes, check_pids, parse_bytes, parse_pids, Limits};
    let obj = match field(args, "limits") {
        None => return Ok(Limits::default()),
        Some(Value::Object(obj)) => obj,
        Some(v) => {
            return Err(err(
                "limits",
                format!("expected an object, got {}", kind(v)),
            ))
        }
    };
    if let Some(k) = obj
        .keys()
        .find(|k| !["memory_max", "pids_max"].contains(&k.as_str()))
    {
        let why = match k.as_str() {
            "cpu_max" => "unknown field: a CPU limit is the server's alone",
            _ => "unknown field (expected \"memory_max\" or \"pids_max\")",
        };
        return Err(err(&format!("limits.{k}"), why));
    }
    let value = |name: &str,
                 text: fn(&str) -> Result<u64, String>,
                 number: fn(u64) -> Result<u64, String>| {
        let field = format!("limits.{name}");
        match obj.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => text(s).map(Some).map_err(|e| err(&field, e)),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(n) => number(n).map(Some).map_err(|e| err(&field, e)),
                None => Err(err(&field, format!("{n} is not a whole number"))),
            },
            Some(v) => Err(err(&field, format!("expected a number, got {}", kind(v)))),
        }
    };
    Ok(Limits {
        memory_max: value("memory_max", parse_bytes, check_bytes)?,
        pids_max: value("pids_max", parse_pids, check_pids)?,
        cpu_max: None,
    })
}

/// `exec_command` arguments.
pub fn request(arguments: Option<&Args>, dialect: Dialect) -> Result<ExecRequest, ArgError> {
    let args = object(arguments);
    let mut known = FIELDS.to_vec();
    if dialect.environments {
        known.push("environment_id");
    }
    if dialect.extended {
        known.extend_from_slice(EXTENDED_FIELDS);
    }
    reject_unknown(&args, &known)?;
    let cmd = string(&args, "cmd")?.ok_or_else(|| err("cmd", "required"))?;
    // The face's, not the engine's: whether the call may become a task (`background`).
    boolean(&args, "background")?;
    let pipe_stdin = match string(&args, "stdin")?.as_deref() {
        None | Some("null") => false,
        Some("pipe") => true,
        Some(other) => {
            return Err(err(
                "stdin",
                format!("{other:?} is not one of \"pipe\", \"null\""),
            ))
        }
    };
    Ok(ExecRequest {
        cmd,
        workdir: string(&args, "workdir")?,
        shell: string(&args, "shell")?,
        login: boolean(&args, "login")?,
        tty: boolean(&args, "tty")?,
        yield_time_ms: integer(&args, "yield_time_ms")?,
        max_output_tokens: integer(&args, "max_output_tokens")?,
        call_id: None,
        environment_id: string(&args, "environment_id")?,
        until: until(&args)?,
        timeout_ms: integer(&args, "timeout_ms")?,
        pipe_stdin,
        // uexec's dialect: stdout and stderr in the program's order, as on a terminal.
        one_stream: dialect.extended,
        hygiene: hygiene(&args)?,
        sandbox: string(&args, "sandbox")?
            .map(|s| s.parse().map_err(|e: String| err("sandbox", e)))
            .transpose()?,
        network: network(&args)?,
        limits: limits(&args)?,
        name: string(&args, "name")?
            .map(|n| {
                check_session_name(&n)
                    .map(|()| n)
                    .map_err(|e| err("name", e))
            })
            .transpose()?,
    })
}

/// `background`: whether the call asks to become a background task if it outlives its
/// window (the server decides whether the client can have one). Default false.
pub fn background(arguments: Option<&Args>) -> Result<bool, ArgError> {
    match arguments {
        None => Ok(false),
        Some(args) => Ok(boolean(args, "background")?.unwrap_or(false)),
    }
}

/// `network`: `"off"`, `"on"` or `{"allow": ["host", "*.domain", "host:port"]}`.
fn network(args: &Args) -> Result<Option<uexec_core::policy::Network>, ArgError> {
    use uexec_core::policy::{AllowEntry, Network};
    match field(args, "network") {
        None => Ok(None),
        Some(Value::String(s)) => s.parse().map(Some).map_err(|e: String| err("network", e)),
        Some(Value::Object(obj)) => {
            if let Some(k) = obj.keys().find(|k| k.as_str() != "allow") {
                return Err(err(
                    &format!("network.{k}"),
                    "unknown field (expected \"allow\")",
                ));
            }
            let Some(Value::Array(items)) = obj.get("allow") else {
                return Err(err("network.allow", "expected an array of hosts"));
            };
            let mut allow = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let field = format!("network.allow[{i}]");
                let entry = item
                    .as_str()
                    .ok_or_else(|| err(&field, format!("expected a string, got {}", kind(item))))?;
                allow.push(AllowEntry::parse(entry).map_err(|e| err(&field, e))?);
            }
            Ok(Some(Network::Allow(allow)))
        }
        Some(v) => Err(err(
            "network",
            format!("expected \"off\" or \"on\", got {}", kind(v)),
        )),
    }
}

/// Runs the command in `store` with this connection's defaults (`config`: a daemon's owner
/// store outlives the connection that made it); its snapshot, before it is a result (a task
/// follows on from it). `with`: whom a command the rules hold asks.
pub async fn run(
    store: &Arc<SessionStore>,
    config: &StoreConfig,
    arguments: Option<&Args>,
    dialect: Dialect,
    call_id: String,
    with: uexec_core::CallWith,
) -> Result<uexec_core::Snapshot, String> {
    let mut req = request(arguments, dialect).map_err(|e| e.to_string())?;
    req.call_id = Some(call_id);
    store
        .exec_command_for(config, req, with)
        .await
        .map_err(|e| render::error_text(&e))
}

#[cfg(test)]
mod tests {
    use super::super::parse::args;
    use super::*;

    #[test]
    fn exec_errors_name_the_field() {
        let cases = [
            (json!({}), "cmd"),
            (
                json!({"cmd": "x", "yield_time_ms": "soon"}),
                "yield_time_ms",
            ),
            (json!({"cmd": "x", "tty": "yes"}), "tty"),
            (
                json!({"cmd": "x", "max_output_tokens": 1.5}),
                "max_output_tokens",
            ),
            (json!({"cmd": "x", "bogus_field": 1}), "bogus_field"),
            (json!({"cmd": 5}), "cmd"),
        ];
        for (a, f) in cases {
            let e = request(Some(&args(a.clone())), Dialect::default()).expect_err("must fail");
            assert_eq!(e.field, f, "{a}");
            assert!(e
                .to_string()
                .starts_with(&format!("invalid arguments: {f}: ")));
        }
    }

    #[test]
    fn background_is_a_boolean_of_uexec_s_dialect() {
        let extended = Dialect {
            extended: true,
            ..Dialect::default()
        };
        let e = request(
            Some(&args(json!({"cmd": "x", "background": "yes"}))),
            extended,
        )
        .expect_err("a string");
        assert_eq!(
            e.to_string(),
            "invalid arguments: background: expected a boolean, got a string"
        );
        let asked = args(json!({"cmd": "x", "background": true}));
        assert!(request(Some(&asked), extended).is_ok());
        assert_eq!(background(Some(&asked)), Ok(true));
        assert_eq!(background(None), Ok(false));
        // Not Codex's: an unknown field there.
        let e = request(Some(&asked), Dialect::default()).expect_err("unknown");
        assert_eq!(e.field, "background");
    }

    #[test]
    fn exec_defaults_are_absent_and_nulls_too() {
        let r = request(
            Some(&args(json!({"cmd": "ls", "workdir": null}))),
            Dialect::default(),
        )
        .expect("ok");
        assert_eq!(r.cmd, "ls");
        assert_eq!(r.workdir, None);
        assert_eq!(r.yield_time_ms, None);
    }

    #[test]
    fn huge_numbers_saturate_and_whole_floats_pass() {
        let r = request(
            Some(&args(json!({"cmd": "ls", "yield_time_ms": 1e300}))),
            Dialect::default(),
        )
        .expect("ok");
        assert_eq!(r.yield_time_ms, Some(i64::MAX));
        let r = request(
            Some(&args(json!({"cmd": "ls", "yield_time_ms": u64::MAX}))),
            Dialect::default(),
        )
        .expect("ok");
        assert_eq!(r.yield_time_ms, Some(i64::MAX));
        let r = request(
            Some(&args(json!({"cmd": "ls", "yield_time_ms": 500.0}))),
            Dialect::default(),
        )
        .expect("ok");
        assert_eq!(r.yield_time_ms, Some(500));
    }

    #[test]
    fn sandbox_and_network_exist_only_in_the_extended_dialect() {
        let a = args(json!({"cmd": "x", "sandbox": "read-only", "network": "off"}));
        let e = request(Some(&a), Dialect::default()).expect_err("codex dialect");
        assert!(e.field == "sandbox" || e.field == "network", "{}", e.field);
        let extended = Dialect {
            extended: true,
            ..Dialect::default()
        };
        let r = request(Some(&a), extended).expect("extended");
        assert_eq!(r.sandbox, Some(uexec_core::policy::Profile::ReadOnly));
        assert_eq!(r.network, Some(uexec_core::policy::Network::Off));
    }

    #[test]
    fn limits_are_read_in_the_extended_dialect_only() {
        use uexec_core::policy::{Limits, NO_LIMIT};
        let a = args(json!({"cmd": "x", "limits": {"memory_max": "512M", "pids_max": 20}}));
        let e = request(Some(&a), Dialect::default()).expect_err("codex dialect");
        assert_eq!(e.field, "limits");
        let extended = Dialect {
            extended: true,
            ..Dialect::default()
        };
        let r = request(Some(&a), extended).expect("extended");
        assert_eq!(
            r.limits,
            Limits {
                memory_max: Some(512 << 20),
                pids_max: Some(20),
                cpu_max: None
            }
        );
        let r = request(
            Some(&args(
                json!({"cmd": "x", "limits": {"memory_max": 1073741824, "pids_max": "max"}}),
            )),
            extended,
        )
        .expect("numbers and max");
        assert_eq!(
            (r.limits.memory_max, r.limits.pids_max),
            (Some(1 << 30), Some(NO_LIMIT))
        );
        let r = request(Some(&args(json!({"cmd": "x", "limits": {}}))), extended).expect("empty");
        assert!(r.limits.is_empty());
    }

    #[test]
    fn extended_errors_name_the_field() {
        let extended = Dialect {
            extended: true,
            ..Dialect::default()
        };
        for (a, f) in [
            (json!({"cmd": "x", "until": "ready"}), "until"),
            (
                json!({"cmd": "x", "until": {"patern": "x"}}),
                "until.patern",
            ),
            (
                json!({"cmd": "x", "until": {"idle_ms": "1s"}}),
                "until.idle_ms",
            ),
            (json!({"cmd": "x", "until": {"exit": 1}}), "until.exit"),
            (json!({"cmd": "x", "stdin": "file"}), "stdin"),
            (json!({"cmd": "x", "timeout_ms": 1.5}), "timeout_ms"),
            (json!({"cmd": "x", "strip_ansi": "yes"}), "strip_ansi"),
            (json!({"cmd": "x", "sandbox": "readonly"}), "sandbox"),
            (json!({"cmd": "x", "sandbox": 1}), "sandbox"),
            (json!({"cmd": "x", "network": "maybe"}), "network"),
            (
                json!({"cmd": "x", "network": {"allow": ["ok.test", "http://x"]}}),
                "network.allow[1]",
            ),
            (
                json!({"cmd": "x", "network": {"allow": "x"}}),
                "network.allow",
            ),
            (json!({"cmd": "x", "network": {"deny": []}}), "network.deny"),
            (json!({"cmd": "x", "network": true}), "network"),
            (json!({"cmd": "x", "name": "a b"}), "name"),
            (json!({"cmd": "x", "name": ""}), "name"),
            (json!({"cmd": "x", "name": "1234"}), "name"),
            (json!({"cmd": "x", "name": 5}), "name"),
            (json!({"cmd": "x", "name": "x".repeat(33)}), "name"),
            (json!({"cmd": "x", "limits": 5}), "limits"),
            (
                json!({"cmd": "x", "limits": {"cpu_max": 1}}),
                "limits.cpu_max",
            ),
            (
                json!({"cmd": "x", "limits": {"memory": 1}}),
                "limits.memory",
            ),
            (
                json!({"cmd": "x", "limits": {"memory_max": "lots"}}),
                "limits.memory_max",
            ),
            (
                json!({"cmd": "x", "limits": {"memory_max": 4096}}),
                "limits.memory_max",
            ),
            (
                json!({"cmd": "x", "limits": {"memory_max": -1}}),
                "limits.memory_max",
            ),
            (
                json!({"cmd": "x", "limits": {"memory_max": 1.5}}),
                "limits.memory_max",
            ),
            (
                json!({"cmd": "x", "limits": {"memory_max": true}}),
                "limits.memory_max",
            ),
            (
                json!({"cmd": "x", "limits": {"pids_max": 1}}),
                "limits.pids_max",
            ),
            (
                json!({"cmd": "x", "limits": {"pids_max": "many"}}),
                "limits.pids_max",
            ),
        ] {
            let e = request(Some(&args(a.clone())), extended).expect_err("must fail");
            assert_eq!(e.field, f, "{a}");
        }
    }
}
