//! The notifications a server pushes for each process: `process/output`, `process/exited`,
//! `process/closed`.
//!
//! All three draw from one `seq` counter per process, starting at 1, without gaps. They may
//! arrive in any order relative to each other except that `closed` comes last: it is sent
//! once every stream hit EOF *and* the exit is known. A client keys them by `seq` and fills
//! gaps with `process/read` (output retained) after a reconnect.

use serde::{Deserialize, Serialize};

use crate::chunk::ByteChunk;
use crate::method::Method;
use crate::process::OutputStream;

/// `process/output`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputNotification {
    pub process_id: String,
    pub seq: u64,
    pub stream: OutputStream,
    pub chunk: ByteChunk,
}

impl OutputNotification {
    /// `{"method":"process/output","params":{...}}` as text, byte for byte what
    /// `jsonrpc::encode_notification` gives, without the intermediate base64 `String` and
    /// without scanning the base64 for characters to escape (it has none). Output floods go
    /// through here once per chunk.
    pub fn encode(process_id: &str, seq: u64, stream: OutputStream, bytes: &[u8]) -> String {
        let mut out = String::with_capacity(96 + process_id.len() + bytes.len().div_ceil(3) * 4);
        out.push_str(r#"{"method":""#);
        out.push_str(Method::ProcessOutput.as_str());
        out.push_str(r#"","params":{"processId":"#);
        push_json_string(&mut out, process_id);
        out.push_str(r#","seq":"#);
        out.push_str(&seq.to_string());
        out.push_str(r#","stream":""#);
        out.push_str(stream.as_str());
        out.push_str(r#"","chunk":""#);
        base64_simd::STANDARD.encode_append(bytes, &mut out);
        out.push_str(r#""}}"#);
        out
    }
}

fn push_json_string(out: &mut String, text: &str) {
    match serde_json::to_string(text) {
        Ok(quoted) => out.push_str(&quoted),
        // Serializing a `&str` cannot fail; keep the output valid JSON regardless.
        Err(_) => out.push_str(r#""""#),
    }
}

/// `process/exited`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExitedNotification {
    pub process_id: String,
    pub seq: u64,
    /// The status, or `128 + N` when killed by signal N; `-1` when unknown.
    pub exit_code: i32,
    #[serde(default)]
    pub sandbox_denied: bool,
}

/// `process/closed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClosedNotification {
    pub process_id: String,
    pub seq: u64,
}
