//! Tool arguments from JSON, checked field by field so that every error names its field
//! (SPEC §8: `invalid arguments: <field>: <why>`). Unknown fields are rejected.

use serde_json::{Map, Value};
use uexec_core::{ExecRequest, WriteRequest};

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

/// `exec_command` arguments; `environment_id` is a field only when `environments` is true.
pub fn exec_request(arguments: Option<&Args>, environments: bool) -> Result<ExecRequest, ArgError> {
    let args = object(arguments);
    if environments {
        let mut known = EXEC_FIELDS.to_vec();
        known.push("environment_id");
        reject_unknown(&args, &known)?;
    } else {
        reject_unknown(&args, EXEC_FIELDS)?;
    }
    let cmd = string(&args, "cmd")?.ok_or_else(|| err("cmd", "required"))?;
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
    })
}

pub fn write_request(arguments: Option<&Args>) -> Result<WriteRequest, ArgError> {
    let args = object(arguments);
    reject_unknown(&args, WRITE_FIELDS)?;
    let session_id = session_id(&args)?;
    Ok(WriteRequest {
        session_id,
        chars: string(&args, "chars")?.unwrap_or_default(),
        yield_time_ms: integer(&args, "yield_time_ms")?,
        max_output_tokens: integer(&args, "max_output_tokens")?,
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
            let e = exec_request(Some(&args(a.clone())), false).expect_err("must fail");
            assert_eq!(e.field, f, "{a}");
            assert!(e
                .to_string()
                .starts_with(&format!("invalid arguments: {f}: ")));
        }
    }

    #[test]
    fn exec_defaults_are_absent_and_nulls_too() {
        let r =
            exec_request(Some(&args(json!({"cmd": "ls", "workdir": null}))), false).expect("ok");
        assert_eq!(r.cmd, "ls");
        assert_eq!(r.workdir, None);
        assert_eq!(r.yield_time_ms, None);
    }

    #[test]
    fn huge_numbers_saturate_and_whole_floats_pass() {
        let r = exec_request(
            Some(&args(json!({"cmd": "ls", "yield_time_ms": 1e300}))),
            false,
        )
        .expect("ok");
        assert_eq!(r.yield_time_ms, Some(i64::MAX));
        let r = exec_request(
            Some(&args(json!({"cmd": "ls", "yield_time_ms": u64::MAX}))),
            false,
        )
        .expect("ok");
        assert_eq!(r.yield_time_ms, Some(i64::MAX));
        let r = exec_request(
            Some(&args(json!({"cmd": "ls", "yield_time_ms": 500.0}))),
            false,
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
                write_request(Some(&args(a))).expect_err("must fail").field,
                f
            );
        }
    }
}
