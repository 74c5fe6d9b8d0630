//! JSON-RPC envelopes of the dialect: no `"jsonrpc"` field, integer or string ids.
//!
//! Reading one frame ([`parse`]):
//! 1. the bytes must be JSON (else [`ParseError::Json`]) and an object (else
//!    [`ParseError::NotAnObject`]);
//! 2. with a `method`, it is a request when it has an `id` (an integer or a string; anything
//!    else is [`ParseError::BadId`]) and a notification without one;
//! 3. without a `method`, it is a response when it has an `id` and a `result` or an `error`;
//! 4. anything else is [`ParseError::NotAMessage`].
//!
//! A server answers a [`ParseError`] with an error of id `-1` ([`MALFORMED_MESSAGE_ID`]) and
//! code `-32600`, as Codex does (not `-32700`), and keeps the connection.
//!
//! Writing goes through [`encode_result`], [`encode_error`] and [`encode_notification`], which
//! serialize typed payloads straight to text (no intermediate `Value`): a `process/read`
//! answer can carry a megabyte of output.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The id a server uses to answer a message it could not read.
pub const MALFORMED_MESSAGE_ID: RequestId = RequestId::Integer(-1);

/// A request id: an integer or a string, echoed verbatim in the response.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    Integer(i64),
    String(String),
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Integer(n) => write!(f, "{n}"),
            Self::String(s) => write!(f, "{s:?}"),
        }
    }
}

/// The error codes of the dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// `-32600`: malformed message, unknown process or session, wrong handshake phase.
    InvalidRequest,
    /// `-32601`: no such method.
    MethodNotFound,
    /// `-32602`: the params do not fit the method.
    InvalidParams,
    /// `-32603`: the server failed to do what was asked (e.g. the spawn failed).
    InternalError,
    /// `-32004`: a named resource does not exist.
    NotFound,
    /// `-32010`: the session to resume is attached to another live connection.
    SessionAttached,
}

impl ErrorCode {
    /// The numeric code on the wire.
    pub const fn code(self) -> i64 {
        match self {
            Self::InvalidRequest => -32600,
            Self::MethodNotFound => -32601,
            Self::InvalidParams => -32602,
            Self::InternalError => -32603,
            Self::NotFound => -32004,
            Self::SessionAttached => -32010,
        }
    }
}

/// The `error` member of a response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("error {code}: {message}")]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with a code and a message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code: code.code(),
            message: message.into(),
            data: None,
        }
    }

    /// Attaches structured `data`.
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    pub fn method_not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::MethodNotFound, message)
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidParams, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InternalError, message)
    }
}

/// One message read from the peer.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Request {
        id: RequestId,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// A response (what a client reads; a server has no use for it).
    Response {
        id: RequestId,
        outcome: Result<Value, RpcError>,
    },
}

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
    let value: Value =
        serde_json::from_slice(frame).map_err(|e| ParseError::Json(e.to_string()))?;
    let Value::Object(mut obj) = value else {
        return Err(ParseError::NotAnObject);
    };
    let id = obj.remove("id").map(parse_id).transpose()?;
    match obj.remove("method") {
        Some(Value::String(method)) => {
            let params = obj.remove("params");
            Ok(match id {
                Some(id) => Incoming::Request { id, method, params },
                None => Incoming::Notification { method, params },
            })
        }
        Some(_) => Err(ParseError::BadMethod),
        None => parse_response(id, obj),
    }
}

fn parse_id(value: Value) -> Result<RequestId, ParseError> {
    match value {
        Value::Number(n) => n
            .as_i64()
            .map(RequestId::Integer)
            .ok_or_else(|| ParseError::BadId(n.to_string())),
        Value::String(s) => Ok(RequestId::String(s)),
        other => Err(ParseError::BadId(other.to_string())),
    }
}

fn parse_response(
    id: Option<RequestId>,
    mut obj: Map<String, Value>,
) -> Result<Incoming, ParseError> {
    let Some(id) = id else {
        return Err(ParseError::NotAMessage);
    };
    if let Some(error) = obj.remove("error") {
        let error: RpcError =
            serde_json::from_value(error).map_err(|e| ParseError::BadError(e.to_string()))?;
        return Ok(Incoming::Response {
            id,
            outcome: Err(error),
        });
    }
    match obj.remove("result") {
        Some(result) => Ok(Incoming::Response {
            id,
            outcome: Ok(result),
        }),
        None => Err(ParseError::NotAMessage),
    }
}

#[derive(Serialize)]
struct ResultEnvelope<'a, T> {
    id: &'a RequestId,
    result: &'a T,
}

#[derive(Serialize)]
struct ErrorEnvelope<'a> {
    id: &'a RequestId,
    error: &'a RpcError,
}

#[derive(Serialize)]
struct NotificationEnvelope<'a, T> {
    method: &'a str,
    params: &'a T,
}

#[derive(Serialize)]
struct RequestEnvelope<'a, T> {
    id: &'a RequestId,
    method: &'a str,
    params: &'a T,
}

/// `{"id", "result"}` as text.
pub fn encode_result<T: Serialize>(
    id: &RequestId,
    result: &T,
) -> Result<String, serde_json::Error> {
    serde_json::to_string(&ResultEnvelope { id, result })
}

/// `{"id", "error"}` as text.
pub fn encode_error(id: &RequestId, error: &RpcError) -> String {
    // Only strings, integers and `Value`s: serialization cannot fail.
    serde_json::to_string(&ErrorEnvelope { id, error }).unwrap_or_else(|_| {
        format!(
            r#"{{"id":-1,"error":{{"code":{},"message":"unencodable error"}}}}"#,
            error.code
        )
    })
}

/// `{"method", "params"}` as text.
pub fn encode_notification<T: Serialize>(
    method: &str,
    params: &T,
) -> Result<String, serde_json::Error> {
    serde_json::to_string(&NotificationEnvelope { method, params })
}

/// `{"id", "method", "params"}` as text (for clients).
pub fn encode_request<T: Serialize>(
    id: &RequestId,
    method: &str,
    params: &T,
) -> Result<String, serde_json::Error> {
    serde_json::to_string(&RequestEnvelope { id, method, params })
}

/// Deserializes a method's params; a missing or `null` `params` reads as `{}`.
pub fn decode_params<T: serde::de::DeserializeOwned>(params: Option<Value>) -> Result<T, RpcError> {
    let params = match params {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(p) => p,
    };
    serde_json::from_value(params).map_err(|e| RpcError::invalid_params(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requests_notifications_and_responses_are_told_apart() {
        assert_eq!(
            parse(br#"{"id":1,"method":"a","params":{"x":1}}"#).unwrap(),
            Incoming::Request {
                id: RequestId::Integer(1),
                method: "a".into(),
                params: Some(json!({"x":1})),
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
                params: Some(json!({})),
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
    fn envelopes_have_no_jsonrpc_field() {
        let text = encode_result(&RequestId::Integer(1), &json!({"a": 1})).unwrap();
        assert_eq!(text, r#"{"id":1,"result":{"a":1}}"#);
        let text = encode_error(&MALFORMED_MESSAGE_ID, &RpcError::invalid_request("bad"));
        assert_eq!(text, r#"{"id":-1,"error":{"code":-32600,"message":"bad"}}"#);
        let text = encode_notification("process/closed", &json!({"seq": 2})).unwrap();
        assert_eq!(text, r#"{"method":"process/closed","params":{"seq":2}}"#);
    }

    #[test]
    fn missing_or_null_params_read_as_an_empty_object() {
        #[derive(Deserialize)]
        struct Empty {}
        assert!(decode_params::<Empty>(None).is_ok());
        assert!(decode_params::<Empty>(Some(Value::Null)).is_ok());
        let err = decode_params::<Empty>(Some(json!([1]))).err().unwrap();
        assert_eq!(err.code, -32602);
    }
}
