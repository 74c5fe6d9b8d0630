//! What a message of the dialect is made of: request ids, error codes and errors, members
//! kept as raw JSON ([`RawJson`]), and [`Incoming`], one message as read from the peer.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

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

/// A member kept as raw JSON text, to be decoded straight into its type ([`RawJson::decode`]).
#[derive(Debug, Clone)]
pub struct RawJson(pub(super) Box<RawValue>);

impl RawJson {
    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// Whether it is `null`.
    pub fn is_null(&self) -> bool {
        self.get() == "null"
    }

    /// Reads it into `T`.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.get())
    }

    /// The JSON of `value`.
    pub fn from_value<T: Serialize + ?Sized>(value: &T) -> Result<Self, serde_json::Error> {
        serde_json::value::to_raw_value(value).map(Self)
    }
}

/// Same JSON text (not same value: `{"a":1, "b":2}` and `{"b":2,"a":1}` differ).
impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

/// One message read from the peer.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Request {
        id: RequestId,
        method: String,
        params: Option<RawJson>,
    },
    Notification {
        method: String,
        params: Option<RawJson>,
    },
    /// A response (what a client reads; a server has no use for it).
    Response {
        id: RequestId,
        outcome: Result<RawJson, RpcError>,
    },
}
