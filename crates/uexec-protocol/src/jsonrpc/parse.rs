//! Reading a frame of the dialect, and a method's params.
//!
//! Reading one frame ([`parse`]):
//! 1. the bytes must be JSON (else [`ParseError::Json`]) and an object (else
//!    [`ParseError::NotAnObject`]);
//! 2. with a `method`, it is a request when it has an `id` (an integer or a string; anything
//!    else is [`ParseError::BadId`]) and a notification without one;
//! 3. without a `method`, it is a response when it has an `id` and a `result` or an `error`;
//! 4. anything else is [`ParseError::NotAMessage`].
//!
//! Why no `serde_json::Value`: a frame may be 64 MiB, and a `Value` tree costs up to 32 bytes
//! per JSON byte (`[0,0,…]`: one 32-byte `Value` per two bytes), so one hostile frame took a
//! server to 1 GiB. The envelope is read field by field: `params` and `result` stay raw JSON
//! text ([`RawJson`], at most the frame's size) until [`decode_params`] reads them straight
//! into the type the method expects; members nobody reads are skipped without being built; a
//! non-object frame is only validated. Nesting is capped by `serde_json`'s recursion limit
//! (128), element counts by the typed params (see `process.rs`), and an error's `data` is
//! kept only up to [`MAX_ERROR_DATA_BYTES`].
//!
//! A server answers a [`ParseError`] with an error of id `-1` ([`MALFORMED_MESSAGE_ID`](super::MALFORMED_MESSAGE_ID)) and
//! code `-32600`, as Codex does (not `-32700`), and keeps the connection.

use serde::de::{self, DeserializeOwned, IgnoredAny, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use super::message::{Incoming, RawJson, RequestId, RpcError};

/// Largest `data` of an error response that is kept (a bigger one is dropped): it is read into a
/// `Value`, which may cost many times its size.
pub const MAX_ERROR_DATA_BYTES: usize = 64 * 1024;

/// Why a frame is not a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("invalid JSON: {0}")]
    Json(String),
    #[error("expected a JSON-RPC object")]
    NotAnObject,
    #[error("the id must be an integer or a string, got {0}")]
    BadId(String),
    #[error("the method must be a string")]
    BadMethod,
    #[error("a response's error member is malformed: {0}")]
    BadError(String),
    #[error("neither a request, a notification nor a response (no method, or no result/error)")]
    NotAMessage,
}

impl ParseError {
    /// The answer a server sends for this frame: id `-1`, code `-32600`.
    pub fn to_rpc_error(&self) -> RpcError {
        RpcError::invalid_request(format!("failed to parse JSON-RPC message: {self}"))
    }
}

/// Reads one frame (a WebSocket message or a stdio line).
pub fn parse(frame: &[u8]) -> Result<Incoming, ParseError> {
    let json = |e: serde_json::Error| ParseError::Json(e.to_string());
    let first = frame.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        // Only whether it is JSON at all matters: check it without building anything.
        serde_json::from_slice::<IgnoredAny>(frame).map_err(json)?;
        return Err(ParseError::NotAnObject);
    }
    let envelope: Envelope = serde_json::from_slice(frame).map_err(json)?;
    let id = envelope.id.map(IdField::into_id).transpose()?;
    match envelope.method {
        Some(MethodField::Name(method)) => Ok(match id {
            Some(id) => Incoming::Request {
                id,
                method,
                params: envelope.params,
            },
            None => Incoming::Notification {
                method,
                params: envelope.params,
            },
        }),
        Some(MethodField::Other) => Err(ParseError::BadMethod),
        None => {
            let Some(id) = id else {
                return Err(ParseError::NotAMessage);
            };
            if let Some(error) = envelope.error {
                return Ok(Incoming::Response {
                    id,
                    outcome: Err(read_error(&error)?),
                });
            }
            match envelope.result {
                Some(result) => Ok(Incoming::Response {
                    id,
                    outcome: Ok(result),
                }),
                None => Err(ParseError::NotAMessage),
            }
        }
    }
}

/// The members of a message; the others are skipped unread.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default, deserialize_with = "present_id")]
    id: Option<IdField>,
    #[serde(default, deserialize_with = "present_method")]
    method: Option<MethodField>,
    #[serde(default, deserialize_with = "present")]
    params: Option<RawJson>,
    #[serde(default, deserialize_with = "present")]
    result: Option<RawJson>,
    #[serde(default, deserialize_with = "present")]
    error: Option<RawJson>,
}

/// A member that is there, even as `null` (`"result": null` is a result).
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<RawJson>, D::Error> {
    Box::<RawValue>::deserialize(deserializer).map(|raw| Some(RawJson(raw)))
}

/// An `id` member that is there, even as `null` (a bad id, not a missing one).
fn present_id<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<IdField>, D::Error> {
    IdField::deserialize(deserializer).map(Some)
}

/// A `method` member that is there, even as `null`.
fn present_method<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<MethodField>, D::Error> {
    MethodField::deserialize(deserializer).map(Some)
}

/// An `id` member: an id, or what it was instead (never built: an id may be a huge array).
enum IdField {
    Id(RequestId),
    Bad(String),
}

impl IdField {
    fn into_id(self) -> Result<RequestId, ParseError> {
        match self {
            Self::Id(id) => Ok(id),
            Self::Bad(what) => Err(ParseError::BadId(what)),
        }
    }
}

impl<'de> Deserialize<'de> for IdField {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct IdVisitor;
        impl<'de> Visitor<'de> for IdVisitor {
            type Value = IdField;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a request id")
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<IdField, E> {
                Ok(IdField::Id(RequestId::Integer(n)))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<IdField, E> {
                Ok(i64::try_from(n)
                    .map(|n| IdField::Id(RequestId::Integer(n)))
                    .unwrap_or_else(|_| IdField::Bad(n.to_string())))
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<IdField, E> {
                Ok(IdField::Bad(n.to_string()))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<IdField, E> {
                Ok(IdField::Id(RequestId::String(s.to_string())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<IdField, E> {
                Ok(IdField::Id(RequestId::String(s)))
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> Result<IdField, E> {
                Ok(IdField::Bad(b.to_string()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<IdField, E> {
                Ok(IdField::Bad("null".to_string()))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<IdField, A::Error> {
                IgnoredAny.visit_seq(seq)?;
                Ok(IdField::Bad("an array".to_string()))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<IdField, A::Error> {
                IgnoredAny.visit_map(map)?;
                Ok(IdField::Bad("an object".to_string()))
            }
        }
        deserializer.deserialize_any(IdVisitor)
    }
}

/// A `method` member: a name, or anything else (skipped).
enum MethodField {
    Name(String),
    Other,
}

impl<'de> Deserialize<'de> for MethodField {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MethodVisitor;
        impl<'de> Visitor<'de> for MethodVisitor {
            type Value = MethodField;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a method name")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<MethodField, E> {
                Ok(MethodField::Name(s.to_string()))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<MethodField, E> {
                Ok(MethodField::Name(s))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<MethodField, E> {
                Ok(MethodField::Other)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<MethodField, E> {
                Ok(MethodField::Other)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<MethodField, E> {
                Ok(MethodField::Other)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<MethodField, E> {
                Ok(MethodField::Other)
            }
            fn visit_unit<E: de::Error>(self) -> Result<MethodField, E> {
                Ok(MethodField::Other)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<MethodField, A::Error> {
                IgnoredAny.visit_seq(seq)?;
                Ok(MethodField::Other)
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<MethodField, A::Error> {
                IgnoredAny.visit_map(map)?;
                Ok(MethodField::Other)
            }
        }
        deserializer.deserialize_any(MethodVisitor)
    }
}

/// A response's `error` member, `data` kept raw until its size is known.
#[derive(Deserialize)]
struct WireError {
    code: i64,
    message: String,
    #[serde(default)]
    data: Option<Box<RawValue>>,
}

fn read_error(raw: &RawJson) -> Result<RpcError, ParseError> {
    let wire: WireError = raw
        .decode()
        .map_err(|e| ParseError::BadError(e.to_string()))?;
    let data = wire
        .data
        .filter(|d| d.get().len() <= MAX_ERROR_DATA_BYTES && d.get() != "null")
        .and_then(|d| serde_json::from_str(d.get()).ok());
    Ok(RpcError {
        code: wire.code,
        message: wire.message,
        data,
    })
}

/// Deserializes a method's params; a missing or `null` `params` reads as `{}`.
pub fn decode_params<T: DeserializeOwned>(params: Option<&RawJson>) -> Result<T, RpcError> {
    let text = match params {
        Some(p) if !p.is_null() => p.get(),
        _ => "{}",
    };
    serde_json::from_str(text).map_err(|e| RpcError::invalid_params(without_position(&e)))
}

/// The error's message without serde_json's ` at line L column C` (the params are one line of
/// a frame; Codex, which reads them from a `Value`, says no position either).
fn without_position(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let position = format!(" at line {} column {}", error.line(), error.column());
    match text.strip_suffix(&position) {
        Some(message) => message.to_string(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn raw(value: Value) -> RawJson {
        RawJson::from_value(&value).unwrap()
    }

    #[test]
    fn requests_notifications_and_responses_are_told_apart() {
        assert_eq!(
            parse(br#"{"id":1,"method":"a","params":{"x":1}}"#).unwrap(),
            Incoming::Request {
                id: RequestId::Integer(1),
                method: "a".into(),
                params: Some(raw(json!({"x":1}))),
            }
        );
        assert_eq!(
            parse(br#"{"id":"s","method":"a"}"#).unwrap(),
            Incoming::Request {
                id: RequestId::String("s".into()),
                method: "a".into(),
                params: None,
            }
        );
        assert_eq!(
            parse(br#"{"method":"initialized","params":{}}"#).unwrap(),
            Incoming::Notification {
                method: "initialized".into(),
                params: Some(raw(json!({}))),
            }
        );
        assert!(matches!(
            parse(br#"{"id":3,"error":{"code":-32600,"message":"m"}}"#).unwrap(),
            Incoming::Response {
                outcome: Err(RpcError { code: -32600, .. }),
                ..
            }
        ));
    }

    #[test]
    fn malformed_frames_are_parse_errors() {
        assert!(matches!(parse(b"{not json"), Err(ParseError::Json(_))));
        assert_eq!(parse(b"[1,2]"), Err(ParseError::NotAnObject));
        assert_eq!(parse(br#"{"foo":1}"#), Err(ParseError::NotAMessage));
        assert_eq!(parse(br#"{"id":8}"#), Err(ParseError::NotAMessage));
        assert!(matches!(
            parse(br#"{"id":9.5,"method":"a"}"#),
            Err(ParseError::BadId(_))
        ));
        assert!(matches!(
            parse(br#"{"id":null,"method":"a"}"#),
            Err(ParseError::BadId(_))
        ));
        assert_eq!(parse(br#"{"id":1,"method":7}"#), Err(ParseError::BadMethod));
        assert_eq!(ParseError::NotAnObject.to_rpc_error().code, -32600);
    }

    #[test]
    fn a_null_result_is_a_result_and_null_params_are_none_given() {
        assert_eq!(
            parse(br#"{"id":1,"result":null}"#).unwrap(),
            Incoming::Response {
                id: RequestId::Integer(1),
                outcome: Ok(raw(Value::Null)),
            }
        );
        let Incoming::Request { params, .. } =
            parse(br#"{"id":1,"method":"m","params":null}"#).unwrap()
        else {
            panic!("not a request");
        };
        assert!(params.is_some_and(|p| p.is_null()));
    }

    #[test]
    fn bad_ids_and_methods_are_named_without_being_built() {
        assert_eq!(
            parse(br#"{"id":[1,[2]],"method":"a"}"#),
            Err(ParseError::BadId("an array".into()))
        );
        assert_eq!(
            parse(br#"{"id":true,"method":"a"}"#),
            Err(ParseError::BadId("true".into()))
        );
        assert_eq!(
            parse(br#"{"id":1,"method":{"a":[1]}}"#),
            Err(ParseError::BadMethod)
        );
        assert!(matches!(
            parse(br#"{"id":18446744073709551615,"method":"a"}"#),
            Err(ParseError::BadId(_))
        ));
    }

    #[test]
    fn deep_nesting_is_refused_not_a_stack_overflow() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse(deep.as_bytes()).is_err());
        let deep_id = format!(
            r#"{{"id":{}{},"method":"m"}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(parse(deep_id.as_bytes()).is_err());
        let deep_params = format!(
            r#"{{"id":1,"method":"m","params":{{"a":{}{}}}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        // Skipped while reading the envelope; refused when read into the method's params.
        let params = match parse(deep_params.as_bytes()) {
            Ok(Incoming::Request { params, .. }) => params,
            other => panic!("{other:?}"),
        };
        let err = decode_params::<Value>(params.as_ref()).unwrap_err();
        assert_eq!(err.code, -32602, "{err:?}");
    }

    #[test]
    fn big_error_data_is_dropped_small_is_kept() {
        let small =
            parse(br#"{"id":1,"error":{"code":-1,"message":"m","data":{"kind":"k"}}}"#).unwrap();
        let Incoming::Response {
            outcome: Err(e), ..
        } = small
        else {
            panic!("not an error response");
        };
        assert_eq!(e.data, Some(json!({"kind": "k"})));
        let zeros = vec!["0"; MAX_ERROR_DATA_BYTES].join(",");
        let big = format!(r#"{{"id":1,"error":{{"code":-1,"message":"m","data":[{zeros}]}}}}"#);
        let Incoming::Response {
            outcome: Err(e), ..
        } = parse(big.as_bytes()).unwrap()
        else {
            panic!("not an error response");
        };
        assert_eq!((e.code, e.data), (-1, None));
    }

    #[test]
    fn params_errors_name_no_position() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Needs {
            tty: bool,
        }
        let err = decode_params::<Needs>(Some(&raw(json!({"a": 1})))).unwrap_err();
        assert_eq!(err.message, "missing field `tty`");
    }

    #[test]
    fn missing_or_null_params_read_as_an_empty_object() {
        #[derive(Deserialize)]
        struct Empty {}
        assert!(decode_params::<Empty>(None).is_ok());
        assert!(decode_params::<Empty>(Some(&raw(Value::Null))).is_ok());
        let err = decode_params::<Empty>(Some(&raw(json!([1]))))
            .err()
            .unwrap();
        assert_eq!(err.code, -32602);
    }
}
