//! Who reports an exit, and what: exactly one call, after the output and the policy
//! verdicts are in, with what the End says; a cancelled call leaves both to the next one.

use std::time::Duration;

use futures::future::BoxFuture;
use tokio::time::Instant;
use uexec_core::{EndStatus, EventKind, ExecError, MonitorHandle, PolicyMonitor};

use crate::fake_backend::{fake_store, next_end, req, running};
use crate::helpers::poll;

/// Fails the session 10 ms after its exit, like a late network-denial verdict.
struct LateDenial;

impl PolicyMonitor for LateDenial {
    fn watch(self: Box<Self>, session: MonitorHandle) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            session.exited().await;
            tokio::time::sleep(Duration::from_millis(10)).await;
            session.fail_and_terminate("denied: example.com");
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_call_that_sees_the_exit_reports_a_late_verdict_like_the_end() {
    let (store, mut spawned) = fake_store(64);
    let mut events = store.subscribe();
    let snap = store
        .exec_command_monitored(req(false), vec![Box::new(LateDenial)])
        .await
        .unwrap();
    let id = snap.session_id().expect("running");
    let control = spawned.recv().await.unwrap();
    let poller = {
        let store = store.clone();
        tokio::spawn(async move { store.write_stdin(poll(id, 5000)).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    control.print("partial").await;
    control.exit(0);
    control.close();
    let reported = poller.await.unwrap();
    let (_, end) = next_end(&mut events, id).await;
    let EventKind::End { status, .. } = end else {
        unreachable!()
    };
    assert_eq!(status, EndStatus::Failed);
    assert_eq!(
        reported,
        Err(ExecError::ProcessFailed {
            session_id: id,
            message: "denied: example.com".into()
        }),
        "the call must say what the End says"
    );
}

#[tokio::test(start_paused = true)]
async fn output_after_an_exit_just_before_the_deadline_reaches_the_call() {
    let (store, mut spawned) = fake_store(64);
    let (id, control) = running(&store, &mut spawned, false).await;
    let started = Instant::now();
    let poller = {
        let store = store.clone();
        tokio::spawn(async move { store.write_stdin(poll(id, 5000)).await })
    };
    // The exit lands 10 ms before the window's end; the last bytes and the close 20 ms later.
    tokio::time::sleep_until(started + Duration::from_millis(4990)).await;
    control.exit(0);
    tokio::time::sleep(Duration::from_millis(20)).await;
    control.print("last line\n").await;
    control.close();
    let snap = poller.await.unwrap().unwrap();
    assert_eq!(snap.exit_code(), Some(0));
    assert_eq!(snap.output, "last line\n", "printed before the close");
}

#[tokio::test(start_paused = true)]
async fn two_queued_callers_get_the_exit_once() {
    let (store, mut spawned) = fake_store(64);
    let (id, control) = running(&store, &mut spawned, false).await;
    let first = {
        let store = store.clone();
        tokio::spawn(async move { store.write_stdin(poll(id, 60_000)).await })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    let second = {
        let store = store.clone();
        tokio::spawn(async move { store.write_stdin(poll(id, 60_000)).await })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    control.print("bye").await;
    control.exit(0);
    control.close();
    let first = first.await.unwrap().unwrap();
    assert_eq!((first.exit_code(), first.output.as_str()), (Some(0), "bye"));
    assert_eq!(
        second.await.unwrap(),
        Err(ExecError::UnknownProcess(id)),
        "the exit was already reported"
    );
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_poll_leaves_the_output_and_the_exit_to_the_next_call() {
    let (store, mut spawned) = fake_store(64);
    let (id, control) = running(&store, &mut spawned, false).await;
    let cancelled = {
        let store = store.clone();
        tokio::spawn(async move { store.write_stdin(poll(id, 300_000)).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    control.print("DONE\n").await;
    control.exit(0);
    control.close();
    // Cancelled in the same instant the exit lands, before it could conclude.
    cancelled.abort();
    assert!(cancelled.await.unwrap_err().is_cancelled());
    let snap = store.write_stdin(poll(id, 5000)).await.unwrap();
    assert_eq!(
        (snap.exit_code(), snap.output.as_str()),
        (Some(0), "DONE\n")
    );
}
