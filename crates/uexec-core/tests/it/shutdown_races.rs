//! Calls caught by a shutdown or a cancel half-way: nothing is stored in a dead store, and
//! no id stays reserved for a call that never started its process.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use uexec_core::backend::{Backend, BackendError, SpawnSpec, SpawnedProcess};
use uexec_core::{ExecError, ExecRequest, SessionStore, StoreConfig};

use crate::fake_backend::{fake_store, req};

#[tokio::test(start_paused = true)]
async fn a_call_in_its_grace_during_shutdown_stores_nothing_and_kills_its_process() {
    let (store, mut spawned) = fake_store(64);
    let call = {
        let store = store.clone();
        tokio::spawn(async move { store.exec_command(req(false)).await })
    };
    let control = spawned.recv().await.unwrap();
    // Inside the 150 ms early-exit grace.
    tokio::time::sleep(Duration::from_millis(50)).await;
    store.shutdown();
    assert_eq!(call.await.unwrap(), Err(ExecError::ShutDown));
    assert!(store.list_sessions().is_empty());
    assert!(
        control.terminated(),
        "the process must not outlive the store"
    );
}

/// A backend whose spawns never finish (a remote server that does not answer).
struct Stalled;

impl Backend for Stalled {
    fn spawn(&self, _spec: SpawnSpec) -> BoxFuture<'_, Result<SpawnedProcess, BackendError>> {
        Box::pin(futures::future::pending())
    }
}

#[tokio::test(start_paused = true)]
async fn a_call_cancelled_during_the_spawn_releases_its_id() {
    let config = StoreConfig {
        cwd: std::env::temp_dir(),
        default_shell: Some("/bin/sh".into()),
        deterministic_ids: true,
        ..StoreConfig::default()
    };
    let store = SessionStore::new(Arc::new(Stalled), config);
    let request = ExecRequest {
        cmd: "true".into(),
        ..ExecRequest::default()
    };
    for _ in 0..3 {
        let call = store.exec_command(request.clone());
        assert!(tokio::time::timeout(Duration::from_millis(100), call)
            .await
            .is_err());
    }
    assert_eq!(store.reserved_ids(), 0, "cancelled spawns hold no id");
}
