//! Background jobs die with their session (SPEC §6).

use uexec_core::ExecRequest;

use crate::helpers::{exec, marker, store, wait_gone, wait_present};

#[tokio::test]
async fn background_jobs_die_with_a_terminated_session() {
    let store = store();
    for tty in [false, true] {
        let (bg, fg) = (marker(), marker());
        let cmd = format!("sleep {bg} & echo bg-started; exec sleep {fg}");
        let req = ExecRequest {
            tty: Some(tty),
            ..exec(&cmd, 500)
        };
        let id = store.exec_command(req).await.unwrap().session_id().unwrap();
        wait_present(&bg).await;
        store.terminate(id).unwrap();
        wait_gone(&fg).await;
        wait_gone(&bg).await;
    }
}

#[tokio::test]
async fn background_jobs_die_once_the_exit_is_reported() {
    let store = store();
    let bg = marker();
    let s = store
        .exec_command(exec(&format!("sleep {bg} & echo started"), 5000))
        .await
        .unwrap();
    assert_eq!(s.exit_code(), Some(0));
    wait_gone(&bg).await;
}
