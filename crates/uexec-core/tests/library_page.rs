//! The book's page on the library (docs/src/library.md) shows this file's example between
//! its ANCHOR lines, as it is: the example runs here, so the page cannot drift from the API.
#![allow(clippy::unwrap_used)]

// ANCHOR: example
use std::sync::Arc;

use uexec_core::{ExecRequest, LocalBackend, SessionStore, StoreConfig, WriteRequest};

#[tokio::test]
async fn a_command_outlives_its_window_and_a_poll_reads_its_end() {
    // A store of sessions whose processes run on this machine.
    let store = SessionStore::new(Arc::new(LocalBackend), StoreConfig::default());

    // The call watches the command for 500 ms: it still runs then, so the snapshot carries
    // what it printed so far and a session id instead of an exit code.
    let first = store
        .exec_command(ExecRequest {
            cmd: "echo started; sleep 1; echo done".into(),
            login: Some(false),
            yield_time_ms: Some(500),
            ..ExecRequest::default()
        })
        .await
        .unwrap();
    assert!(first.output.contains("started"));
    assert_eq!(first.exit_code(), None);
    let session_id = first.session_id().unwrap();

    // An empty write is a poll: it returns when the command exits, with the rest of its
    // output (nothing lost, nothing repeated) and its exit code.
    let last = store
        .write_stdin(WriteRequest {
            session_id,
            chars: String::new(),
            ..WriteRequest::default()
        })
        .await
        .unwrap();
    assert!(last.output.contains("done"));
    assert!(!last.output.contains("started"));
    assert_eq!(last.exit_code(), Some(0));
}
// ANCHOR_END: example
