//! Property tests of the wire types: frame parsing, base64 chunks, `file://` URIs.
#![cfg(unix)]
// Test helpers panic on purpose: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use proptest::prelude::*;
use serde_json::{json, Value};
use uexec_protocol::jsonrpc::{
    self, encode_error, encode_notification, encode_request, encode_result, RawJson,
};
use uexec_protocol::{
    file_uri, ByteChunk, Incoming, OutputNotification, OutputStream, RequestId, RpcError,
};

fn request_id() -> impl Strategy<Value = RequestId> {
    prop_oneof![
        any::<i64>().prop_map(RequestId::Integer),
        ".{0,12}".prop_map(RequestId::String)
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        ".{0,10}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(".{0,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn parsing_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = jsonrpc::parse(&bytes);
    }

    #[test]
    fn any_json_is_a_message_or_a_parse_error_answerable_with_minus_one(value in json_value()) {
        if let Err(e) = jsonrpc::parse(value.to_string().as_bytes()) {
            let answer: Value = serde_json::from_str(&encode_error(&jsonrpc::MALFORMED_MESSAGE_ID, &e.to_rpc_error())).unwrap();
            prop_assert_eq!(&answer["id"], &json!(-1));
            prop_assert_eq!(&answer["error"]["code"], &json!(-32600));
        }
    }

    #[test]
    fn requests_round_trip(id in request_id(), method in "[a-z]{1,8}(/[a-z]{1,8})?", params in json_value()) {
        let text = encode_request(&id, &method, &params).unwrap();
        prop_assert!(!text.contains("jsonrpc"));
        let parsed = jsonrpc::parse(text.as_bytes()).unwrap();
        prop_assert_eq!(parsed, Incoming::Request { id, method, params: Some(RawJson::from_value(&params).unwrap()) });
    }

    #[test]
    fn responses_round_trip(id in request_id(), result in json_value(), code in any::<i64>(), message in ".{0,20}") {
        let ok = jsonrpc::parse(encode_result(&id, &result).unwrap().as_bytes()).unwrap();
        prop_assert_eq!(ok, Incoming::Response { id: id.clone(), outcome: Ok(RawJson::from_value(&result).unwrap()) });
        let error = RpcError { code, message, data: None };
        let err = jsonrpc::parse(encode_error(&id, &error).as_bytes()).unwrap();
        prop_assert_eq!(err, Incoming::Response { id, outcome: Err(error) });
    }

    #[test]
    fn byte_chunks_round_trip_through_notifications(bytes in prop::collection::vec(any::<u8>(), 0..2048), seq in any::<u64>()) {
        let note = OutputNotification {
            process_id: "p".into(),
            seq,
            stream: OutputStream::Pty,
            chunk: ByteChunk::from(bytes.clone()),
        };
        let text = encode_notification("process/output", &note).unwrap();
        let Incoming::Notification { params: Some(params), .. } = jsonrpc::parse(text.as_bytes()).unwrap() else {
            panic!("not a notification: {text}");
        };
        let back: OutputNotification = params.decode().unwrap();
        prop_assert_eq!(back.chunk.into_bytes().to_vec(), bytes);
    }

    #[test]
    fn the_direct_output_encoder_equals_serde(
        process_id in ".{0,16}",
        seq in any::<u64>(),
        stream in prop_oneof![Just(OutputStream::Stdout), Just(OutputStream::Stderr), Just(OutputStream::Pty)],
        bytes in prop::collection::vec(any::<u8>(), 0..600),
    ) {
        let note = OutputNotification {
            process_id: process_id.clone(),
            seq,
            stream,
            chunk: ByteChunk::from(bytes.clone()),
        };
        let by_serde = encode_notification("process/output", &note).unwrap();
        prop_assert_eq!(OutputNotification::encode(&process_id, seq, stream, &bytes), by_serde);
    }

    #[test]
    fn non_base64_text_is_refused(text in "[^A-Za-z0-9+/=]{1,8}") {
        prop_assert!(serde_json::from_value::<ByteChunk>(json!(text)).is_err());
    }

    #[test]
    fn file_uris_round_trip(parts in prop::collection::vec(prop::collection::vec(any::<u8>().prop_filter("no NUL or slash", |b| *b != 0 && *b != b'/'), 1..12), 0..5)) {
        let mut bytes = Vec::new();
        for p in &parts {
            bytes.push(b'/');
            bytes.extend_from_slice(p);
        }
        if bytes.is_empty() {
            bytes.push(b'/');
        }
        let path = PathBuf::from(OsStr::from_bytes(&bytes));
        let uri = file_uri::to_uri(&path);
        prop_assert!(uri.is_ascii());
        prop_assert_eq!(file_uri::parse(&uri).unwrap(), path);
    }
}
