//! Policy monitors (SPEC §7): first failure wins, and End waits for a late verdict.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use uexec_core::{
    EndStatus, EventKind, EventStream, ExecError, MonitorHandle, PolicyMonitor, SessionStore,
};

use crate::fake_backend::{fake_store, next_end, req, FakeControl};
use crate::helpers::poll;

/// Fails the session `delay_ms` after its exit (or at once when `on_start`).
struct Verdict {
    delay_ms: u64,
    messages: Vec<&'static str>,
    on_start: bool,
}

impl PolicyMonitor for Verdict {
    fn watch(self: Box<Self>, session: MonitorHandle) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            if !self.on_start {
                session.exited().await;
            }
            tokio::time::sleep(Duration::from_millis(self.delay_ms)).await;
            for m in self.messages {
                session.fail_and_terminate(m);
            }
        })
    }
}

/// A fake session with one monitor: the store, the session id, its process, its events.
async fn monitored(monitor: Verdict) -> (Arc<SessionStore>, i32, Arc<FakeControl>, EventStream) {
    let (store, mut spawned) = fake_store(64);
    let events = store.subscribe();
    let snap = store
        .exec_command_monitored(req(false), vec![Box::new(monitor)])
        .await
        .unwrap();
    let control = spawned.recv().await.unwrap();
    (store, snap.session_id.expect("running"), control, events)
}

fn verdict(delay_ms: u64, messages: Vec<&'static str>, on_start: bool) -> Verdict {
    Verdict {
        delay_ms,
        messages,
        on_start,
    }
}

#[tokio::test(start_paused = true)]
async fn end_waits_for_a_verdict_10ms_after_exit_and_reports_failed() {
    let (store, id, control, mut events) =
        monitored(verdict(10, vec!["network access denied"], false)).await;
    control.print("partial output").await;
    control.exit(0);
    control.close();
    let (_, end) = next_end(&mut events, id).await;
    let EventKind::End {
        exit_code,
        status,
        aggregated_output,
        failure,
        ..
    } = end
    else {
        unreachable!()
    };
    assert_eq!(
        status,
        EndStatus::Failed,
        "a denied process is never a success"
    );
    assert_eq!(exit_code, Some(-1));
    assert_eq!(failure.as_deref(), Some("network access denied"));
    assert_eq!(aggregated_output, "partial output\nnetwork access denied");
    let err = store.write_stdin(poll(id, 0)).await.unwrap_err();
    assert_eq!(
        err,
        ExecError::ProcessFailed {
            session_id: id,
            message: "network access denied".into()
        }
    );
}

#[tokio::test(start_paused = true)]
async fn a_verdict_later_than_the_grace_is_not_awaited() {
    let (_store, id, control, mut events) =
        monitored(verdict(5_000, vec!["too late"], false)).await;
    control.exit(0);
    control.close();
    let (_, end) = next_end(&mut events, id).await;
    let EventKind::End { status, .. } = end else {
        unreachable!()
    };
    assert_eq!(status, EndStatus::Completed);
}

#[tokio::test(start_paused = true)]
async fn the_first_failure_message_is_preserved() {
    let (store, id, _control, mut events) =
        monitored(verdict(1_000, vec!["first", "second"], true)).await;
    let err = store.write_stdin(poll(id, 5000)).await.unwrap_err();
    assert_eq!(
        err,
        ExecError::ProcessFailed {
            session_id: id,
            message: "first".into()
        }
    );
    let (_, end) = next_end(&mut events, id).await;
    let EventKind::End {
        failure, exit_code, ..
    } = end
    else {
        unreachable!()
    };
    assert_eq!(failure.as_deref(), Some("first"));
    assert_eq!(exit_code, Some(-1));
}
