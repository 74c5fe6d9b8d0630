//! Termination, cancellation and shutdown (SPEC §6).

use std::time::Duration;

use uexec_core::{ExecError, ExecRequest};

use crate::helpers::{exec, marker, procs_with, store, wait_gone};

#[tokio::test]
async fn cancelling_a_call_never_kills_its_stored_session() {
    let store = store();
    let m = marker();
    let call = store.exec_command(exec(&format!("sleep {m}"), 30_000));
    assert!(tokio::time::timeout(Duration::from_millis(800), call)
        .await
        .is_err());
    assert!(
        !procs_with(&m).is_empty(),
        "the process must outlive the cancelled call"
    );
    let listed = store.list_sessions();
    assert_eq!(listed.len(), 1);
    let id = listed[0].session_id;
    // The guard of the first call is gone: terminate removes the entry at once.
    store.terminate(id).unwrap();
    wait_gone(&m).await;
    assert!(store.list_sessions().is_empty());
}

#[tokio::test]
async fn clean_all_and_shutdown_kill_every_session() {
    let store = store();
    let (a, b) = (marker(), marker());
    for (m, tty) in [(&a, false), (&b, true)] {
        let req = ExecRequest {
            tty: Some(tty),
            ..exec(&format!("sleep {m}"), 250)
        };
        assert!(store
            .exec_command(req)
            .await
            .unwrap()
            .session_id()
            .is_some());
    }
    store.shutdown();
    wait_gone(&a).await;
    wait_gone(&b).await;
    assert!(store.list_sessions().is_empty());
    assert_eq!(
        store.exec_command(exec("true", 250)).await.unwrap_err(),
        ExecError::ShutDown
    );
}

#[tokio::test]
async fn dropping_the_store_kills_its_sessions() {
    let store = store();
    let m = marker();
    store
        .exec_command(exec(&format!("sleep {m}"), 250))
        .await
        .unwrap();
    drop(store);
    wait_gone(&m).await;
}
