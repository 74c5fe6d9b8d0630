//! Tool arguments from JSON, checked field by field so that every error names its field
//! (SPEC §8: `invalid arguments: <field>: <why>`). Unknown fields are rejected.

use serde_json::{Map, Value};
use uexec_core::{
    ExecRequest, HygieneRequest, ReadOutputRequest, Until, WaitRequest, WriteRequest,
};

/// A bad argument: which field, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError {
    pub field: String,
    pub reason: String,
}

impl std::fmt::Display for ArgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid arguments: {}: {}", self.field, self.reason)
    }
}

type Args = Map<String, Value>;

fn err(field: &str, reason: impl Into<String>) -> ArgError {
    ArgError {
        field: field.to_owned(),
        reason: reason.into(),
    }
}

fn reject_unknown(args: &Args, known: &[&str]) -> Result<(), ArgError> {
    match args.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(err(
            k,
            format!("unknown field (expected one of: {})", known.join(", ")),
        )),
        None => Ok(()),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A present, non-null value (null counts as absent for optional fields).
fn field<'a>(args: &'a Args, name: &str) -> Option<&'a Value> {
    args.get(name).filter(|v| !v.is_null())
}

fn string(args: &Args, name: &str) -> Result<Option<String>, ArgError> {
    match field(args, name) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(err(name, format!("expected a string, got {}", kind(v)))),
    }
}

fn boolean(args: &Args, name: &str) -> Result<Option<bool>, ArgError> {
    match field(args, name) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(err(name, format!("expected a boolean, got {}", kind(v)))),
    }
}

/// An integer; numbers beyond `i64` saturate (windows clamp anyway), fractions are errors.
fn integer(args: &Args, name: &str) -> Result<Option<i64>, ArgError> {
    match field(args, name) {
        None => Ok(None),
        Some(Value::Number(n)) => {
            if let Some(i) = n.as_i64() {
                Ok(Some(i))
            } else if n.as_u64().is_some() {
                Ok(Some(i64::MAX))
            } else {
                match n.as_f64() {
                    Some(f) if f.fract() == 0.0 && f.is_finite() => Ok(Some(f as i64)),
                    _ => Err(err(name, format!("expected an integer, got {n}"))),
                }
            }
        }
        Some(v) => Err(err(name, format!("expected an integer, got {}", kind(v)))),
    }
}

fn object(arguments: Option<&Args>) -> Args {
    arguments.cloned().unwrap_or_default()
}

/// Field names of `exec_command`.
pub const EXEC_FIELDS: &[&str] = &[
    "cmd",
    "workdir",
    "shell",
    "login",
    "tty",
    "yield_time_ms",
    "max_output_tokens",
];

/// Field names of `write_stdin`.
pub const WRITE_FIELDS: &[&str] = &["session_id", "chars", "yield_time_ms", "max_output_tokens"];

/// uexec's own `exec_command` fields (`--extended`).
pub const EXEC_EXTENDED_FIELDS: &[&str] = &[
    "until",
    "timeout_ms",
    "stdin",
    "strip_ansi",
    "collapse_cr",
    "sandbox",
    "network",
];

/// uexec's own `write_stdin` fields (`--extended`).
pub const WRITE_EXTENDED_FIELDS: &[&str] = &["until", "eof", "strip_ansi", "collapse_cr"];

/// Field names of `wait`.
pub const WAIT_FIELDS: &[&str] = &[
    "session_ids",
    "all",
    "until",
    "yield_time_ms",
    "max_output_tokens",
];

/// Field names of `read_output`.
pub const READ_OUTPUT_FIELDS: &[&str] = &[
    "session_id",
    "transcript",
    "offset",
    "limit",
    "grep",
    "tail_lines",
];

/// `read_output` arguments.
pub fn read_output_request(arguments: Option<&Args>) -> Result<ReadOutputRequest, ArgError> {
    let args = object(arguments);
    reject_unknown(&args, READ_OUTPUT_FIELDS)?;
    let session_id = match field(&args, "session_id") {
        None => None,
        Some(_) => Some(session_id(&args)?),
    };
    Ok(ReadOutputRequest {
        session_id,
        transcript: string(&args, "transcript")?.map(std::path::PathBuf::from),
        offset: integer(&args, "offset")?,
        limit: integer(&args, "limit")?,
        grep: string(&args, "grep")?,
        tail_lines: integer(&args, "tail_lines")?,
    })
}

/// `send_input`: (session, chars, eof).
pub fn send_input_request(arguments: Option<&Args>) -> Result<(i32, String, bool), ArgError> {
    let args = object(arguments);
    reject_unknown(&args, &["session_id", "chars", "eof"])?;
    Ok((
        session_id(&args)?,
        string(&args, "chars")?.unwrap_or_default(),
        boolean(&args, "eof")?.unwrap_or(false),
    ))
}

/// `await_exit`: (session, milliseconds).
pub fn await_exit_request(arguments: Option<&Args>) -> Result<(i32, u64), ArgError> {
    let args = object(arguments);
    reject_unknown(&args, &["session_id", "yield_time_ms"])?;
    let ms = match integer(&args, "yield_time_ms")? {
        None => 30_000,
        Some(ms) if (0..=300_000).contains(&ms) => ms as u64,
        Some(ms) => {
            return Err(err(
                "yield_time_ms",
                format!("{ms} is out of range (0..=300000)"),
            ))
        }
    };
    Ok((session_id(&args)?, ms))
}

/// Keys of `until`.
pub const UNTIL_FIELDS: &[&str] = &["pattern", "idle_ms", "exit", "prompt"];

/// Which fields a server accepts beyond the SPEC's.
#[derive(Debug, Clone, Copy, Default)]
pub struct Dialect {
    /// `environment_id` (environments are configured).
    pub environments: bool,
    /// uexec's own arguments: `until`, `timeout_ms`, `stdin`, `eof`, hygiene.
    pub extended: bool,
}

/// `exec_command` arguments.
pub fn exec_request(arguments: Option<&Args>, dialect: Dialect) -> Result<ExecRequest, ArgError> {
    let args = object(arguments);
    let mut known = EXEC_FIELDS.to_vec();
    if dialect.environments {
        known.push("environment_id");
    }
    if dialect.extended {
        known.extend_from_slice(EXEC_EXTENDED_FIELDS);
    }
    reject_unknown(&args, &known)?;
    let cmd = string(&args, "cmd")?.ok_or_else(|| err("cmd", "required"))?;
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
        hygiene: hygiene(&args)?,
        sandbox: string(&args, "sandbox")?
            .map(|s| s.parse().map_err(|e: String| err("sandbox", e)))
            .transpose()?,
        network: network(&args)?,
    })
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

pub fn write_request(arguments: Option<&Args>, dialect: Dialect) -> Result<WriteRequest, ArgError> {
    let args = object(arguments);
    let mut known = WRITE_FIELDS.to_vec();
    if dialect.extended {
        known.extend_from_slice(WRITE_EXTENDED_FIELDS);
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

/// `wait` arguments.
pub fn wait_request(arguments: Option<&Args>) -> Result<WaitRequest, ArgError> {
    let args = object(arguments);
    reject_unknown(&args, WAIT_FIELDS)?;
    let ids = match field(&args, "session_ids") {
        None => return Err(err("session_ids", "required")),
        Some(Value::Array(items)) => items,
        Some(v) => {
            return Err(err(
                "session_ids",
                format!("expected an array, got {}", kind(v)),
            ))
        }
    };
    let mut session_ids = Vec::with_capacity(ids.len());
    for item in ids {
        let id = item
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| err("session_ids", format!("{item} is not a session id")))?;
        session_ids.push(id);
    }
    Ok(WaitRequest {
        session_ids,
        all: boolean(&args, "all")?.unwrap_or(false),
        until: until(&args)?,
        yield_time_ms: integer(&args, "yield_time_ms")?,
        max_output_tokens: integer(&args, "max_output_tokens")?,
    })
}

/// The `until` object; its errors name the key (`until.pattern`).
fn until(args: &Args) -> Result<Option<Until>, ArgError> {
    let obj = match field(args, "until") {
        None => return Ok(None),
        Some(Value::Object(obj)) => obj,
        Some(v) => return Err(err("until", format!("expected an object, got {}", kind(v)))),
    };
    if let Some(k) = obj.keys().find(|k| !UNTIL_FIELDS.contains(&k.as_str())) {
        return Err(err(
            &format!("until.{k}"),
            format!(
                "unknown field (expected one of: {})",
                UNTIL_FIELDS.join(", ")
            ),
        ));
    }
    let nested = |e: ArgError| err(&format!("until.{}", e.field), e.reason);
    Ok(Some(Until {
        pattern: string(obj, "pattern").map_err(nested)?,
        idle_ms: integer(obj, "idle_ms").map_err(nested)?,
        exit: boolean(obj, "exit").map_err(nested)?.unwrap_or(false),
        prompt: boolean(obj, "prompt").map_err(nested)?.unwrap_or(false),
    }))
}

fn hygiene(args: &Args) -> Result<HygieneRequest, ArgError> {
    Ok(HygieneRequest {
        strip_ansi: boolean(args, "strip_ansi")?,
        collapse_cr: boolean(args, "collapse_cr")?,
    })
}

/// `session_id` of `terminate_session`.
pub fn terminate_request(arguments: Option<&Args>) -> Result<i32, ArgError> {
    let args = object(arguments);
    reject_unknown(&args, &["session_id"])?;
    session_id(&args)
}

/// `list_sessions` takes nothing.
pub fn list_request(arguments: Option<&Args>) -> Result<(), ArgError> {
    reject_unknown(&object(arguments), &[])
}

fn session_id(args: &Args) -> Result<i32, ArgError> {
    let id = integer(args, "session_id")?.ok_or_else(|| err("session_id", "required"))?;
    i32::try_from(id).map_err(|_| err("session_id", format!("{id} is not a session id")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Args {
        match v {
            Value::Object(m) => m,
            _ => Args::new(),
        }
    }

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
            let e =
                exec_request(Some(&args(a.clone())), Dialect::default()).expect_err("must fail");
            assert_eq!(e.field, f, "{a}");
            assert!(e
                .to_string()
                .starts_with(&format!("invalid arguments: {f}: ")));
        }
    }

    #[test]
    fn exec_defaults_are_absent_and_nulls_too() {
        let r = exec_request(
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
        let r = exec_request(
            Some(&args(json!({"cmd": "ls", "yield_time_ms": 1e300}))),
            Dialect::default(),
        )
        .expect("ok");
        assert_eq!(r.yield_time_ms, Some(i64::MAX));
        let r = exec_request(
            Some(&args(json!({"cmd": "ls", "yield_time_ms": u64::MAX}))),
            Dialect::default(),
        )
        .expect("ok");
        assert_eq!(r.yield_time_ms, Some(i64::MAX));
        let r = exec_request(
            Some(&args(json!({"cmd": "ls", "yield_time_ms": 500.0}))),
            Dialect::default(),
        )
        .expect("ok");
        assert_eq!(r.yield_time_ms, Some(500));
    }

    #[test]
    fn write_errors_name_the_field() {
        for (a, f) in [
            (json!({}), "session_id"),
            (json!({"session_id": "abc"}), "session_id"),
            (json!({"session_id": 1000, "chars": 5}), "chars"),
            (json!({"session_id": 1u64 << 40}), "session_id"),
        ] {
            assert_eq!(
                write_request(Some(&args(a)), Dialect::default())
                    .expect_err("must fail")
                    .field,
                f
            );
        }
    }

    #[test]
    fn extended_fields_exist_only_in_the_extended_dialect() {
        let a = args(json!({"cmd": "x", "until": {"pattern": "ready"}}));
        let e = exec_request(Some(&a), Dialect::default()).expect_err("codex dialect");
        assert_eq!(e.field, "until");
        let extended = Dialect {
            extended: true,
            ..Dialect::default()
        };
        let r = exec_request(Some(&a), extended).expect("extended");
        assert_eq!(r.until.and_then(|u| u.pattern).as_deref(), Some("ready"));
        let w = args(json!({"session_id": 1000, "eof": true}));
        assert_eq!(
            write_request(Some(&w), Dialect::default())
                .expect_err("codex dialect")
                .field,
            "eof"
        );
        assert!(write_request(Some(&w), extended).expect("extended").eof);
    }

    #[test]
    fn sandbox_and_network_exist_only_in_the_extended_dialect() {
        let a = args(json!({"cmd": "x", "sandbox": "read-only", "network": "off"}));
        let e = exec_request(Some(&a), Dialect::default()).expect_err("codex dialect");
        assert!(e.field == "sandbox" || e.field == "network", "{}", e.field);
        let extended = Dialect {
            extended: true,
            ..Dialect::default()
        };
        let r = exec_request(Some(&a), extended).expect("extended");
        assert_eq!(r.sandbox, Some(uexec_core::policy::Profile::ReadOnly));
        assert_eq!(r.network, Some(uexec_core::policy::Network::Off));
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
        ] {
            let e = exec_request(Some(&args(a.clone())), extended).expect_err("must fail");
            assert_eq!(e.field, f, "{a}");
        }
        for (a, f) in [
            (json!({}), "session_ids"),
            (json!({"session_ids": 5}), "session_ids"),
            (json!({"session_ids": ["a"]}), "session_ids"),
            (json!({"session_ids": [1000], "all": "yes"}), "all"),
            (json!({"session_ids": [1000], "bogus": 1}), "bogus"),
        ] {
            let e = wait_request(Some(&args(a.clone()))).expect_err("must fail");
            assert_eq!(e.field, f, "{a}");
        }
    }
}
