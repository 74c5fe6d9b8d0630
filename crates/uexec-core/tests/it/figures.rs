//! A session's figures and its pause, as the store carries them from its backend: listed
//! while it runs, in the End and the final result once it exits (as the backend counted
//! them then), and a pause that reaches the backend only for a running session.

use std::sync::atomic::Ordering;

use uexec_core::backend::Usage;
use uexec_core::{EventKind, ExecError};

use crate::fake_backend::{fake_store, next_end, running};
use crate::helpers::poll;

fn cpu(usec: u64) -> Option<Usage> {
    Some(Usage {
        cpu_usec: usec,
        user_usec: usec,
        ..Usage::default()
    })
}

#[tokio::test(start_paused = true)]
async fn the_list_the_end_and_the_final_result_carry_the_backend_s_figures() {
    let (store, mut spawned) = fake_store(64);
    let mut events = store.subscribe();
    let (id, control) = running(&store, &mut spawned, false).await;
    let listed = |store: &uexec_core::SessionStore| {
        store
            .list_sessions()
            .into_iter()
            .find(|s| s.session_id == id)
            .unwrap()
    };
    assert_eq!(listed(&store).usage, None, "nothing counted: none shown");
    *control.usage.lock().unwrap() = cpu(250_000);
    assert_eq!(listed(&store).usage, cpu(250_000));
    // At the exit the backend has counted more: the End and the result say the total.
    *control.usage.lock().unwrap() = cpu(1_500_000);
    control.exit(0);
    control.close();
    let result = store.write_stdin(poll(id, 5000)).await.unwrap();
    assert_eq!(result.usage, cpu(1_500_000));
    let (_, end) = next_end(&mut events, id).await;
    let EventKind::End { usage, .. } = end else {
        unreachable!()
    };
    assert_eq!(usage, cpu(1_500_000));
    assert!((usage.unwrap().cpu_seconds() - 1.5).abs() < 1e-9);
    // An ended session keeps it.
    let ended = store.list_ended();
    let kept = ended.iter().find(|s| s.session_id == id).unwrap();
    assert_eq!(kept.usage, cpu(1_500_000));
}

#[tokio::test(start_paused = true)]
async fn a_pause_reaches_a_running_session_only() {
    let (store, mut spawned) = fake_store(64);
    let mut events = store.subscribe();
    let (id, control) = running(&store, &mut spawned, false).await;
    let paused = |store: &uexec_core::SessionStore| {
        store
            .list_sessions()
            .into_iter()
            .find(|s| s.session_id == id)
            .map(|s| s.paused)
    };
    store.pause(id, true).await.unwrap();
    assert!(control.frozen.load(Ordering::SeqCst));
    assert_eq!(paused(&store), Some(true));
    store.pause(id, false).await.unwrap();
    assert_eq!(paused(&store), Some(false));
    assert_eq!(
        store.pause(9999, true).await,
        Err(ExecError::UnknownProcess(9999))
    );
    control.exit(0);
    control.close();
    next_end(&mut events, id).await;
    let late = store.pause(id, true).await.unwrap_err();
    assert!(
        late.to_string()
            .contains(&format!("pausing session {id} failed: it has exited")),
        "{late}"
    );
}
