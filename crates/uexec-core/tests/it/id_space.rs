//! Stores that share an id space (a daemon's owners) never hand out the same session id.

use std::sync::Arc;

use uexec_core::store::IdSpace;
use uexec_core::{LocalBackend, SessionStore, StoreConfig};

use crate::helpers::exec;

#[tokio::test]
async fn stores_sharing_a_space_use_distinct_ids_and_free_them() {
    let space = Arc::new(IdSpace::default());
    let config = StoreConfig {
        cwd: std::env::temp_dir(),
        deterministic_ids: true,
        default_shell: Some("/bin/bash".into()),
        ..StoreConfig::default()
    };
    let make = || {
        SessionStore::with_id_space(
            Arc::new(LocalBackend),
            config.clone(),
            Default::default(),
            space.clone(),
        )
    };
    let (a, b) = (make(), make());
    let first = a.exec_command(exec("exec sleep 30", 250)).await.unwrap();
    let second = b.exec_command(exec("exec sleep 30", 250)).await.unwrap();
    assert_eq!(
        (first.session_id(), second.session_id()),
        (Some(1000), Some(1001))
    );
    a.terminate(1000).unwrap();
    // 1000 is free again; 1001 is still b's.
    let third = a.exec_command(exec("exec sleep 30", 250)).await.unwrap();
    assert_eq!(third.session_id(), Some(1002), "max + 1 of the ids in use");
    drop(b);
    let fourth = a.exec_command(exec("exec sleep 30", 250)).await.unwrap();
    assert_eq!(fourth.session_id(), Some(1003));
    a.clean_all();
    let fifth = a.exec_command(exec("true", 1000)).await.unwrap();
    assert_eq!(fifth.exit_code(), Some(0));
    let sixth = a.exec_command(exec("exec sleep 30", 250)).await.unwrap();
    assert_eq!(sixth.session_id(), Some(1000), "everything was freed");
    a.clean_all();
}
