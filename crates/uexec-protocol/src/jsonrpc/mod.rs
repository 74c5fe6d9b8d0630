//! JSON-RPC envelopes of the dialect: no `"jsonrpc"` field, integer or string ids.
//!
//! Three rooms, so that reading and writing each stand beside the types they need:
//! 1. `message.rs`: what a message is made of: ids, error codes, errors, raw members, and
//!    [`Incoming`], a message as read;
//! 2. `parse.rs`: reading a frame into an [`Incoming`] field by field, and a method's params
//!    into its type ([`decode_params`]), without ever building a `serde_json::Value` of a
//!    peer's frame;
//! 3. `encode.rs`: writing typed payloads straight to the text of a frame.
//!
//! The API is flat (`jsonrpc::parse`, `jsonrpc::encode_error`, `jsonrpc::RawJson`).

mod encode;
mod message;
mod parse;

pub use encode::{encode_error, encode_notification, encode_request, encode_result};
pub use message::{ErrorCode, Incoming, RawJson, RequestId, RpcError, MALFORMED_MESSAGE_ID};
pub use parse::{decode_params, parse, ParseError, MAX_ERROR_DATA_BYTES};
