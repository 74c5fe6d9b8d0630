//! A caller's own environments (`StoreConfig::environments`: a daemon's connection brings
//! them) are the ones its `environment_id` names, not the store's.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::mpsc;
use uexec_core::backend::Backend;
use uexec_core::{Environments, ExecRequest, Status, StoreConfig};

use crate::fake_backend::FakeBackend;

fn in_environment(name: &str) -> ExecRequest {
    ExecRequest {
        cmd: "fake".into(),
        yield_time_ms: Some(250),
        environment_id: Some(name.to_owned()),
        ..ExecRequest::default()
    }
}

#[tokio::test(start_paused = true)]
async fn a_callers_environments_are_looked_up_instead_of_the_stores() {
    let (local, _) = mpsc::unbounded_channel();
    let (theirs_tx, mut theirs) = mpsc::unbounded_channel();
    let (mine_tx, mut mine) = mpsc::unbounded_channel();
    let config = StoreConfig {
        cwd: std::env::temp_dir(),
        default_shell: Some("/bin/sh".into()),
        // The fake runs no shell: nothing to snapshot.
        shell_snapshots: None,
        ..StoreConfig::default()
    };
    let store_envs: HashMap<String, Arc<dyn Backend>> =
        HashMap::from([("theirs".to_owned(), FakeBackend::new(theirs_tx) as _)]);
    let store = uexec_core::SessionStore::with_environments(
        FakeBackend::new(local),
        config.clone(),
        store_envs,
    );
    let caller = StoreConfig {
        environments: Some(Environments::new([(
            "mine".to_owned(),
            FakeBackend::new(mine_tx) as Arc<dyn Backend>,
        )])),
        ..config.clone()
    };

    let running = store
        .exec_command_for(
            &caller,
            in_environment("mine"),
            uexec_core::CallWith::default(),
        )
        .await
        .unwrap();
    assert!(
        matches!(running.status, Status::Running { .. }),
        "{:?}",
        running.status
    );
    assert!(
        mine.try_recv().is_ok(),
        "spawned by the caller's environment"
    );

    let refused = store
        .exec_command_for(
            &caller,
            in_environment("theirs"),
            uexec_core::CallWith::default(),
        )
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("unknown environment \"theirs\" (configured: mine)"),
        "{refused}"
    );
    assert!(theirs.try_recv().is_err(), "the store's was not asked");

    // A caller without environments of its own names the store's.
    store
        .exec_command_for(
            &config,
            in_environment("theirs"),
            uexec_core::CallWith::default(),
        )
        .await
        .unwrap();
    assert!(theirs.try_recv().is_ok());
    store.shutdown();
}
