//! Tool arguments from JSON, checked field by field so that every error names its field
//! (SPEC §8: `invalid arguments: <field>: <why>`). Unknown fields are rejected. The helpers
//! here are shared by every tool; each tool's own fields are parsed in its file.

use serde_json::{Map, Value};
use uexec_core::{HygieneRequest, Until};

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

/// A tool call's arguments.
pub type Args = Map<String, Value>;

/// Which fields a server accepts beyond the SPEC's.
#[derive(Debug, Clone, Copy, Default)]
pub struct Dialect {
    /// `environment_id` (environments are configured).
    pub environments: bool,
    /// uexec's own arguments: `until`, `timeout_ms`, `stdin`, `eof`, hygiene.
    pub extended: bool,
    /// The client writes its own `Wall time:` line around a result (Codex): uexec's text
    /// leaves its own out, so that the model reads the fact once.
    pub wrapped: bool,
}

pub(crate) fn err(field: &str, reason: impl Into<String>) -> ArgError {
    ArgError {
        field: field.to_owned(),
        reason: reason.into(),
    }
}

pub(crate) fn reject_unknown(args: &Args, known: &[&str]) -> Result<(), ArgError> {
    match args.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(err(
            k,
            format!("unknown field (expected one of: {})", known.join(", ")),
        )),
        None => Ok(()),
    }
}

pub(crate) fn kind(v: &Value) -> &'static str {
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
pub(crate) fn field<'a>(args: &'a Args, name: &str) -> Option<&'a Value> {
    args.get(name).filter(|v| !v.is_null())
}

pub(crate) fn string(args: &Args, name: &str) -> Result<Option<String>, ArgError> {
    match field(args, name) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(err(name, format!("expected a string, got {}", kind(v)))),
    }
}

pub(crate) fn boolean(args: &Args, name: &str) -> Result<Option<bool>, ArgError> {
    match field(args, name) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(err(name, format!("expected a boolean, got {}", kind(v)))),
    }
}

/// An integer; numbers beyond `i64` saturate (windows clamp anyway), fractions are errors.
pub(crate) fn integer(args: &Args, name: &str) -> Result<Option<i64>, ArgError> {
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

pub(crate) fn object(arguments: Option<&Args>) -> Args {
    arguments.cloned().unwrap_or_default()
}

/// Keys of `until`.
pub const UNTIL_FIELDS: &[&str] = &["pattern", "idle_ms", "exit", "prompt"];

/// The `until` object; its errors name the key (`until.pattern`).
pub(crate) fn until(args: &Args) -> Result<Option<Until>, ArgError> {
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

pub(crate) fn hygiene(args: &Args) -> Result<HygieneRequest, ArgError> {
    Ok(HygieneRequest {
        strip_ansi: boolean(args, "strip_ansi")?,
        collapse_cr: boolean(args, "collapse_cr")?,
    })
}

pub(crate) fn session_id(args: &Args) -> Result<i32, ArgError> {
    let id = integer(args, "session_id")?.ok_or_else(|| err("session_id", "required"))?;
    i32::try_from(id).map_err(|_| err("session_id", format!("{id} is not a session id")))
}

/// The arguments object of a JSON value, for the tools' tests.
#[cfg(test)]
pub(crate) fn args(v: Value) -> Args {
    match v {
        Value::Object(m) => m,
        _ => Args::new(),
    }
}
