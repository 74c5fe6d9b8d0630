//! Writing a frame of the dialect: [`encode_result`], [`encode_error`],
//! [`encode_notification`] and [`encode_request`] serialize typed payloads straight to text,
//! with no intermediate `serde_json::Value`: a `process/read` answer can carry a megabyte of
//! output.

use serde::Serialize;

use super::message::{RequestId, RpcError};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::MALFORMED_MESSAGE_ID;
    use serde_json::json;

    #[test]
    fn envelopes_have_no_jsonrpc_field() {
        let text = encode_result(&RequestId::Integer(1), &json!({"a": 1})).unwrap();
        assert_eq!(text, r#"{"id":1,"result":{"a":1}}"#);
        let text = encode_error(&MALFORMED_MESSAGE_ID, &RpcError::invalid_request("bad"));
        assert_eq!(text, r#"{"id":-1,"error":{"code":-32600,"message":"bad"}}"#);
        let text = encode_notification("process/closed", &json!({"seq": 2})).unwrap();
        assert_eq!(text, r#"{"method":"process/closed","params":{"seq":2}}"#);
    }
}
